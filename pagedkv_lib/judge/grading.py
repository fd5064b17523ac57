"""Grading: build the cases, run the submissions in children, then compute the oracle's answers and compare.

The oracle runs in this process only after every child has exited, so no submission can reach an
expected result.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field

import torch

from . import registry
from .outcome import PASSED, SKIPPED, TAMPERING, WRONG_ANSWER, Outcome, from_record
from .protocol import CaseRecord
from .sandbox import Limits, Run, Stopped, Submission, run_all


@dataclass
class CaseResult:
    name: str
    outcome: Outcome
    time_s: float | None = None
    show: list = field(default_factory=list)      # the call, for the report

    @property
    def verdict(self) -> str:
        return self.outcome.verdict


@dataclass
class Result:
    exercise_id: int
    title: str
    label: str                                    # the graded file, or "notebook"
    seed: int
    device: str
    cases: list
    load: Outcome | None = None                   # the file could not be graded at all
    output: str = ""                              # what it printed (the first bytes)
    output_total: int = 0
    bench: dict | None = None
    wall_s: float = 0.0                           # the whole grading run (all files)
    duration_s: float = 0.0                       # this submission's children, start to end
    isolation: str = ""                           # how the submission was kept in, in words
    tampered: list = field(default_factory=list)  # protected files that changed while it ran

    @property
    def passed(self) -> int:
        return sum(c.verdict == PASSED for c in self.cases)

    @property
    def total(self) -> int:
        return len(self.cases)

    @property
    def first_failure(self) -> CaseResult | None:
        return next((c for c in self.cases if c.verdict not in (PASSED, SKIPPED)), None)

    @property
    def verdict(self) -> str:
        if self.tampered:
            return TAMPERING
        if self.load is not None:
            return self.load.verdict
        failure = self.first_failure
        return failure.verdict if failure else PASSED

    @property
    def ok(self) -> bool:
        return self.verdict == PASSED and self.passed == self.total

    def __repr__(self) -> str:
        return f"<Result {self.exercise_id} {self.label}: {self.verdict}, {self.passed}/{self.total} passed>"

    def _repr_pretty_(self, printer, cycle) -> None:          # IPython: one line under the printed report
        printer.text(repr(self))


def grade(exercise_id, submissions, *, seed: int = 0, device: str = "cpu", limits: Limits | None = None,
          jobs: int = 1, bench: bool = False, on_done=None, isolation: str | None = None) -> list[Result]:
    """Grade `submissions` (Submission objects, or paths) against exercise `exercise_id`'s hidden cases.

    isolation: None picks the strongest this machine has (isolation.py); "fork" or "bwrap" forces one.
    """
    t0 = time.perf_counter()
    exercise = registry.get(exercise_id)
    if device not in exercise.devices:
        raise ValueError(f"device: exercise {exercise.id} has cases for {exercise.devices}, got {device!r}")
    subs = [s if isinstance(s, Submission) else Submission(str(s), path=os.path.abspath(s))
            for s in submissions]
    if exercise.triton:
        choose_triton_mode(device)
    module = exercise.cases()
    limits = limits or Limits.for_exercise(exercise)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)          # small tensors: one thread is fastest, and nothing parallel before fork
    try:
        cases = module.build(seed, device)
        runs = run_all(exercise, subs, cases, limits, jobs=jobs, device=device, bench=bench, on_done=on_done,
                       isolation_mode=isolation)
        oracle = exercise.oracle_namespace()
        expected = [module.run(oracle, case) for case in cases]
        if bench and hasattr(module, "bench_report"):
            for run in runs:                          # the library timed here, now that no child runs
                run.bench = module.bench_report(run.bench, device) if run.bench else run.bench
        wall = time.perf_counter() - t0
        return [_result(exercise, module, cases, expected, run, seed, device, wall) for run in runs]
    finally:
        torch.set_num_threads(threads)


def choose_triton_mode(device: str) -> None:
    """Triton makes its tl.sum, tl.max ... at its first import, for the interpreter if TRITON_INTERPRET=1:
    a forked child inherits this process's choice, so make it before any fork (unless triton is imported
    already: the CLI never imports it; a notebook on a GPU may have, and its kernels then run natively)."""
    if "triton" not in sys.modules:
        os.environ["TRITON_INTERPRET"] = "1" if device == "cpu" else "0"


def _result(exercise, module, cases, expected, run: Run, seed, device, wall) -> Result:
    results = []
    for case, exp, raw in zip(cases, expected, run.cases):
        time_s = None
        if run.load is not None:
            outcome = Outcome(run.load.verdict, "not run: the submission could not be graded")
        elif isinstance(raw, Stopped):
            outcome = raw.outcome
        elif isinstance(raw, CaseRecord) and raw.error is not None:
            outcome, time_s = from_record(raw.error), raw.time_s
        elif isinstance(raw, CaseRecord):
            outcome, time_s = _check(module, case, exp, raw.observation), raw.time_s
        else:
            outcome = Outcome(SKIPPED, "not run")
        results.append(CaseResult(case.name, outcome, time_s, case.show))
    return Result(exercise.id, exercise.title, run.submission.label, seed, device, results, run.load,
                  bytes(run.output).decode("utf-8", "replace"), run.output_total, run.bench, wall,
                  run.finished - run.started, run.isolation, list(run.tampered))


def _check(module, case, expected, got) -> Outcome:
    try:
        return module.check(case, expected, got)
    except Exception as exc:                     # the child's observation had an unexpected shape
        return Outcome(WRONG_ANSWER, f"the result has an unexpected form ({type(exc).__name__}: {exc})")
