"""The speed verdict of a kernel exercise (judge/speed.py, kernel_harness's timed calls), on the CPU: the bar,
the ratio and the verdict from figures given here, the parent's checks of the child's calls (a skipped or
repeated call, a fooled timer, work hidden on another stream, marks out of place), the report's line and the
status file."""
from __future__ import annotations

import json
import sys
import time
import types
from types import SimpleNamespace

import pytest
import torch

from pagedkv_lib.judge import registry, report, speed, status
from pagedkv_lib.judge.cases import ex131, ex133, kernel_harness
from pagedkv_lib.judge.cases.kernel_harness import same_sketch, sketch, speed_clause, timed_calls

BAR = speed.SpeedBar("B=64 x 4096 tokens", "copy", 0.5)
WORK = 1e9                    # bytes of one call
CEILING = 3e6                 # bytes per microsecond: 3 TB/s


def calls_at(us: float, n: int = speed.CALLS) -> list:
    return [{"seed": 100 + i, "us": us, "sketch": []} for i in range(n)]


def watched_at(us: float, n: int = speed.CALLS) -> list:
    """The parent's windows around calls of `us` microseconds: longer by the messages and the wake-up."""
    return [us + 40.0] * n


OK = [True] * speed.CALLS


def test_the_bar_compares_the_median_call_with_the_ceiling_measured_in_the_same_run():
    fast = speed.judge(BAR, calls_at(500.0), OK, watched_at(500.0), WORK, CEILING, library_us=350.0)
    assert fast["verdict"] == speed.FAST
    assert fast["yours"] == pytest.approx(WORK / 500.0 / CEILING, abs=1e-4)       # 67% of copy
    assert fast["library"] == pytest.approx(WORK / 350.0 / CEILING, abs=1e-4)
    slow = speed.judge(BAR, calls_at(900.0), OK, watched_at(900.0), WORK, CEILING, library_us=350.0)
    assert slow["verdict"] == speed.SLOW and slow["yours"] < BAR.fraction
    mixed = calls_at(500.0)[:6] + calls_at(5000.0)[6:]                            # the median decides
    windows = watched_at(500.0)[:6] + watched_at(5000.0)[6:]
    assert speed.judge(BAR, [dict(c, seed=i) for i, c in enumerate(mixed)], OK, windows, WORK, CEILING,
                       350.0)["verdict"] == speed.FAST


def test_a_time_faster_than_the_hardware_allows_is_not_trusted():
    """1 us for a gigabyte is 333 x the copy bandwidth: a timer fooled in a way the window cannot see (a
    parent that was itself slow to read the first mark)."""
    clause = speed.judge(BAR, calls_at(1.0), OK, watched_at(1.0), WORK, CEILING, 350.0)
    assert clause["verdict"] == speed.UNTRUSTED and "more than a kernel can reach" in clause["why"]


def test_a_fooled_timer_or_work_on_another_stream_is_timed_by_the_parents_window():
    """The events saw 5 us; the parent watched 900 us between the call's marks."""
    clause = speed.judge(BAR, calls_at(5.0), OK, [900.0] * speed.CALLS, WORK, CEILING, 350.0)
    assert clause["us"] == pytest.approx(900.0 - speed.WATCH_SLACK_US)
    assert clause["verdict"] == speed.SLOW


@pytest.mark.parametrize("calls, verified, words", [
    (calls_at(500.0, n=3), [True] * 3, "expected 10 timed calls"),
    ([dict(c, seed=7) for c in calls_at(500.0)], [True] * speed.CALLS, "distinct integer seeds"),
    ([dict(c, seed=2**64 + c["seed"]) for c in calls_at(500.0)], [True] * speed.CALLS, "from 0 to 2^48"),
    (calls_at(500.0), [True] * 9 + [False], "timed call(s) [9] does not match"),
    ([dict(c, us=float("nan")) for c in calls_at(500.0)], [True] * speed.CALLS, "a positive time per call"),
])
def test_calls_the_parent_cannot_verify_are_not_trusted(calls, verified, words):
    clause = speed.judge(BAR, calls, verified, watched_at(500.0), WORK, CEILING, 350.0)
    assert clause["verdict"] == speed.UNTRUSTED and words in clause["why"]
    assert speed.verdict(clause, passed=True) == speed.UNTRUSTED


@pytest.mark.parametrize("windows", [None, [], watched_at(500.0, n=9), "windows", ["1"] * speed.CALLS])
def test_calls_the_parent_did_not_watch_are_not_trusted(windows):
    clause = speed.judge(BAR, calls_at(500.0), OK, windows, WORK, CEILING, 350.0)
    assert clause["verdict"] == speed.UNTRUSTED and "the judge watched" in clause["why"]


