"""Grading: build the cases, run the submissions in children, then compute the oracle's answers and compare.

The oracle runs in this process only after every child has exited, so no submission can reach an
expected result.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from . import registry
from .outcome import PASSED, SKIPPED, WRONG_ANSWER, Outcome, from_record
from .sandbox import Limits, Run, Submission, run_all


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
          jobs: int = 1, bench: bool = False, on_done=None) -> list[Result]:
    """Grade `submissions` (Submission objects, or paths) against exercise `exercise_id`'s hidden cases."""
    t0 = time.perf_counter()
    exercise = registry.get(exercise_id)
    if device not in exercise.devices:
        raise ValueError(f"device: exercise {exercise.id} has cases for {exercise.devices}, got {device!r}")
    subs = [s if isinstance(s, Submission) else Submission(str(s), path=str(s)) for s in submissions]
    module = exercise.cases()
    limits = limits or Limits.for_exercise(exercise)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)          # small tensors: one thread is fastest, and nothing parallel before fork
    try:
        cases = module.build(seed, device)
        runs = run_all(exercise, subs, cases, limits, jobs=jobs, device=device, bench=bench, on_done=on_done)
        oracle = exercise.oracle_namespace()
        expected = [module.run(oracle, case) for case in cases]
        wall = time.perf_counter() - t0
        return [_result(exercise, module, cases, expected, run, seed, device, wall) for run in runs]
    finally:
        torch.set_num_threads(threads)


def _result(exercise, module, cases, expected, run: Run, seed, device, wall) -> Result:
    results = []
    for case, exp, raw in zip(cases, expected, run.raws):
        time_s = None
        if run.load is not None:
            outcome = Outcome(run.load.verdict, "not run: the submission could not be graded")
        elif raw is None:
            outcome = Outcome(SKIPPED, "not run")
        else:
            kind, data, time_s = raw
            if kind == "ok":
                outcome = _check(module, case, exp, data)
            elif kind == "error":
                outcome = from_record(data if isinstance(data, dict) else {})
            else:
                outcome = data
        results.append(CaseResult(case.name, outcome, time_s, case.show))
    return Result(exercise.id, exercise.title, run.submission.label, seed, device, results, run.load,
                  bytes(run.output).decode("utf-8", "replace"), run.output_total, run.bench, wall,
                  run.finished - run.started)


def _check(module, case, expected, got) -> Outcome:
    try:
        return module.check(case, expected, got)
    except Exception as exc:                     # the child's observation had an unexpected shape
        return Outcome(WRONG_ANSWER, f"the result has an unexpected form ({type(exc).__name__}: {exc})")
