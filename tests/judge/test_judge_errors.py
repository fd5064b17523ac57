"""An error a contract promises is checked by type: an instance of the promised class (taken before the
submission is imported), never a class that only carries its name (plants/named_alike.py)."""
from __future__ import annotations

import builtins

import pytest
from plants.named_alike import NAMED_ALIKE

from pagedkv_lib.judge.cases.script import raised
from pagedkv_lib.judge.grading import grade
from pagedkv_lib.judge.registry import get


@pytest.mark.parametrize("exercise_id", sorted(NAMED_ALIKE))
def test_a_class_named_as_the_promised_error_is_not_it(exercise_id, tmp_path):
    source = get(exercise_id).solution_path.read_text()
    names, paths = list(NAMED_ALIKE[exercise_id]), []
    for name in names:
        text = source
        for good, bad in NAMED_ALIKE[exercise_id][name].edits:
            assert text.count(good) == 1, f"{exercise_id}/{name}: the solution changed"
            text = text.replace(good, bad)
        paths.append(tmp_path / f"{exercise_id}_{name}.py")
        paths[-1].write_text(text)
    for name, result in zip(names, grade(exercise_id, paths, jobs=2, isolation="fork"), strict=True):
        plant = NAMED_ALIKE[exercise_id][name]
        failure = result.load or result.first_failure.outcome
        assert result.verdict == plant.verdict, (name, result.verdict, failure)
        assert plant.hint in failure.hint + failure.message, (name, failure)


def test_what_a_step_records_of_an_error_is_its_class_not_its_name():
    alike = type("ValueError", (Exception,), {})
    narrower = type("DoubleFree", (builtins.ValueError,), {})
    assert raised(builtins.ValueError("x"), builtins.ValueError) == "ValueError"
    assert raised(narrower("x"), builtins.ValueError) == "ValueError"
    assert raised(alike("x"), builtins.ValueError).endswith("ValueError, not a ValueError")
    assert raised(builtins.KeyError("x"), builtins.ValueError) == "builtins.KeyError, not a ValueError"