def test_the_parents_windows_replace_what_the_child_sent_and_pair_the_marks():
    sent = {"device": "x", "speed": {"calls": [], "watched_us": [1.0] * 10}}
    got = speed.watched(sent, [10.0, 10.0005, 11.0, 11.002, 12.0])           # the fifth mark has no end
    assert got["speed"]["watched_us"] == pytest.approx([500.0, 2000.0])
    assert speed.watched(dict(sent, speed={"calls": []}), [])["speed"]["watched_us"] == []
    assert speed.watched({"error": "boom"}, [1.0, 2.0]) == {"error": "boom"}
    assert speed.watched(None, []) is None


def test_a_mark_is_believed_only_in_the_benchmark_and_in_order():
    """Supervisor._handle: a Mark during the cases (forged on the judge's channel) or out of order is a
    protocol error; in the benchmark each one is the parent's clock."""
    from pagedkv_lib.judge.protocol import Done, Mark, ProtocolError
    from pagedkv_lib.judge.supervisor import Seen, Supervisor

    sup = Supervisor.__new__(Supervisor)
    sup.seen, sup.limits, sup.fresh_asked, sup.next, sup.total = Seen(start=0), None, False, 3, 3
    sup.phase = "cases"
    with pytest.raises(ProtocolError, match="Mark while cases"):
        sup._handle(Mark(0), 1.0)
    sup.phase = "bench"
    sup._handle(Mark(0), 1.0)
    sup._handle(Mark(1), 1.5)
    with pytest.raises(ProtocolError, match="mark 3, expected 2"):
        sup._handle(Mark(3), 2.0)
    assert sup.seen.marks == [1.0, 1.5]
    sup._cpu = lambda: 0.0
    sup._begin = lambda phase, now, cpu: None
    sup._handle(Done({"speed": {"calls": [], "watched_us": [1.0]}}), 2.0)     # the child's own "window"
    assert sup.seen.bench["speed"]["watched_us"] == [500000.0]


def test_a_wrong_kernels_speed_is_not_judged():
    clause = speed.judge(BAR, calls_at(500.0), OK, watched_at(500.0), WORK, CEILING, 350.0)
    assert speed.verdict(clause, passed=True) == speed.FAST
    assert speed.verdict(clause, passed=False) == speed.NOT_JUDGED
    assert speed.verdict({"verdict": "blazing"}, passed=True) == speed.NOT_JUDGED


# ----------------------------------------------------------------------------------------------------------
# the timed calls and the parent's check of them, with a CPU timer in place of CUDA's events

class _Event:
    def __init__(self, enable_timing: bool = False):
        self.t = None


_CLOCK = time.perf_counter


def _record(event, stream=None):
    event.t = _CLOCK()


class _Bench:
    """A benchmark of the case modules' interface, small enough for the CPU."""
    NAME = "fn"

    @staticmethod
    def bench_inputs(label, device="cuda", seed=None):
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(64, 32, generator=gen)                                   # [64, 32]
        return (x,), x.numel() * 8

    @staticmethod
    def work(label):
        return 64 * 32 * 8


def _library(x):
    return x.softmax(-1)                                                       # [64, 32]


@pytest.fixture
def cpu_timer(monkeypatch):
    for key, value in (("Event", _Event), ("record", _record), ("synchronize", lambda: None),
                       ("stream", lambda: None),
                       ("elapsed", lambda start, end: 1e3 * (end.t - start.t))):
        monkeypatch.setitem(kernel_harness._TIMER, key, value)
    monkeypatch.setattr(kernel_harness, "L2_FLUSH_BYTES", 4096)


def _clause(fn, seeds=None):
    """The child's timed calls with marks read on the parent's clock, through `watched`, then judged."""
    seeds = seeds or kernel_harness.fresh_seeds(speed.CALLS)
    marks = []
    calls = timed_calls(fn, lambda device, seed: _Bench.bench_inputs("x", device, seed), seeds, "cpu",
                        mark=lambda index: marks.append(_CLOCK()))
    figures = speed.watched({"speed": {"calls": calls}}, marks)
    return speed_clause(figures, _Bench, 131, _library, device="cpu", ceiling_rate=1e12)


def test_an_honest_kernel_is_timed_and_its_outputs_match_the_librarys(cpu_timer):
    clause = _clause(_library)
    assert clause["verdict"] == speed.SLOW          # a ceiling of 1e12 bytes per microsecond: far below
    assert clause["bar"] == str(registry.get(131).speed)


