"""Every exercise's judge against its planted bugs (plants/exNNN.py): the reference solution passes, the
generated stub is "not implemented" on every case, and each planted bug is rejected by a FIXED case with its
verdict and a hint that names its cause, and names no other plant's cause, at every seed; no hint holds a
line of the solution (hint_leaks.py).

Stubs are generated afresh from the solutions into a temporary folder, so what a learner wrote in practice/
does not change what these tests mean. The submissions run in forked children (fast); the sandbox that the
command line uses is tested on every exercise's solution, stub and two plants in test_judge_exercises.py,
and on hostile code in test_judge_isolation.py.
"""
from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import pytest
from hint_leaks import answer_lines_of, leaks
from plants import BUGS, plant_file

from pagedkv_lib.judge.cases import diff_free, kernel_harness
from pagedkv_lib.judge.grading import grade
from pagedkv_lib.judge.outcome import NOT_IMPLEMENTED
from pagedkv_lib.judge.registry import EXERCISES, get
from pagedkv_lib.judge.stubs import make_stub

pytestmark = pytest.mark.slow          # every exercise's solution, stub and planted bugs graded


def planted(exercise_id: int, tmp_path) -> list:
    """The files of the planted bugs of one exercise (the solution with each plant's edits applied)."""
    return [plant_file(exercise_id, name, tmp_path) for name in BUGS[exercise_id]]


def skip_on_an_old_interpreter(result) -> None:
    """Triton 3.6's interpreter (the GPU image's) with a recent NumPy cannot run the decode kernels: the judge
    says why (kernel_harness.INTERPRETER_TROUBLE) rather than blame the submission, and the test skips."""
    failure = result.first_failure
    if failure is not None and failure.outcome.message.removeprefix("RuntimeError: ") in \
            kernel_harness.INTERPRETER_TROUBLE.values():
        pytest.skip(failure.outcome.message)


@functools.cache
def rejected_here() -> bool:
    """Whether this Triton's interpreter refuses a scalar test in a mask (3.9's does, 3.0's does not, a GPU
    compiles it). Probed in a fresh process: triton 3.0 runs no forked kernel after the parent ran one."""
    probe = "from triton_mask_probe import interpreter_rejects_a_scalar_in_a_mask as r; print(int(r()))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=Path(__file__).parent, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().endswith("1")


def dots_counted_here() -> bool:
    """Whether this Triton's interpreter lets the judge count tl.dot calls (triton_primer.gpu_dot_rule
    yields a count from 3.3 on; before, it yields None and 135's "uses tl.dot" clause goes unchecked)."""
    from pagedkv_lib.kernels.triton_primer import gpu_dot_rule

    with gpu_dot_rule() as dots:
        return dots is not None


def check_plants(exercise_id: int, results, seed: int, names=None) -> None:
    """Each plant (those `names`, or all): not passed, its verdict, caught first by a fixed case, its hint
    words in the report, and no other plant's words (of another cause) in its hint."""
    plants = BUGS[exercise_id]
    graded = [(name, plants[name]) for name in (names or plants)]
    for (name, plant), result in zip(graded, results, strict=True):
        failure = result.first_failure
        where = f"{exercise_id}/{name} at seed {seed}"
        if plant.interpreter_only and not rejected_here():
            assert result.ok, f"{where}: valid where this Triton accepts it, yet {result.verdict}"
            continue
        if plant.counts_dots and not dots_counted_here():
            assert result.ok, f"{where}: this interpreter counts no tl.dot, yet {result.verdict}"
            continue
        assert not result.ok and failure is not None, f"{where}: the judge missed it"
        outcome = result.load or failure.outcome
        assert result.verdict == plant.verdict, f"{where}: {result.verdict}: {outcome}"
        assert failure.name.startswith("fixed/"), f"{where}: first caught by {failure.name}, not a fixed case"
        assert outcome.message, where
        assert plant.hint in f"{outcome.message} {outcome.hint}", f"{where}: {outcome}"
        given_away = leaks(outcome.hint, answer_lines_of(exercise_id))
        assert not given_away, f"{where}: its hint holds a line of the solution: {given_away}"
        for other in plants.values():
            if plant.hint in other.hint or other.hint in plant.hint:
                continue                                             # the same cause, or words too close
            assert other.hint not in outcome.hint, f"{where}: its hint names another cause: {outcome.hint}"


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
    check_plants(exercise_id, results, 0)


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_judge_fixed_cases_are_the_same_at_every_seed(exercise_id):
    """A fixed case is fixed: every plant is first caught by a fixed case at seed 0 (check_plants), and the
    fixed cases are the same at every seed, so each plant is caught, with its hint, at any seed. (Grading
    every plant again at other seeds would repeat the same computation.)"""
    module = get(exercise_id).cases()
    first = [c for c in module.build(0) if c.name.startswith("fixed/")]
    assert len(first) >= 5
    for seed in (1, 2, 3):
        again = [c for c in module.build(seed) if c.name.startswith("fixed/")]
        assert [c.name for c in again] == [c.name for c in first]
        for a, b in zip(first, again):
            assert diff_free(a.args, b.args), f"{exercise_id} {a.name} differs at seed {seed}"
