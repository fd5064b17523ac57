"""The sandbox: whatever a submission does, it ends in a clear non-passing verdict within the limits.

Every hostile submission of judge_plants/adversarial.py is graded with short limits in forked children (the
judge's logic: channels, limits, restarts, the library's guard), and one of each kind of misbehaviour again
in the bubblewrap sandbox the command line uses (a child there starts a fresh Python: the whole set would
take minutes); none may pass, none may hang, none may crash the judge, and nothing it prints reaches the
judge's own output.
"""
from __future__ import annotations

import time

import pytest
from judge_plants.adversarial import ADVERSARIAL

from pagedkv_lib.judge.grading import grade
from pagedkv_lib.judge.sandbox import Limits

LIMITS = Limits(time_limit_s=1.0, import_limit_s=3.0, total_limit_s=6.0, memory_limit_mb=768,
                output_limit_bytes=2**20)
STARTUP_S = 6.0     # a child's own start (python, torch; more on a busy machine): not the submission's
WORST_S = LIMITS.import_limit_s + LIMITS.total_limit_s + (1 + LIMITS.max_restarts) * STARTUP_S + 3.0


IN_THE_SANDBOX = {"infinite_loop", "sys_exit_at_import", "os_exit_inside", "allocates_64_gib",
                  "floods_stdout", "segfaults", "forges_a_finished_frame", "closes_every_fd",
                  "patches_torch_comparisons", "reexports_the_library", "loads_the_solution_by_path"}
RUNS = [(ex, "fork") for ex in sorted({ex for ex, _, _ in ADVERSARIAL.values()})]
RUNS += [(ex, "bwrap") for ex in sorted({ADVERSARIAL[n][0] for n in IN_THE_SANDBOX})]


@pytest.mark.parametrize("exercise_id, isolation", RUNS)
def test_judge_every_hostile_submission_gets_a_clear_verdict_in_time(exercise_id, isolation, tmp_path, capfd):
    from pagedkv_lib.judge import isolation as iso

    if isolation == "bwrap" and iso.bwrap_path() is None:
        pytest.skip("bwrap is missing or cannot sandbox here (.ci/run installs it)")
    names = [n for n, (ex, _, _) in ADVERSARIAL.items()
             if ex == exercise_id and (isolation == "fork" or n in IN_THE_SANDBOX)]
    paths = []
    for name in names:
        path = tmp_path / f"{exercise_id}_{name}.py"
        path.write_text(ADVERSARIAL[name][1])
        paths.append(path)
    t0 = time.monotonic()
    results = grade(exercise_id, paths, limits=LIMITS, jobs=2, isolation=isolation)
    elapsed = time.monotonic() - t0
    out, err = capfd.readouterr()
    for name, result in zip(names, results, strict=True):
        allowed = ADVERSARIAL[name][2]
        failure = result.load or (result.first_failure and result.first_failure.outcome)
        assert not result.ok, f"{name} passed"
        assert result.verdict in allowed, f"{name}: {result.verdict}: {failure}"
        assert failure is not None and failure.message, name
        assert result.duration_s < WORST_S, f"{name} took {result.duration_s:.1f} s"
    assert elapsed < WORST_S * len(names) / 2 + 5
    assert "xxxxxxxxxx" not in out + err and "PASSED" not in out + err


def test_judge_keeps_what_a_submission_prints_but_caps_it(tmp_path):
    from judge_plants.adversarial import in_body

    chatty = tmp_path / "chatty.py"
    chatty.write_text(in_body("print('debugging', positions)"))
    flood = tmp_path / "flood.py"
    flood.write_text(ADVERSARIAL["floods_stdout"][1])
    ok, flooded = grade(122, [chatty, flood], limits=LIMITS, jobs=2)
    assert ok.ok and "debugging [0, 1, 2" in ok.output and ok.output_total < 10_000
    assert flooded.verdict == "runtime error" and "output limit" in flooded.first_failure.outcome.message
    assert len(flooded.output) <= LIMITS.output_keep_bytes < flooded.output_total