def test_a_kernel_that_answers_every_call_with_its_first_answer_is_not_trusted(cpu_timer):
    """Skipping work: later calls return what the first computed (do_bench's repeated inputs allowed it)."""
    first = []

    def memoized(x):
        if not first:
            first.append(_library(x))
        return first[0]

    clause = _clause(memoized)
    assert clause["verdict"] == speed.UNTRUSTED and "does not match the library's" in clause["why"]


def test_one_seed_for_every_call_is_not_trusted(cpu_timer):
    clause = _clause(_library, seeds=[5] * speed.CALLS)
    assert clause["verdict"] == speed.UNTRUSTED and "distinct" in clause["why"]


def test_calls_sent_as_garbage_are_not_trusted_and_do_not_break_the_parent(cpu_timer):
    for calls in ([{"seed": -1, "us": "x", "host_us": None, "sketch": ["a"]}] * speed.CALLS, [7], "calls"):
        clause = speed_clause({"speed": {"calls": calls}}, _Bench, 131, _library, device="cpu",
                              ceiling_rate=1e12)
        assert clause["verdict"] == speed.UNTRUSTED, calls


def test_a_submission_that_stops_the_timer_is_timed_by_the_parents_window(cpu_timer, monkeypatch):
    """Its events say 0.001 us (a patched timer); each call sleeps 2 ms, which the parent's window holds."""
    monkeypatch.setitem(kernel_harness._TIMER, "elapsed", lambda start, end: 1e-6)

    def sleeps(x):
        time.sleep(0.002)
        return _library(x)

    clause = _clause(sleeps)
    assert clause["verdict"] == speed.SLOW
    assert clause["us"] >= 2000.0 - speed.WATCH_SLACK_US


def test_a_sketch_tells_a_wrong_output_from_a_right_one_and_refuses_a_tensor_subclass():
    out = torch.randn(64, 32, 128)                                             # [B, H, D]
    assert same_sketch(sketch(out, 3), sketch(out, 3))
    assert same_sketch(sketch(out + 1e-4 * torch.randn_like(out), 3), sketch(out, 3))
    wrong = out.clone()
    wrong[5] = 0                                                               # one sequence skipped
    assert not same_sketch(sketch(wrong, 3), sketch(out, 3))
    assert sketch(out.as_subclass(torch.nn.Parameter), 3) == []
    assert sketch(torch.full_like(out, float("nan")), 3) == []                 # the protocol refuses NaN
    assert not same_sketch([], sketch(out, 3))
    assert not same_sketch(["1.0"] * 64, sketch(out, 3))                       # what the child sent: data


def test_the_marks_of_a_childs_benchmark_reach_the_parent_as_windows_on_its_clock(tmp_path, monkeypatch):
    """Through a forked child, its supervisor and grading: an exercise with a speed bar gets `mark`, and its
    figures come back with the windows the parent watched (over the child's own "watched_us")."""
    from test_judge_cli import FAKE, SOLUTION_122

    from pagedkv_lib.judge.grading import grade

    def bench(ns, device, mark):
        mark(0)
        time.sleep(0.05)
        mark(1)
        return {"speed": {"calls": [], "watched_us": [1.0]}}

    fake = types.ModuleType("pagedkv_lib.judge.cases.ex998")
    fake.build, fake.run, fake.check, fake.bench = FAKE.build, FAKE.run, FAKE.check, bench
    monkeypatch.setitem(sys.modules, fake.__name__, fake)
    monkeypatch.setitem(registry.EXERCISES, 998, registry.Exercise(
        998, "fake", "A fake exercise", "easy", "00 Start here",
        {"slot_mapping_for": "pagedkv_lib.core.slot_mapping:slot_mapping_for"}, time_limit_s=30.0, speed=BAR))
    path = tmp_path / "998_fake.py"
    path.write_text(SOLUTION_122)
    (result,) = grade(998, [path], bench=True, isolation="fork")   # the fake lives in this process only
    (window,) = result.bench["speed"]["watched_us"]
    assert result.ok, (result.first_failure, result.load)
    assert 25_000 <= window < 60_000_000, result.bench     # the parent's clock (it reads each mark as it
    # comes: the window of a 50 ms sleep measured 49.8 ms once), the child's 1 us replaced


@pytest.mark.parametrize("device, figures", [
    ("cuda", {"error": "RuntimeError: boom"}), ("cuda", {"skipped": "no"}), ("cpu", {"skipped": "no"})])
def test_a_speed_clause_the_child_sent_is_dropped_where_the_parent_judged_none(device, figures):
    """A child that reports an error, or a skip, beside a clause of its own making: the parent's report of
    the benchmark keeps its words and drops the clause (the report and the status file read only the
    parent's)."""
    forged = {"verdict": speed.FAST, "yours": 0.9, "library": 0.9, "bar": "x", "ceiling": "copy"}
    for module in (ex131, ex133):
        shown = module.bench_report(dict(figures, speed=forged), device)
        assert "speed" not in shown and shown == figures


