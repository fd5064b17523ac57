"""Exercise 132, a scheduler step: the solution passes, the stub is not implemented, bugs are caught."""
from __future__ import annotations

from pathlib import Path

import pytest
from plants import BUGS

from pagedkv_lib.judge.cases import ex132
from pagedkv_lib.judge.registry import get

EXERCISE = get(132)
SOLUTION = EXERCISE.solution_path.read_text()

def test_132_every_case_set_runs_the_pool_dry_and_hits_the_prefix_cache():
    oracle = EXERCISE.oracle_namespace()
    cases = ex132.build(0)
    names = {c.name for c in cases}
    assert {"fixed/pool_dry_mid_decode", "fixed/head_never_fits_blocks_the_queue"} <= names
    preempted = hit = 0
    for case in cases:
        for step in ex132.run(oracle, case)["steps"]:
            if not step["is_prefill"]:
                preempted += len(set(step["before"]["running"]) - set(step["running"]))
            hit += step["is_prefill"] and sum(step["num_cached_tokens"]) > 0
    assert preempted >= 20 and hit >= 10


@pytest.mark.parametrize("case_name", ["fixed/pool_dry_mid_decode", "fixed/several_preemptions_one_step"])
def test_132_report_names_the_step_and_the_newest_first_rule(case_name, tmp_path):
    ((good, bad),) = BUGS[132]["preempts_the_oldest"].edits
    case = next(c for c in ex132.build(0) if c.name == case_name)
    ns: dict = {}
    exec(compile(SOLUTION.replace(good, bad), str(tmp_path / "bug.py"), "exec"), ns)
    outcome = ex132.check(case, ex132.run(EXERCISE.oracle_namespace(), case), ex132.run(ns, case))
    assert outcome.verdict == "wrong answer" and "NEWEST" in outcome.hint
    assert any(line.startswith("  step ") for line in outcome.details)


def test_132_docstring_example_holds():
    """The example of the stub's docstring, run against the oracle."""
    case = next(c for c in ex132.build(0) if c.name == "fixed/docstring_example")
    steps = ex132.run(EXERCISE.oracle_namespace(), case)["steps"]
    assert steps[0]["scheduled"] == [0, 1, 2] and steps[0]["is_prefill"]
    decode = steps[1]                         # each sequence holds 9 tokens: the 9th starts a third block
    assert decode["scheduled"] == [0, 1] and decode["waiting"] == [2] and decode["running"] == [0, 1]
    assert decode["status"][2] == "WAITING" and decode["block_tables"][2] == []
    assert len(decode["free_block_ids"]) == 1


def test_132_files_are_where_the_registry_says():
    assert Path(EXERCISE.practice_path).exists() and Path(EXERCISE.solution_path).exists()
