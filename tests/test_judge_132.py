"""Exercise 132, a scheduler step: the solution passes, the stub is not implemented, bugs are caught."""
from __future__ import annotations

from pathlib import Path

import pytest

from pagedkv_lib.judge.cases import ex132
from pagedkv_lib.judge.grading import grade
from pagedkv_lib.judge.registry import get
from pagedkv_lib.judge.stubs import make_stub

EXERCISE = get(132)
SOLUTION = EXERCISE.solution_path.read_text()

# name -> (text in the solution, its buggy replacement), or several such pairs: the usual mistakes
BUGS = {
    "skips_ahead_past_a_head_that_does_not_fit": [
        ("    while waiting and len(running) < max_num_seqs:\n        seq = waiting[0]\n",
         "    for seq in list(waiting):\n        if len(running) >= max_num_seqs:\n            break\n"),
        ("            break\n        block_manager.allocate(seq)",
         "            continue\n        block_manager.allocate(seq)"),
        ("running.append(waiting.popleft())", "waiting.remove(seq)\n        running.append(seq)"),
    ],
    "budget_counts_only_uncached_tokens": (
        "        num_batched_tokens += len(seq)\n",
        "        num_batched_tokens += len(seq) - seq.num_cached_tokens\n"),
    "max_num_seqs_counts_only_admissions": (
        "while waiting and len(running) < max_num_seqs:", "while waiting and len(scheduled) < max_num_seqs:"),
    "prefill_and_decode_mixed": ("    if scheduled:\n        return scheduled, True\n", ""),
    "preempts_the_oldest": ("                preempt(running.pop())",
                            "                preempt(running.popleft())"),
    "preempts_itself_first": ("            if running:\n                preempt(running.pop())",
                              "            if False:\n                pass"),
    "requeues_at_the_back": ("        waiting.appendleft(s)", "        waiting.append(s)"),
    "keeps_status_running": ("        s.status = SequenceStatus.WAITING\n", ""),
    "preempts_without_freeing": ("        block_manager.deallocate(s)\n", "        s.block_table.clear()\n"),
    "running_order_reversed": ("    running.extend(scheduled)", "    running.extendleft(scheduled)"),
    "appends_without_checking": ("        while not block_manager.can_append(seq):\n            if running:",
                                 "        while False:\n            if running:"),
    "is_prefill_as_int": ("        return scheduled, True\n", "        return scheduled, 1\n"),
}


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


def test_132_solution_passes_and_stub_is_not_implemented(tmp_path):
    stub = tmp_path / EXERCISE.filename
    stub.write_text(make_stub(SOLUTION, 132))
    solution, practice = grade(132, [EXERCISE.solution_path, stub], jobs=2)
    assert solution.ok, solution.first_failure
    assert practice.verdict == "not implemented" and practice.passed == 0


def test_132_judge_catches_every_planted_bug(tmp_path):
    paths = []
    for name, pairs in BUGS.items():
        source = SOLUTION
        for good, bad in pairs if isinstance(pairs, list) else [pairs]:
            assert source.count(good) == 1, f"{name}: the solution changed, update the planted bug"
            source = source.replace(good, bad)
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        paths.append(path)
    results = grade(132, paths, jobs=2, isolation="fork")
    for name, result in zip(BUGS, results, strict=True):
        assert not result.ok, f"the judge missed the planted bug {name}"
        failure = result.first_failure
        assert failure.outcome.verdict in ("wrong answer", "runtime error"), (name, failure.outcome)
        assert failure.outcome.message.startswith("step "), (name, failure.outcome.message)


@pytest.mark.parametrize("case_name", ["fixed/pool_dry_mid_decode", "fixed/several_preemptions_one_step"])
def test_132_report_names_the_step_and_the_newest_first_rule(case_name, tmp_path):
    good, bad = BUGS["preempts_the_oldest"]
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