def test_judge_restarts_after_a_crash_and_skips_only_when_out_of_restarts(tmp_path):
    from judge_plants.adversarial import in_body

    once = tmp_path / "crash_on_empty.py"             # os._exit only on the case with no positions
    once.write_text(in_body("import os\nif not positions:\n    os._exit(3)"))
    (result,) = grade(122, [once], limits=LIMITS)
    crashed = [c for c in result.cases if c.verdict != "passed"]
    assert [c.name for c in crashed] == ["fixed/no_positions"]
    assert "exit code 3" in crashed[0].outcome.message


SLOW_HOG = ADVERSARIAL["fills_memory_slowly_past_the_time_limit"][1]
M_MMAP_THRESHOLD = -3                                   # glibc's mallopt parameter


def test_a_slow_memory_hog_is_a_memory_limit_even_when_the_judge_holds_garbage(tmp_path):
    """A forked child inherits the judge's uncollected garbage; freed after the child set its memory cap, it
    would hide what the hog holds (the parent reads the address space). The child collects first."""
    import gc

    hog = tmp_path / "122_hog.py"          # its gc.collect() frees the judge's garbage in the child
    hog.write_text(SLOW_HOG + "\nimport gc\ngc.collect()\n")

    class Cycle:
        pass

    was_enabled = gc.isenabled()
    gc.disable()
    try:
        garbage = Cycle()
        garbage.me, garbage.payload = garbage, bytearray(400 * 2**20)
        garbage.payload[:: 2**12] = b"x" * len(garbage.payload[:: 2**12])   # touched: really held
        del garbage
        (result,) = grade(122, [hog], limits=LIMITS, isolation="fork")
    finally:
        if was_enabled:
            gc.enable()
        gc.collect()
    assert result.verdict == "memory limit", result.first_failure.outcome


def test_a_slow_memory_hog_is_a_memory_limit_even_when_the_judge_heap_has_room(tmp_path):
    """A judge that freed large arrays (a long test run, a notebook) leaves free heap and a raised glibc
    mmap threshold; a forked hog's arrays would fill that heap without growing the address space the parent
    watches, and its deadline looked like a slow loop's (a time limit, twice in full CI runs). The child
    gives that heap back and the watch counts resident growth too."""
    import ctypes

    libc = ctypes.CDLL(None)
    if not hasattr(libc, "mallopt"):
        pytest.skip("not glibc")
    hog = tmp_path / "122_hog.py"
    hog.write_text(SLOW_HOG)
    libc.mallopt(M_MMAP_THRESHOLD, 64 * 2**20)          # as glibc raises it after large frees
    try:
        arrays = [bytearray(20 * 2**20) for _ in range(20)]    # 400 MiB on the heap ...
        pin = bytearray(2**18)                          # ... below a live block, so it is not trimmed
        del arrays
        (result,) = grade(122, [hog], limits=LIMITS, isolation="fork")
        del pin
    finally:
        libc.mallopt(M_MMAP_THRESHOLD, 2**17)           # glibc's initial value (its raising stays off)
    assert result.verdict == "memory limit", result.first_failure.outcome


def test_a_print_before_a_hang_reaches_the_report_in_the_sandbox(tmp_path, monkeypatch):
    """The sandboxed child's stdout is a pipe: block-buffered, a learner's print before an infinite loop would
    die in the buffer. It is line-buffered, like the forked child's."""
    from judge_plants.adversarial import in_body

    from pagedkv_lib.judge import isolation as iso

    if iso.bwrap_path() is None:
        pytest.skip("bwrap is missing or cannot sandbox here (.ci/run installs it)")
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)    # as a learner's shell has it
    hangs = tmp_path / "122_hangs.py"
    hangs.write_text(in_body("print('entered with', positions)\nwhile True:\n    pass"))
    (result,) = grade(122, [hangs], limits=LIMITS, isolation="bwrap")
    assert result.verdict == "time limit" and "entered with" in result.output
