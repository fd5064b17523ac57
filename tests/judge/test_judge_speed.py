"""The speed verdict of a kernel exercise (judge/speed.py, kernel_harness's timed calls), on the CPU: the bar,
the ratio and the verdict from figures given here, the parent's checks of the child's calls (a skipped or
repeated call, a fooled timer, work hidden on another stream), the report's line and the status file."""
from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest
import torch

from pagedkv_lib.judge import registry, report, speed, status
from pagedkv_lib.judge.cases import ex131, ex133, kernel_harness
from pagedkv_lib.judge.cases.kernel_harness import same_sketch, sketch, speed_clause, timed_calls

BAR = speed.SpeedBar("B=64 x 4096 tokens", "copy", 0.5)
WORK = 1e9                    # bytes of one call
CEILING = 3e6                 # bytes per microsecond: 3 TB/s


def calls_at(us: float, n: int = speed.CALLS, host_us: float | None = None) -> list:
    return [{"seed": 100 + i, "us": us, "host_us": us + 20 if host_us is None else host_us, "sketch": []}
            for i in range(n)]


def test_the_bar_compares_the_median_call_with_the_ceiling_measured_in_the_same_run():
    fast = speed.judge(BAR, calls_at(500.0), [True] * speed.CALLS, WORK, CEILING, library_us=350.0)
    assert fast["verdict"] == speed.FAST
    assert fast["yours"] == pytest.approx(WORK / 500.0 / CEILING, abs=1e-4)       # 67% of copy
    assert fast["library"] == pytest.approx(WORK / 350.0 / CEILING, abs=1e-4)
    slow = speed.judge(BAR, calls_at(900.0), [True] * speed.CALLS, WORK, CEILING, library_us=350.0)
    assert slow["verdict"] == speed.SLOW and slow["yours"] < BAR.fraction
    mixed = calls_at(500.0)[:6] + calls_at(5000.0)[6:]                            # the median decides
    assert speed.judge(BAR, [dict(c, seed=i) for i, c in enumerate(mixed)], [True] * speed.CALLS, WORK,
                       CEILING, 350.0)["verdict"] == speed.FAST


def test_a_time_faster_than_the_hardware_allows_is_not_trusted():
    """A patched timer: 1 us for a gigabyte is 333 x the copy bandwidth."""
    clause = speed.judge(BAR, calls_at(1.0, host_us=2.0), [True] * speed.CALLS, WORK, CEILING, 350.0)
    assert clause["verdict"] == speed.UNTRUSTED and "more than a kernel can reach" in clause["why"]


def test_work_on_another_stream_is_timed_by_the_hosts_clock():
    """The events on the current stream saw 5 us; the host waited 900 us for the device."""
    clause = speed.judge(BAR, calls_at(5.0, host_us=900.0), [True] * speed.CALLS, WORK, CEILING, 350.0)
    assert clause["us"] == pytest.approx(900.0 - speed.HOST_SLACK_US)
    assert clause["verdict"] == speed.SLOW


@pytest.mark.parametrize("calls, verified, words", [
    (calls_at(500.0, n=3), [True] * 3, "expected 10 timed calls"),
    ([dict(c, seed=7) for c in calls_at(500.0)], [True] * speed.CALLS, "distinct integer seeds"),
    ([dict(c, seed=2**64 + c["seed"]) for c in calls_at(500.0)], [True] * speed.CALLS, "from 0 to 2^48"),
    (calls_at(500.0), [True] * 9 + [False], "timed call(s) [9] does not match"),
    ([dict(c, us=float("nan")) for c in calls_at(500.0)], [True] * speed.CALLS, "positive times"),
])
def test_calls_the_parent_cannot_verify_are_not_trusted(calls, verified, words):
    clause = speed.judge(BAR, calls, verified, WORK, CEILING, 350.0)
    assert clause["verdict"] == speed.UNTRUSTED and words in clause["why"]
    assert speed.verdict(clause, passed=True) == speed.UNTRUSTED


def test_a_wrong_kernels_speed_is_not_judged():
    clause = speed.judge(BAR, calls_at(500.0), [True] * speed.CALLS, WORK, CEILING, 350.0)
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
    seeds = seeds or kernel_harness.fresh_seeds(speed.CALLS)
    calls = timed_calls(fn, lambda device, seed: _Bench.bench_inputs("x", device, seed), seeds, "cpu")
    return speed_clause({"speed": {"calls": calls}}, _Bench, 131, _library, device="cpu", ceiling_rate=1e12)


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


def test_the_timer_is_the_one_taken_before_the_submission_was_imported(cpu_timer):
    """A submission that stops the host's clock while it runs: the harness's clock was taken earlier, so
    every call still has its time, and the parent judges it."""
    real = time.perf_counter

    def stops_the_clock(x):
        time.perf_counter = lambda: 0.0
        return _library(x)

    try:
        calls = timed_calls(stops_the_clock, lambda device, seed: _Bench.bench_inputs("x", device, seed),
                            kernel_harness.fresh_seeds(speed.CALLS), "cpu")
    finally:
        time.perf_counter = real
    assert all(c["host_us"] > 0 for c in calls)
    clause = speed_clause({"speed": {"calls": calls}}, _Bench, 131, _library, device="cpu", ceiling_rate=1e12)
    assert clause["verdict"] == speed.SLOW, clause


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
    clause = speed.judge(BAR, calls_at(500.0), [True] * speed.CALLS, WORK, CEILING, 350.0)
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
    clause = speed.judge(BAR, calls_at(900.0), [True] * speed.CALLS, WORK, CEILING, 350.0)
    status.record(SimpleNamespace(exercise_id=131, verdict="passed", passed=5, total=5, label="x.py", seed=0,
                                  tampered=[], ok=True, bench={"speed": clause}))
    kept = json.loads((tmp_path / "status.json").read_text())
    assert kept["131"]["speed"] == {"verdict": speed.SLOW, "bar": clause["bar"], "yours": clause["yours"],
                                    "library": clause["library"]}
    assert kept["133"] == old
    assert status.describe(131) == "passed (5/5); speed too slow"
    status.record(SimpleNamespace(exercise_id=131, verdict="passed", passed=5, total=5, label="x.py", seed=0,
                                  tampered=[], ok=True, bench=None))             # no --bench: no speed
    assert "speed" not in json.loads((tmp_path / "status.json").read_text())["131"]
