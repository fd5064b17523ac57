"""What the parent guarantees, whatever a child sends: bounded memory and time (a flooded or busy channel),
strict messages (no NaN reaches --json), CPU time as the measure of a case (a stopped child passes, a busy
one is a time limit), and reports that quote a submission escaped and clipped. The floods are in
plants/floods.py; benchmarks/bench_judge_hostile.py measures the parent under the worst of them."""
from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from plants.adversarial import ADVERSARIAL, at_import, in_body
from plants.floods import FLOODS
from test_judge_verdicts import children_of

from pagedkv_lib.judge import cli, report
from pagedkv_lib.judge.grading import Limits, grade
from pagedkv_lib.judge.supervisor import FILE_WALL_FACTOR, WALL_FACTOR, ProcessTree

ROOT = Path(__file__).resolve().parents[2]
LIMITS = Limits(time_limit_s=1.0, import_limit_s=3.0, total_limit_s=6.0, memory_limit_mb=768)
STARTUP_S = 6.0
WORST_S = WALL_FACTOR * (LIMITS.import_limit_s + LIMITS.total_limit_s) + 3 * STARTUP_S
SOLUTION_122 = (ROOT / "solutions" / "122_slot_mapping.py").read_text()


def written(tmp_path, names, sources) -> list:
    paths = []
    for name in names:
        path = tmp_path / f"{name}.py"
        path.write_text(sources[name][1])
        paths.append(path)
    return paths


@pytest.mark.parametrize("isolation", ["fork", "bwrap"])
def test_every_flood_ends_in_its_verdict_in_bounded_time(isolation, tmp_path, capfd):
    from pagedkv_lib.judge import isolation as iso

    if isolation == "bwrap" and iso.bwrap_path() is None:
        pytest.skip("bwrap is missing or cannot sandbox here (.ci/run installs it)")
    names = list(FLOODS)
    results = grade(122, written(tmp_path, names, FLOODS), limits=LIMITS, jobs=2, isolation=isolation)
    for name, result in zip(names, results, strict=True):
        failure = result.load or (result.first_failure and result.first_failure.outcome)
        assert result.verdict in FLOODS[name][2], f"{name}: {result.verdict}: {failure}"
        assert result.duration_s < WORST_S, f"{name} took {result.duration_s:.1f} s"
        assert len(report.text(result)) < 20_000, name
        assert "\x1b" not in report.text(result), name
    out, err = capfd.readouterr()
    assert "\x1b" not in out + err


GRADER = """
import json, resource, sys, time
from pagedkv_lib.judge.grading import Limits, grade
t0 = time.monotonic()
(result,) = grade(122, [sys.argv[1]], limits=Limits(time_limit_s=1.0, import_limit_s=3.0, total_limit_s=6.0),
                  isolation=sys.argv[2])
print(json.dumps([result.verdict, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.monotonic() - t0]))
"""


def test_a_flooded_result_channel_costs_the_parent_bounded_memory(tmp_path):
    """Today's caps: 8 MiB a message, 32 MiB a stream (CPU cases); the parent's own peak stays near a grading
    of a correct file (torch dominates), far from the gigabytes an unbounded reader reaches."""
    (flood,) = written(tmp_path, ["floods_the_result_channel"], FLOODS)
    good = tmp_path / "good.py"
    good.write_text(SOLUTION_122)
    peaks = {}
    for path in (good, flood):
        done = subprocess.run([sys.executable, "-c", GRADER, str(path), "fork"], cwd=ROOT, text=True,
                              capture_output=True, timeout=300)
        verdict, peaks[path.name], _ = json.loads(done.stdout.strip().splitlines()[-1])
    assert verdict == "runtime error", peaks
    assert peaks[flood.name] < peaks[good.name] + 200 * 1024, peaks          # KiB


def test_json_output_is_strict_json_whatever_the_child_sent(tmp_path, capsys):
    (nan,) = written(tmp_path, ["sends_nan_times"], FLOODS)
    assert cli.main(["122", str(nan), "--json", "--no-sandbox"]) == 1
    text = capsys.readouterr().out

    def refuse(word):
        raise ValueError(f"not JSON: {word}")

    data = json.loads(text, parse_constant=refuse)
    assert data["verdict"] == "runtime error"
    assert all(c["time_s"] is None or c["time_s"] >= 0 for c in data["cases"])


def test_report_and_csv_show_control_characters_escaped_and_quote_little(tmp_path):
    names = ["prints_and_raises_escapes", "refused_with_an_8_mb_path", "raises_with_a_huge_message"]
    results = grade(122, written(tmp_path, names, FLOODS), limits=LIMITS, jobs=2, isolation="fork")
    escapes = report.text(results[0])
    assert "\x1b" not in escapes and "\\x1b[2J" in escapes and "\\x1b]0;owned\\x07" in escapes
    assert "all cases PASSED\\r" in escapes
    for result in results[1:]:
        assert len(report.text(result)) < 20_000
    rows = list(csv.reader(io.StringIO(report.to_csv(results))))      # csv's default field limit: 128 KiB
    assert len(rows) == 4 and all(len(cell) < 2000 for row in rows for cell in row)
    assert not any(ch in cell for row in rows for cell in row for ch in "\x1b\r\n")


