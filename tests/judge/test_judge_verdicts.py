"""Whatever a submission does, it ends in a clear non-passing verdict within the limits, by one rule: a
MemoryError (or the system's kill) is a memory limit, a passed deadline a time limit, anything else that
ends the child early a runtime error.

Every submission of plants/adversarial.py is graded with short limits in forked children, and one of each
kind of misbehaviour again in the bubblewrap sandbox the command line uses (a child there starts a fresh
Python: the whole set would take minutes); none may pass, none may hang, none may crash the judge, and
nothing it prints reaches the judge's own output. Then what grading leaves behind: no zombie, whatever is
graded, and no effect of the learner's own edits while it runs.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from plants.adversarial import ADVERSARIAL

from pagedkv_lib.judge.grading import Limits, grade
from pagedkv_lib.judge.supervisor import WALL_FACTOR

LIMITS = Limits(time_limit_s=1.0, import_limit_s=3.0, total_limit_s=6.0, memory_limit_mb=768,
                output_limit_bytes=2**20)
STARTUP_S = 6.0     # a child's own start (python, torch; more on a busy machine): not the submission's
# the wall-clock backstop of loading and all cases (a submission that uses little CPU, failing case after
# case, runs until it), the children's own starts, and a little more
BACKSTOP_S = WALL_FACTOR * (LIMITS.import_limit_s + LIMITS.total_limit_s)
WORST_S = BACKSTOP_S + (1 + LIMITS.max_restarts) * STARTUP_S + 3.0


IN_THE_SANDBOX = {"infinite_loop", "sys_exit_at_import", "os_exit_inside", "allocates_64_gib",
                  "floods_stdout", "segfaults", "forges_a_finished_frame", "closes_every_fd",
                  "patches_torch_comparisons", "reexports_the_library", "loads_the_solution_by_path"}
RUNS = [(ex, "fork") for ex in sorted({ex for ex, _, _ in ADVERSARIAL.values()})]
RUNS += [(ex, "bwrap") for ex in sorted({ADVERSARIAL[n][0] for n in IN_THE_SANDBOX})]


@pytest.mark.slow
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
    from plants.adversarial import in_body

    chatty = tmp_path / "chatty.py"
    chatty.write_text(in_body("print('debugging', positions)"))
    flood = tmp_path / "flood.py"
    flood.write_text(ADVERSARIAL["floods_stdout"][1])
    ok, flooded = grade(122, [chatty, flood], limits=LIMITS, jobs=2)
    assert ok.ok and "debugging [0, 1, 2" in ok.output and ok.output_total < 10_000
    assert flooded.verdict == "runtime error" and "output limit" in flooded.first_failure.outcome.message
    assert len(flooded.output) <= LIMITS.output_keep_bytes < flooded.output_total


def test_judge_restarts_after_a_crash_and_skips_only_when_out_of_restarts(tmp_path):
    from plants.adversarial import in_body

    once = tmp_path / "crash_on_empty.py"             # os._exit only on the case with no positions
    once.write_text(in_body("import os\nif not positions:\n    os._exit(3)"))
    (result,) = grade(122, [once], limits=LIMITS)
    crashed = [c for c in result.cases if c.verdict != "passed"]
    assert [c.name for c in crashed] == ["fixed/no_positions"]
    assert "exit code 3" in crashed[0].outcome.message


@pytest.mark.slow
def test_a_print_before_a_hang_reaches_the_report_in_the_sandbox(tmp_path, monkeypatch):
    """The sandboxed child's stdout is a pipe: block-buffered, a learner's print before an infinite loop would
    die in the buffer. It is line-buffered, like the forked child's."""
    from plants.adversarial import in_body

    from pagedkv_lib.judge import isolation as iso

    if iso.bwrap_path() is None:
        pytest.skip("bwrap is missing or cannot sandbox here (.ci/run installs it)")
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)    # as a learner's shell has it
    hangs = tmp_path / "122_hangs.py"
    hangs.write_text(in_body("print('entered with', positions)\nwhile True:\n    pass"))
    (result,) = grade(122, [hangs], limits=LIMITS, isolation="bwrap")
    assert result.verdict == "time limit" and "entered with" in result.output


