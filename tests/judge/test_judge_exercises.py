"""The judge on exercises 121-129: the solutions pass at other seeds and in the sandbox, the stubs keep the
solutions' signatures and docstrings, and the committed stubs are up to date (planted bugs:
test_judge_plants.py).
"""
from __future__ import annotations

import ast

import pytest

from pagedkv_lib.judge import isolation
from pagedkv_lib.judge.grading import grade
from pagedkv_lib.judge.outcome import NOT_IMPLEMENTED
from pagedkv_lib.judge.registry import EXERCISES, get
from pagedkv_lib.judge.stubs import committed, make_stub, stub_of

IDS = list(range(121, 130))
ALL_IDS = sorted(EXERCISES)


@pytest.mark.parametrize("seed", [1, 2])
def test_12x_every_solution_passes_other_random_cases(seed):
    for exercise_id in IDS:
        (result,) = grade(exercise_id, [get(exercise_id).solution_path], seed=seed, isolation="fork")
        assert result.ok, (exercise_id, seed, result.first_failure)


@pytest.mark.slow
def test_12x_every_solution_passes_in_the_sandbox_the_cli_uses(tmp_path):
    """The planted bugs run in forked children (fast); the same answers come back from the sandbox."""
    if isolation.bwrap_path() is None:
        pytest.skip("bwrap is missing or cannot sandbox here (.ci/run installs Debian's bubblewrap)")
    for exercise_id in IDS:
        ex = get(exercise_id)
        stub = tmp_path / ex.filename
        stub.write_text(make_stub(ex.solution_path.read_text(), exercise_id))
        solution, practice = grade(exercise_id, [ex.solution_path, stub], jobs=2, isolation="bwrap")
        assert solution.ok and solution.isolation.startswith("bwrap"), (exercise_id, solution.first_failure)
        assert practice.verdict == NOT_IMPLEMENTED


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