def test_a_file_name_with_a_newline_adds_no_row_to_the_batch_table(tmp_path):
    forged = tmp_path / "x.py\nall_correct.py     19 of 19  passed.py"
    forged.write_text(SOLUTION_122.replace("+ p % block_size for p", "+ 1 for p"))
    plain = tmp_path / "plain.py"
    plain.write_text(SOLUTION_122)
    results = grade(122, [forged, plain], limits=LIMITS, jobs=2, isolation="fork")
    table = report.batch_table(results).splitlines()
    assert len(table) == 2 + len(results), table
    assert "\\n" in table[1] and "wrong answer" in table[1]
    assert "\n" not in report.to_csv(results).splitlines()[1]


def test_a_file_name_with_a_newline_forges_no_progress_line(tmp_path, capsys):
    forged = tmp_path / "evil\nok_b127_9.py  19 of 19  passed.py"
    forged.write_text(SOLUTION_122)
    plain = tmp_path / "plain.py"
    plain.write_text(SOLUTION_122)
    assert cli.main(["122", str(forged), str(plain), "--no-sandbox", "--jobs", "2"]) == 0
    progress = capsys.readouterr().err.splitlines()
    assert len(progress) == 2 and all(line.startswith(("1/2 graded: ", "2/2 graded: ")) for line in progress)
    assert any("evil\\nok_b127_9.py" in line for line in progress), progress


def test_csv_cells_that_a_spreadsheet_would_run_as_formulas_start_with_a_quote(tmp_path, monkeypatch):
    """OWASP's CSV injection: the file's name and the message (an exception class's name) are chosen by it."""
    monkeypatch.chdir(tmp_path)
    Path("=HYPERLINK(1+1).py").write_text(SOLUTION_122.replace(
        "    return [", "    raise type('=HYPERLINK(\"http://x\")', (Exception,), {})()\n    return ["))
    Path("-1.py").write_text(SOLUTION_122)
    results = grade(122, ["=HYPERLINK(1+1).py", "-1.py"], limits=LIMITS, jobs=2, isolation="fork")
    (header, first, second) = list(csv.reader(io.StringIO(report.to_csv(results))))
    assert first[:4] == ["'=HYPERLINK(1+1).py", "122", "0", "runtime error"], first
    assert first[header.index("message")].startswith("'=HYPERLINK(\"http://x\")"), first
    assert second[0] == "'-1.py" and second[header.index("verdict")] == "passed", second


def test_grading_gives_the_caller_its_torch_threads_back_even_when_it_fails(tmp_path):
    """A notebook's kernel that grades keeps its threads, after an error or a Ctrl-C as after a verdict."""
    import torch

    def fails(submission):
        raise KeyboardInterrupt

    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        with pytest.raises(KeyboardInterrupt):
            grade(122, written(tmp_path, ["writes_nothing"], {"writes_nothing": (122, SOLUTION_122)}),
                  limits=LIMITS, isolation="fork", on_done=fails)
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow
def test_a_file_that_sleeps_under_each_backstop_is_stopped_by_the_files_wall_clock(tmp_path):
    """It sleeps at import and in every case a little less than each phase's backstop: the file's loading and
    cases get FILE_WALL_FACTOR times its CPU budget on the clock, then a time limit that says it waited."""
    limits = Limits(time_limit_s=0.5, import_limit_s=1.0, total_limit_s=3.0, memory_limit_mb=768)
    sleeper = tmp_path / "sleeper.py"
    asleep_s = 0.8 * WALL_FACTOR                                    # times each phase's CPU limit
    sleeper.write_text(at_import(f"import time\ntime.sleep({asleep_s * limits.import_limit_s})",
                                 in_body(f"import time\ntime.sleep({asleep_s * limits.time_limit_s})")))
    (result,) = grade(122, [sleeper], limits=limits, isolation="fork")
    budget = limits.import_limit_s + limits.total_limit_s
    assert result.verdict == "time limit" and result.passed >= 1, (result.verdict, result.passed)
    message = result.first_failure.outcome.message
    assert "it waited rather than computed" in message
    assert f"took {FILE_WALL_FACTOR * budget:g} s on the clock" in message
    assert result.duration_s < FILE_WALL_FACTOR * budget + STARTUP_S + 2, result.duration_s