def defunct_children() -> list[int]:
    """This process's children that have exited and were never reaped."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] == "Z":
            found.append(int(entry))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["bwrap", "fork"])
def test_grading_50_files_in_one_process_leaves_no_defunct_child(mode, tmp_path):
    from pagedkv_lib.judge import isolation as iso

    if mode == "bwrap" and iso.bwrap_path() is None:
        pytest.skip("bwrap is missing or cannot sandbox here (.ci/run installs it)")
    solution = (Path(__file__).resolve().parents[2] / "solutions" / "122_slot_mapping.py").read_text()
    crashes = ADVERSARIAL["os_exit_inside"][1]
    paths = []
    for i in range(50):                               # some end early, killed or by their own exit
        path = tmp_path / f"s{i}.py"
        path.write_text(crashes if i % 5 == 0 else solution)
        paths.append(path)
    before = set(defunct_children())
    results = grade(122, paths, limits=LIMITS, jobs=2, isolation=mode)
    assert sum(r.ok for r in results) == 40
    assert set(defunct_children()) <= before, defunct_children()


@pytest.mark.parametrize("mode", ["bwrap", "fork"])
def test_saving_another_practice_file_during_a_grading_changes_nothing(mode, tmp_path):
    """JupyterLab saves by itself: a learner's other files change while the judge runs, and that is theirs."""
    from pagedkv_lib.judge import isolation as iso
    from pagedkv_lib.judge.registry import PRACTICE_DIR

    if mode == "bwrap" and iso.bwrap_path() is None:
        pytest.skip("bwrap is missing or cannot sandbox here (.ci/run installs it)")
    slow = tmp_path / "122_slow.py"                   # a correct answer that takes a while per case
    slow.write_text(in_body_of_122("import time\ntime.sleep(0.05)"))
    other = PRACTICE_DIR / "129_prefix_caching.py"
    text = other.read_text()
    saver = threading.Timer(0.5, lambda: other.write_text(text + "\n# the learner typed this\n"))
    saver.start()
    try:
        (result,) = grade(122, [slow], limits=LIMITS, isolation=mode)
    finally:
        saver.join()
        other.write_text(text)
    assert result.ok and not result.tampered, (result.verdict, result.load, result.first_failure)


def in_body_of_122(code: str) -> str:
    from plants.adversarial import in_body

    return in_body(code)


def test_ctrl_c_while_grading_ends_in_one_line_and_leaves_no_child(tmp_path):
    """Ctrl-C once the judge is grading (waiting on its child): pressed while it still imports torch, a
    KeyboardInterrupt can be swallowed inside torch's import (a C call that clears every error), so the test
    waits for the judge's own work to begin, however long the machine takes to get there."""
    hangs = tmp_path / "122_hangs.py"
    hangs.write_text(ADVERSARIAL["infinite_loop"][1])
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "practice/judge.py", "122", str(hangs), "--time-limit", "60"],
                            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until_watching(proc.pid, deadline=time.monotonic() + 240)
    grandchildren = children_of(proc.pid)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["judge.py: interrupted; nothing was recorded"], err
    assert "Traceback" not in out + err
    assert not [p for p in grandchildren if Path(f"/proc/{p}").exists()]


def wait_until_watching(pid: int, deadline: float, asleep: int = 10) -> None:
    """Until the judge `pid` has a child, has torch loaded and has slept (in its select) at `asleep` looks in
    a row, 0.05 s apart: its grading loop, not an import."""
    row = 0
    while row < asleep:
        assert time.monotonic() < deadline, "the judge never reached its grading loop"
        time.sleep(0.05)
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            loaded = "libtorch_cpu" in Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            return
        row = row + 1 if state == "S" and loaded and children_of(pid) else 0


def children_of(pid: int) -> list[int]:
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
        except OSError:
            continue
    return found
