"""Every exercise's judge against its planted bugs (judge_plants/bugs.py), one parametrized test: the
reference solution passes, the generated stub is "not implemented" on every case, and each planted bug is
rejected with its verdict and, where the plant names one, a hint that names its cause.

Stubs are generated afresh from the solutions into a temporary folder, so what a learner wrote in practice/
does not change what these tests mean. The submissions run in forked children (fast); the sandbox that the
command line uses is tested on the solutions in test_judge_exercises.py and on hostile code in
test_judge_isolation.py.
"""
from __future__ import annotations

import pytest
from judge_plants.bugs import BUGS

from pagedkv_lib.judge.cases import kernel_harness
from pagedkv_lib.judge.grading import grade
from pagedkv_lib.judge.outcome import NOT_IMPLEMENTED
from pagedkv_lib.judge.registry import get
from pagedkv_lib.judge.stubs import make_stub


def planted(exercise_id: int, tmp_path) -> list:
    """The files of the planted bugs of one exercise (the solution with each plant's edits applied)."""
    source = get(exercise_id).solution_path.read_text()
    paths = []
    for name, plant in BUGS[exercise_id].items():
        text = source
        for good, bad in plant.edits:
            assert text.count(good) == 1, f"{exercise_id}/{name}: the solution changed: update the plant"
            text = text.replace(good, bad)
        path = tmp_path / f"{exercise_id}_{name}.py"
        path.write_text(text)
        paths.append(path)
    return paths


def skip_on_an_old_interpreter(result) -> None:
    """Triton 3.6's interpreter (the GPU image's) with a recent NumPy cannot run the decode kernels: the judge
    says why (kernel_harness.INTERPRETER_TROUBLE) rather than blame the submission, and the test skips."""
    failure = result.first_failure
    if failure is not None and failure.outcome.message.removeprefix("RuntimeError: ") in \
            kernel_harness.INTERPRETER_TROUBLE.values():
        pytest.skip(failure.outcome.message)


@pytest.mark.parametrize("exercise_id", sorted(BUGS))
def test_judge_solution_passes_stub_is_not_implemented_and_every_planted_bug_gets_its_verdict_and_hint(
        exercise_id, tmp_path):
    ex = get(exercise_id)
    stub = tmp_path / ex.filename
    stub.write_text(make_stub(ex.solution_path.read_text(), exercise_id))
    bugs = planted(exercise_id, tmp_path)
    assert len(bugs) >= 3
    solution, practice, *results = grade(exercise_id, [ex.solution_path, stub, *bugs], jobs=2,
                                         isolation="fork")
    skip_on_an_old_interpreter(solution)
    assert solution.ok, (solution.first_failure, solution.load)
    assert practice.verdict == NOT_IMPLEMENTED and practice.passed == 0
    assert all(c.verdict == NOT_IMPLEMENTED for c in practice.cases)
    for (name, plant), result in zip(BUGS[exercise_id].items(), results, strict=True):
        failure = result.first_failure
        assert not result.ok and failure is not None, f"{exercise_id}/{name}: the judge missed it"
        outcome = result.load or failure.outcome
        assert result.verdict == plant.verdict, f"{name}: {result.verdict}: {outcome}"
        assert outcome.message, name
        if plant.hint is not None:
            assert plant.hint in f"{outcome.message} {outcome.hint}", f"{name}: {outcome}"
