"""No hint gives an exercise away: no string that a case module can put in a hint or a message holds a line
of that exercise's reference solution (hint_leaks.py says how loosely "holds" is read). A module named
exNNN*.py speaks for exercise NNN; the shared ones (attention_cases.py, kernel_harness.py, ...) for every
exercise. The hints that the planted bugs actually get are checked the same way in test_judge_plants.py."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from hint_leaks import answer_lines_of, leaks, module_strings, solution_statements

from pagedkv_lib.judge.registry import EXERCISES, get

CASES = Path(get(121).cases().__file__).parent
# Exercise 138's hint for an output no known mistake explained, as it was: the whole algorithm, einsum
# strings included, after one wrong try. The test must be able to catch it.
OLD_138_RECIPE = ("absorb: q_c = einsum('bhd,hdc->bhc', q_nope, w_uk), q_pe rotated; per sequence gather its "
                  "n rows through the block table; scores = (q_c . c + q_pe . k_pe) / sqrt(Dn + R); latent "
                  "output = softmax . c; out = einsum('hc,hvc->hv', latent output, w_uv)")


lines_of = answer_lines_of            # the lines of a solution that its stub does not state


def speaks_for(path: Path) -> list:
    """The exercises whose hints a case module writes: NNN for exNNN*.py, every one for a shared module."""
    named = re.match(r"ex(\d{3})", path.name)
    return [int(named.group(1))] if named else sorted(EXERCISES)


@pytest.mark.slow                      # every string of every case module against its solutions
def test_no_string_of_a_case_module_holds_a_line_of_its_exercises_solution():
    found = []
    for path in sorted(CASES.glob("*.py")):
        for text in module_strings(path.read_text()):
            for exercise_id in speaks_for(path):
                found += [f"{path.name} ({exercise_id}): {text[:100]!r}... holds `{line}`"
                          for line in leaks(text, lines_of(exercise_id))]
    assert not found, "hints that give the answer away:\n" + "\n".join(found)


def test_the_leak_test_catches_138s_old_recipe_and_every_answer_line_spaced_otherwise():
    assert leaks(OLD_138_RECIPE, lines_of(138))
    for exercise_id in (127, 138):
        for line in lines_of(exercise_id):
            if any(" " in token for token in line):
                continue                    # a string with spaces (an error message): no hint's token
            assert leaks(f"the hint says: {'  '.join(line)}.", lines_of(exercise_id)), line


def test_what_the_stub_already_states_is_no_leak():
    """132's stub states `num_batched_tokens += len(seq)` in its contract: a hint may repeat the contract."""
    counted = ["num_batched_tokens", "+=", "len", "(", "seq", ")"]
    assert counted in solution_statements(get(132).solution_path.read_text())
    assert counted not in lines_of(132)