def test_a_stopped_child_passes_on_cpu_time_and_a_busy_one_is_a_time_limit(tmp_path):
    """SIGSTOP for longer than a case's limit (a machine too busy to run it): the wall clock passes the limit,
    the CPU does not, and the verdict is the one an idle machine gives."""
    slow = tmp_path / "slow.py"                               # a correct answer, 0.05 s of sleep per case
    slow.write_text(in_body("import time\ntime.sleep(0.05)"))
    busy = tmp_path / "busy.py"
    busy.write_text(ADVERSARIAL["infinite_loop"][1])
    stopped_s = 2.5 * LIMITS.time_limit_s
    assert stopped_s < WALL_FACTOR * LIMITS.time_limit_s

    def stop_the_child_once(seen):
        deadline = time.monotonic() + 60
        while not seen and time.monotonic() < deadline:
            seen += [p for p in children_of(os.getpid()) if p not in before]
            time.sleep(0.01)
        time.sleep(0.3)
        os.kill(seen[0], signal.SIGSTOP)
        time.sleep(stopped_s)
        os.kill(seen[0], signal.SIGCONT)

    before, seen = set(children_of(os.getpid())), []
    stopper = threading.Thread(target=stop_the_child_once, args=(seen,))
    stopper.start()
    t0 = time.monotonic()
    (passed,) = grade(122, [slow], limits=LIMITS, isolation="fork")
    stopper.join()
    assert time.monotonic() - t0 > stopped_s
    assert passed.ok, (passed.verdict, passed.load, passed.first_failure)
    (looped,) = grade(122, [busy], limits=LIMITS, isolation="fork")
    assert looped.verdict == "time limit" and "of CPU" in looped.first_failure.outcome.message


def test_the_process_tree_counts_the_cpu_of_descendants():
    """A shell whose grandchild burns CPU: the tree under the shell holds it (as bwrap holds the child)."""
    loop = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass"
    burn = f"{sys.executable} -c '{loop}'"
    shell = subprocess.Popen(["sh", "-c", f"sh -c \"{burn}\"; sleep 30"])
    try:
        tree, most = ProcessTree(shell.pid), 0.0
        deadline = time.monotonic() + 60
        while most < 0.5 and time.monotonic() < deadline:
            most = max(most, tree.cpu_seconds())
            time.sleep(0.1)
        assert most >= 0.5
    finally:
        shell.kill()
        shell.wait()


def test_a_pass_says_once_that_it_printed_and_a_failure_quotes_it(tmp_path):
    chatty = tmp_path / "chatty.py"
    chatty.write_text(in_body("print('debugging', positions)"))
    wrong = tmp_path / "wrong.py"
    wrong.write_text(in_body("print('debugging', positions)").replace("+ p % block_size for p", "+ 1 for p"))
    ok, failed = grade(122, [chatty, wrong], limits=LIMITS, jobs=2, isolation="fork")
    passed_text = report.text(ok)
    assert passed_text.count("It printed") == 1 and "debugging" not in passed_text
    assert "debugging" in report.text(ok, verbose=True)
    assert "| debugging [0, 1, 2" in report.text(failed)


def test_without_proc_the_limits_are_the_wall_clocks(tmp_path, monkeypatch):
    """Where /proc is missing (macOS: forks only), no CPU can be read: each limit is then on the wall clock,
    as long as the limit itself, and a correct file still passes."""
    from pagedkv_lib.judge import supervisor

    monkeypatch.setattr(supervisor, "HAVE_PROC", False)
    monkeypatch.setattr(supervisor, "BACKSTOP", 1)
    monkeypatch.setattr(supervisor.ProcessTree, "cpu_seconds", lambda self: 0.0)
    good = tmp_path / "good.py"
    good.write_text(SOLUTION_122)
    busy = tmp_path / "busy.py"
    busy.write_text(ADVERSARIAL["infinite_loop"][1])
    ok, looped = grade(122, [good, busy], limits=LIMITS, jobs=2, isolation="fork")
    assert ok.ok, (ok.verdict, ok.first_failure)
    assert looped.verdict == "time limit"
    assert f"no answer after {LIMITS.time_limit_s:g} s on the clock" in looped.first_failure.outcome.message


def test_a_child_whose_count_of_cases_differs_from_the_judges_is_not_believed(tmp_path):
    """The one case-count check (Supervisor._handle, on `ready`): a child that says it built other cases
    than the judge ends with a runtime error, and what the Supervisor reports (`Seen`) says so; it grades
    nothing."""
    from pagedkv_lib.judge import registry
    from pagedkv_lib.judge.grading import Submission, _watch
    from pagedkv_lib.judge.isolation import FORK
    from pagedkv_lib.judge.outcome import RUNTIME_ERROR
    from pagedkv_lib.judge.supervisor import Supervisor

    exercise = registry.get(122)
    cases = exercise.cases().build(0, "cpu")
    path = tmp_path / "122_slot_mapping.py"
    path.write_text(SOLUTION_122)
    sup = Supervisor(exercise, Submission(str(path), str(path)), FORK, LIMITS, 0, 0, "cpu", False, cases)
    sup.total = len(cases) + 1                        # what the judge would say had it built one more
    try:
        while not sup.poll():
            _watch([sup])
        seen = sup.finish()
    finally:                                          # a failed assertion above leaves no child behind
        sup.abort()
    assert seen.load.verdict == RUNTIME_ERROR and not seen.records, seen
    assert f"the child built {len(cases)} cases, the judge {len(cases) + 1}" in seen.load.details[0]
