"""The speed verdict: a kernel exercise's bar (its card's `speed`), the learner's timed calls checked, and the
clause the report prints beside the correctness verdict and status.py keeps.

Where the figures come from (cases/kernel_harness.py): on `--device cuda --bench` the child times each call of
the submission on the bar's shape alone, on fresh inputs drawn from a seed it picks then (`timed_calls`), with
CUDA events it took before the submission was imported; per call it sends the seed, the events' time and a
sketch of the output (random projections). Around each call it sends a Mark (protocol.py), and the parent
reads its own clock at each (`watched`): a window that holds the call whatever the child's timer says. The
parent, once every child has exited, believes only what it checked: it rebuilds each call's inputs from the
seed, runs the library's kernel on them and compares sketches (a call that skipped work, or returned an
answer made earlier, fails); it requires CALLS calls on distinct seeds, each inside a window it watched; a
call's time is the longer of the events' and the window less WATCH_SLACK_US (a fooled timer, or work hidden
on another stream, shows in the window); it measures the ceiling itself (copy bandwidth for decode, the bf16
matmul rate for prefill) and refuses a time faster than PLAUSIBLE times the ceiling allows. Then `judge`
compares the median call with the bar.

Importing this module imports no torch (registry.py and status.py read it).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

FAST = "fast enough"
SLOW = "too slow"
UNTRUSTED = "not trusted"
NOT_JUDGED = "not judged"
VERDICTS = (FAST, SLOW, UNTRUSTED, NOT_JUDGED)
CEILINGS = {"copy": "the copy bandwidth (bytes moved per second)",
            "matmul": "the bf16 matmul rate (causal FLOPs per second)"}
CALLS = 10                 # timed calls per benchmark shape, each on fresh inputs
SEEDS = 2**48              # a call's seed is below this (the parent rebuilds its inputs from it)
PLAUSIBLE = 1.2            # a kernel measured faster than 1.2 x its ceiling was not timed honestly
WATCH_SLACK_US = 100.0     # what the parent's window adds to a call: event records, the synchronisation, two
                           # messages through a pipe and the parent's wake-up (it can only be shorter by this)
SKETCH_TOLERANCE = 2e-2    # relative error of an output's sketch against the library's, as bench_correct's
GPU_ONLY = ("speed: measured on a CUDA GPU only: python practice/judge.py {id} --device cuda --bench "
            "(bar: {bar})")
NEEDS_BENCH = "speed: add --bench to measure it against the bar ({bar})"


@dataclass(frozen=True)
class SpeedBar:
    """A card's bar: on benchmark shape `shape`, the learner's kernel reaches at least `fraction` of the
    `ceiling` measured in the same run ("copy": bytes moved against the copy bandwidth; "matmul": causal
    FLOPs against the bf16 matmul rate)."""
    shape: str
    ceiling: str
    fraction: float

    def __post_init__(self):
        if self.ceiling not in CEILINGS:
            raise ValueError(f"speed bar ceiling: expected one of {sorted(CEILINGS)}, got {self.ceiling!r}")
        if not 0 < self.fraction <= 1:
            raise ValueError(f"speed bar fraction: expected 0 < fraction <= 1, got {self.fraction!r}")

    def __str__(self) -> str:
        return f"{self.shape}, >= {self.fraction:.0%} of {CEILINGS[self.ceiling]}"


def watched(figures, marks: list):
    """In the parent, as the Done message arrives: `figures` with figures["speed"]["watched_us"], the
    microseconds between Marks 2 i and 2 i + 1 by the parent's clock (`marks`, seconds), replacing whatever
    the child put there; other figures as they are."""
    if not isinstance(figures, dict) or not isinstance(figures.get("speed"), dict):
        return figures
    windows = [1e6 * (end - begin) for begin, end in zip(marks[0::2], marks[1::2])]
    return dict(figures, speed=dict(figures["speed"], watched_us=windows))


def check_calls(calls, verified: list, windows=None, wanted: int = CALLS) -> str | None:
    """Why the timed calls of one shape cannot be believed, or None. `calls`: the child's records
    [{"seed": int, "us": float, ...}]; `verified`: per call, whether the parent found its output's sketch
    equal to the library's on the inputs rebuilt from its seed; `windows`: the parent's watch of each call
    (`watched`), microseconds."""
    if not isinstance(calls, list) or len(calls) != wanted:
        got = len(calls) if isinstance(calls, list) else type(calls).__name__
        return f"expected {wanted} timed calls, got {got}"
    seeds = [c.get("seed") if isinstance(c, dict) else None for c in calls]
    if any(type(s) is not int or not 0 <= s < SEEDS for s in seeds) or len(set(seeds)) != wanted:
        return (f"expected {wanted} calls on distinct integer seeds from 0 to 2^48 (fresh inputs each), got "
                f"seeds {seeds}")
    times = [c.get("us") for c in calls]
    if any(type(t) not in (int, float) or not math.isfinite(t) or t <= 0 for t in times):
        return f"expected a positive time per call, got {times}"
    if (not isinstance(windows, list) or len(windows) != wanted
            or any(type(w) is not float or not math.isfinite(w) for w in windows)):
        got = len(windows) if isinstance(windows, list) else windows
        return (f"the judge watched {got} timed calls, expected {wanted} (each call between two marks on the "
                "judge's channel)")
    wrong = [i for i, ok in enumerate(verified) if ok is not True]
    if len(verified) != wanted or wrong:
        return (f"the output of timed call(s) {wrong} does not match the library's on the same inputs "
                "(a timed call must do the whole work on its own inputs)")
    return None


def call_us(call: dict, window_us: float) -> float:
    """The time of one checked call: its CUDA events' time, or the parent's window less WATCH_SLACK_US when
    that is longer (a timer the submission fooled, events on one stream that miss work on another)."""
    return max(call["us"], window_us - WATCH_SLACK_US)


def judge(bar: SpeedBar, calls: list, verified: list, windows, work: float, ceiling_rate: float,
          library_us: float) -> dict:
    """The clause of one run on the bar's shape: the child's `calls`, `verified` and `windows` by the parent
    (check_calls), `work` (bytes, or FLOPs) of one call, `ceiling_rate` (bytes or FLOPs per microsecond) and
    the library's median `library_us`, both measured by the parent."""
    clause = {"bar": str(bar), "fraction": bar.fraction, "ceiling": bar.ceiling}
    if library_us > 0:
        clause["library"] = round(work / library_us / ceiling_rate, 4)
    problem = check_calls(calls, verified, windows)
    if problem is None:
        us = statistics.median(call_us(c, w) for c, w in zip(calls, windows))
        ratio = work / us / ceiling_rate
        clause.update(us=us, yours=round(ratio, 4))
        if ratio > PLAUSIBLE:
            problem = (f"{ratio:.0%} of {CEILINGS[bar.ceiling]} is more than a kernel can reach: the "
                       "timer did not measure the work")
    if problem is not None:
        clause.update(verdict=UNTRUSTED, why=problem)
    else:
        clause["verdict"] = FAST if clause["yours"] >= bar.fraction else SLOW
    return clause