# ----------------------------------------------------------------------------------------------------------
# the cards, the report's line, the status file

def test_the_bars_name_benchmark_shapes_of_their_exercise():
    assert registry.get(131).speed.shape in ex131.BENCH and registry.get(131).speed.ceiling == "copy"
    assert registry.get(133).speed.shape in ex133.BENCH and registry.get(133).speed.ceiling == "matmul"
    assert registry.get(138).speed is None
    with pytest.raises(ValueError, match="fraction"):
        speed.SpeedBar("x", "copy", 1.5)


def _result(device: str, ok: bool, bench=None, exercise_id: int = 131):
    return SimpleNamespace(exercise_id=exercise_id, device=device, ok=ok, bench=bench)


def test_the_report_line_says_where_speed_is_measured_and_gives_the_verdict_beside_the_bar():
    ex = registry.get(131)
    assert "measured on a CUDA GPU only" in speed.line(ex, _result("cpu", ok=True))
    assert "--device cuda --bench" in speed.line(ex, _result("cpu", ok=True))
    assert speed.line(ex, _result("cpu", ok=False)) is None                   # a failing kernel: its cases
    assert speed.line(registry.get(138), _result("cpu", ok=True)) is None      # no bar
    assert "add --bench" in speed.line(ex, _result("cuda", ok=True))
    clause = speed.judge(BAR, calls_at(500.0), OK, watched_at(500.0), WORK, CEILING, 350.0)
    said = speed.line(ex, _result("cuda", ok=True, bench={"speed": clause}))
    assert said.startswith("speed: FAST ENOUGH: yours 67% (median of 10 calls") and "library 95%" in said
    assert said.endswith("bar B=64 x 4096 tokens, >= 50% of the copy bandwidth (bytes moved per second)")
    assert "NOT JUDGED" in speed.line(ex, _result("cuda", ok=False, bench={"speed": clause}))
    skipped = speed.line(ex, _result("cuda", ok=True, bench={"error": "RuntimeError: boom"}))
    assert skipped == "speed: not measured (RuntimeError: boom)"


def test_the_text_report_prints_the_speed_line_after_the_verdict():
    result = SimpleNamespace(exercise_id=131, title="Triton paged decode", label="x.py", seed=0, device="cpu",
                             isolation="bwrap", tampered=[], load=None, cases=[], first_failure=None,
                             output_total=0, bench=None, passed=1, total=1, verdict="passed", ok=True,
                             wall_s=1.0)
    lines = report.text(result, timing=False).splitlines()
    assert lines[-2].startswith("1/1 passed: PASSED")
    assert lines[-1].startswith("speed: measured on a CUDA GPU")


def test_the_status_file_keeps_the_speed_beside_the_verdict_and_reads_old_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("PAGEDKV_JUDGE_STATUS", str(tmp_path / "status.json"))
    old = {"verdict": "passed", "passed": 3, "total": 3, "file": "practice/133.py", "seed": 0,
           "when": "2026-11-30 20:15:00", "source": "file"}                   # written before speed existed
    (tmp_path / "status.json").write_text(json.dumps({"133": old}))
    assert status.describe(133) == "passed (3/3)"
    clause = speed.judge(BAR, calls_at(900.0), OK, watched_at(900.0), WORK, CEILING, 350.0)
    status.record(SimpleNamespace(exercise_id=131, verdict="passed", passed=5, total=5, label="x.py", seed=0,
                                  tampered=[], ok=True, bench={"speed": clause}, device="cuda"))
    kept = json.loads((tmp_path / "status.json").read_text())
    assert kept["131"]["speed"] == {"verdict": speed.SLOW, "bar": clause["bar"], "yours": clause["yours"],
                                    "library": clause["library"]}
    assert kept["133"] == old
    assert status.describe(131) == "passed (5/5); speed too slow"
    status.record(SimpleNamespace(exercise_id=131, verdict="passed", passed=5, total=5, label="x.py", seed=0,
                                  tampered=[], ok=True, bench=None, device="cuda"))  # no --bench: no speed
    assert "speed" not in json.loads((tmp_path / "status.json").read_text())["131"]
    status.record(SimpleNamespace(exercise_id=131, verdict="passed", passed=5, total=5, label="x.py", seed=0,
                                  tampered=[], ok=True, bench={"speed": clause}, device="cpu"))
    assert "speed" not in json.loads((tmp_path / "status.json").read_text())["131"]     # none on a CPU
