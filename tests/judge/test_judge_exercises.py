"""The judge on its exercises: every exercise graded as the command line grades it (solution, stub, two
plants; in the sandbox and in a fork; two seeds), 121-129's solutions at other seeds, the stubs keep the
solutions' signatures and docstrings, and the committed stubs are up to date (every planted bug:
test_judge_plants.py).
"""
from __future__ import annotations

import ast

import pytest
from plants import BUGS, plant_file
from test_judge_plants import check_plants, skip_on_an_old_interpreter

from pagedkv_lib.judge import isolation
from pagedkv_lib.judge.grading import grade
from pagedkv_lib.judge.outcome import NOT_IMPLEMENTED
from pagedkv_lib.judge.registry import EXERCISES, get
from pagedkv_lib.judge.stubs import committed, make_stub, stub_of

ALL_IDS = sorted(EXERCISES)


def users_path_files(exercise_id: int, folder) -> list:
    """The solution, its stub (generated afresh) and the first two of its plants that every Triton rejects."""
    ex = get(exercise_id)
    stub = folder / ex.filename
    stub.write_text(make_stub(ex.solution_path.read_text(), exercise_id))
    names = [n for n, p in BUGS[exercise_id].items() if not (p.interpreter_only or p.counts_dots)][:2]
    return [ex.solution_path, stub, *(plant_file(exercise_id, n, folder) for n in names)], names


# (isolation, seed): the command line's isolation (bwrap where this machine can sandbox, as in CI) at seed 0
# and 1, and a fork at seed 1; test_judge_plants.py grades the same files, and every other plant, in a fork
# at seed 0.
USERS_PATHS = [(isolation.choose(None), 0), (isolation.choose(None), 1), (isolation.FORK, 1)]


@pytest.mark.slow
@pytest.mark.parametrize("exercise_id", ALL_IDS)
def test_every_exercise_grades_as_the_cli_grades_it_in_the_sandbox_and_in_a_fork(exercise_id, tmp_path):
    """Every exercise, on the users' path: its solution passes, its stub is "not implemented" and two of its
    plants get their verdict and hint, in the isolation the command line picks at seed 0 and at seed 1, and
    in a fork at seed 1 (USERS_PATHS). This is what catches cases that do not survive the trip into the
    sandbox, and random cases of another seed."""
    files, names = users_path_files(exercise_id, tmp_path)
    for mode, seed in dict.fromkeys(USERS_PATHS):
        solution, practice, *plants = grade(exercise_id, files, seed=seed, jobs=2, isolation=mode)
        where = f"{exercise_id} in {mode} at seed {seed}"
        skip_on_an_old_interpreter(solution)
        assert solution.ok, (where, solution.load or solution.first_failure)
        assert solution.isolation.startswith(mode), (where, solution.isolation)
        assert practice.verdict == NOT_IMPLEMENTED, (where, practice.load or practice.first_failure)
        check_plants(exercise_id, plants, seed, names)


def test_committed_stubs_are_generated_from_the_solutions():
    """The COMMITTED practice/ files (git's HEAD) equal what the solutions generate; the working tree's
    practice/ is the learner's and is not looked at."""
    heads = {ex.filename: (committed(ex.practice_path), stub_of(ex)) for ex in EXERCISES.values()}
    if all(head is None for head, _ in heads.values()):
        pytest.skip("not a git checkout: no committed stubs to compare")
    bad = [name for name, (head, stub) in heads.items() if head != stub]
    assert not bad, ("committed stubs differ from their solutions: a maintainer regenerates them with "
                     "`python -m pagedkv_lib.judge.stubs` (it keeps any file that holds a learner's work)")


@pytest.mark.parametrize("exercise_id", ALL_IDS)
def test_stub_keeps_signatures_and_docstrings_and_only_raises(exercise_id):
    ex = EXERCISES[exercise_id]
    solution = ast.parse(ex.solution_path.read_text())
    stub = ast.parse(make_stub(ex.solution_path.read_text(), exercise_id))

    def defs(tree):
        """Qualified name -> node for every def and class, nested ones as Class.method."""
        found = {}
        for top in tree.body:
            if isinstance(top, (ast.FunctionDef, ast.ClassDef)):
                found[top.name] = top
                for sub in top.body if isinstance(top, ast.ClassDef) else ():
                    if isinstance(sub, ast.FunctionDef):
                        found[f"{top.name}.{sub.name}"] = sub
        return found

    sol_defs, stub_defs = defs(solution), defs(stub)
    assert set(ex.oracle) <= {n.name for n in stub.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert set(sol_defs) == set(stub_defs)
    for name, node in stub_defs.items():
        assert ast.get_docstring(node) == ast.get_docstring(sol_defs[name]), name
        if isinstance(node, ast.FunctionDef):
            assert ast.dump(node.args) == ast.dump(sol_defs[name].args), name
            body = [n for n in node.body if not isinstance(n, ast.Expr)]
            answer = len(body) == 1 and isinstance(body[0], ast.Raise)    # the stub leaves it to the learner
            if name.split(".")[0] in ex.oracle:
                assert answer, f"{name}: a graded function's stub body only raises"
            elif not answer:                                              # given code (e.g. 129's Block)
                assert ast.dump(node) == ast.dump(sol_defs[name]), f"{name}: given code changed"
    for name in ex.oracle:
        doc = ast.get_docstring(stub_defs[name]) or ""
        assert "Example" in doc or "Example" in (ast.get_docstring(stub) or ""), f"{name}: no example"