def verdict(clause, passed: bool) -> str:
    """The speed verdict of a run: its clause's, once the correctness verdict passed (a wrong kernel's speed
    counts for nothing)."""
    if not isinstance(clause, dict) or clause.get("verdict") not in VERDICTS:
        return NOT_JUDGED
    return clause["verdict"] if passed else NOT_JUDGED


def line(exercise, result) -> str | None:
    """The report's speed line of `result` (a grading.Result) of an exercise with a bar, else None: the
    clause of a --bench run on a GPU; without one, for a passed kernel, where and how speed is measured."""
    bar = getattr(exercise, "speed", None)
    if bar is None or (not result.bench and not result.ok):
        return None
    if result.device != "cuda":
        return GPU_ONLY.format(bar=bar, id=exercise.id)
    clause = result.bench.get("speed") if isinstance(result.bench, dict) else None
    if not isinstance(clause, dict):
        return NEEDS_BENCH.format(bar=bar) if not result.bench else f"speed: not measured ({_why(result)})"
    said = verdict(clause, result.ok)
    if said == NOT_JUDGED:
        why = clause.get("why") or "the cases did not pass"
        return f"speed: {NOT_JUDGED.upper()} ({why})"
    if said == UNTRUSTED:
        return f"speed: {UNTRUSTED.upper()} ({clause['why']}); bar {clause['bar']}"
    library = f"library {clause['library']:.0%}" if "library" in clause else "library not timed"
    return (f"speed: {said.upper()}: yours {clause['yours']:.0%} (median of {CALLS} calls, each timed alone "
            f"on fresh inputs), {library}; bar {clause['bar']}")


def _why(result) -> str:
    bench = result.bench if isinstance(result.bench, dict) else {}
    return str(bench.get("error") or bench.get("skipped") or "the benchmark gave no figure for the bar")[:200]


def status_entry(clause, passed: bool) -> dict | None:
    """What status.py keeps beside the verdict: the clause's verdict and ratios, when it was measured."""
    if not isinstance(clause, dict) or clause.get("verdict") not in VERDICTS:
        return None
    kept = {"verdict": verdict(clause, passed), "bar": str(clause.get("bar", ""))}
    for key in ("yours", "library"):
        if type(clause.get(key)) is float:
            kept[key] = clause[key]
    return kept


def valid_entry(kept) -> bool:
    """Whether a status file's "speed" field is one `status_entry` writes."""
    return (isinstance(kept, dict) and kept.get("verdict") in VERDICTS and type(kept.get("bar")) is str
            and all(type(kept.get(k)) is float for k in ("yours", "library") if k in kept))
