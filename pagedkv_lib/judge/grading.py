"""Grading: one child per submission, then the oracle's answers and the case module's checks.

1. Children, `jobs` at a time, each watched by a Supervisor. A sandboxed child builds its own cases from the
   seed, so it starts before this process imports torch and both load in parallel; a forked child inherits
   the cases. A child that dies starts again after the case that ended it (at most `max_restarts` times).
2. Once every child has ended, the oracle runs here, where no child can reach it, and each case's check
   compares the observations and names the usual mistake.
Unsandboxed, a child could rewrite what a verdict rests on: the status file and the judge's own files are
digested around each forked child, and a change is tampering that stops the batch. A learner's other files
are never looked at.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import select
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import registry, status
from .isolation import BWRAP, FORK, bwrap_path
from .outcome import PASSED, RUNTIME_ERROR, SKIPPED, TAMPERING, WRONG_ANSWER, Outcome
from .protocol import CaseDone, decode, encode
from .supervisor import Supervisor


@dataclass(frozen=True)
class Limits:
    time_limit_s: float = 2.0           # per case
    startup_limit_s: float = 90.0       # a child's own start (python, torch, the cases): not the submission's
    import_limit_s: float = 10.0        # loading (importing) the submission
    total_limit_s: float = 60.0         # all cases of one submission (with import_limit_s: the worst case)
    bench_limit_s: float = 120.0
    memory_limit_mb: int | None = 2048  # address space above the child's own once torch is imported
    output_limit_bytes: int = 2**20     # stdout + stderr; more is a runtime error
    output_keep_bytes: int = 4096       # shown in the report
    max_restarts: int = 2
    guards: bool = True                 # the in-process guard (guards.py); off only to test the OS layer

    @classmethod
    def for_exercise(cls, exercise, **overrides) -> Limits:
        base = cls(time_limit_s=exercise.time_limit_s, memory_limit_mb=exercise.memory_limit_mb)
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})


@dataclass
class Submission:
    label: str                          # shown in reports: a path, or "notebook"
    path: str | None = None             # a file to import, or
    namespace: dict | None = None       # the globals of a notebook (graded in a fork: no sandbox)


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
    """One submission's grading: filled by its children's Supervisors while they run, then its cases."""
    exercise_id: int
    title: str
    submission: Submission
    seed: int
    device: str
    mode: str                                       # isolation.BWRAP or FORK
    cases: list = field(default_factory=list)       # CaseResult per case, once graded
    load: Outcome | None = None                     # why it could not be graded at all
    records: dict = field(default_factory=dict)     # case index -> CaseDone, as the children reported
    stopped: dict = field(default_factory=dict)     # case index -> Outcome: refused, ended, skipped (stands)
    total: int = 0                                  # cases, once known
    printed: bytearray = field(default_factory=bytearray)    # the first bytes it printed
    output_total: int = 0
    bench: dict | None = None
    isolation: str = ""                             # how the submission was kept in, in words
    tampered: list = field(default_factory=list)    # what changed while it ran unsandboxed
    result_bytes: int = 0                           # read from its result channels, all children
    cpu_spent: float = 0.0                          # CPU seconds of loading and cases in its ended children
    restarts: int = 0
    started: float = 0.0
    finished: float = 0.0
    wall_end: float = 0.0                           # the wall-clock backstop of loading plus all cases
    wall_s: float = 0.0                             # the whole grading run (all files)

    @property
    def label(self) -> str:
        """The graded file, or "notebook"."""
        return self.submission.label

    @property
    def output(self) -> str:
        return bytes(self.printed).decode("utf-8", "replace")

    @property
    def duration_s(self) -> float:
        return max(0.0, self.finished - self.started)

    @property
    def passed(self) -> int:
        return sum(c.verdict == PASSED for c in self.cases)

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

    def __repr__(self) -> str:                    # one line under a notebook's printed report
        return f"<Result {self.exercise_id} {self.label}: {self.verdict}, {self.passed}/{self.total} passed>"


def grade(exercise_id, submissions, *, seed: int = 0, device: str = "cpu", limits: Limits | None = None,
          jobs: int = 1, bench: bool = False, on_done=None, isolation: str | None = None) -> list[Result]:
    """Grade `submissions` (Submission objects, or paths) against exercise `exercise_id`'s hidden cases.
    `isolation`: None picks the strongest this machine has; "fork" or "bwrap" forces one."""
    t0 = time.perf_counter()
    exercise = registry.get(exercise_id)
    if device not in exercise.devices:
        raise ValueError(f"device: exercise {exercise.id} has cases for {exercise.devices}, got {device!r}")
    limits = limits or Limits.for_exercise(exercise)
    if isolation == BWRAP and bwrap_path() is None:
        raise RuntimeError("the bwrap sandbox was asked for, but `bwrap` is missing or cannot sandbox here")
    subs = [s if isinstance(s, Submission) else Submission(str(s), os.path.abspath(s)) for s in submissions]
    sandbox = BWRAP if isolation != FORK and bwrap_path() is not None else FORK     # a notebook's code: fork
    runs = [Result(exercise.id, exercise.title, s, seed, device, sandbox if s.path else FORK) for s in subs]
    torch = sys.modules.get("torch")
    cuda_started = torch is not None and torch.cuda.is_initialized()
    if device == "cuda" and cuda_started and FORK in (r.mode for r in runs):
        raise RuntimeError("CUDA is already started in this process, and a forked child cannot use it: grade "
                           "on the GPU from a fresh process (python practice/judge.py ID --device cuda)")
    if exercise.triton and "triton" not in sys.modules:   # a fork inherits Triton's mode, chosen at import
        os.environ["TRITON_INTERPRET"] = "1" if device == "cpu" else "0"
    queue = deque((run, 0) for run in runs)           # (run, the case its next child starts from)
    active = []                                       # Supervisors of the children running now
    stopped = False                                   # a tampering verdict stopped the batch
    digest = _digest() if any(r.mode == FORK for r in runs) else None

    def start_children(cases) -> None:
        while queue and len(active) < max(1, jobs) and not stopped and (cases or queue[0][0].mode == BWRAP):
            run, first = queue.popleft()
            active.append(Supervisor(exercise, run, limits, first, seed, device, bench, cases))

    try:
        start_children(None)                          # sandboxed children load while torch loads here
        with _interrupts_deferred():
            import torch

        module = exercise.cases()
        threads = torch.get_num_threads()
        torch.set_num_threads(1)          # small tensors: one thread is fastest, and nothing parallel to fork
        cases = module.build(seed, device)
        for sup in active:                            # a sandboxed child said how many it built: believe none
            if sup.run.total not in (0, len(cases)):
                sup.stop(Outcome(RUNTIME_ERROR, f"the grading process said it built {sup.run.total} cases, "
                                 f"the judge built {len(cases)}: a forged message, or cases that depend on "
                                 "more than (seed, device)"))
        for run in runs:
            run.total = len(cases)
        start_children(cases)
        while active:
            _watch(active)
            for sup in [s for s in active if s.poll()]:
                active.remove(sup)
                restart = sup.finish()
                if sup.run.mode == FORK and _digest() != digest:    # and what ran beside it is suspect too
                    stopped = True
                    for other in [sup, *active]:
                        other.run.tampered = ["the status file or the judge's own files"]
                        other.stop(Outcome(TAMPERING, "a file the verdict rests on changed while it ran"))
                if restart is not None and not stopped:
                    queue.appendleft((sup.run, restart))
                else:
                    sup.run.finished = time.monotonic()
                    if on_done is not None:
                        on_done(sup.run)
                start_children(cases)
    finally:                                          # Ctrl-C, or a judge bug: leave no child behind
        for sup in active:
            sup.abort()
    for run in runs:
        if stopped and not run.started:
            run.load = Outcome(SKIPPED, "not graded: the batch stopped at a tampering verdict")
    oracle = exercise.oracle_namespace()
    expected = [_as_sent(module.run(oracle, case)) for case in cases]
    torch.set_num_threads(threads)
    if bench and hasattr(module, "bench_report"):
        for run in runs:                              # the library timed here, now that no child runs
            run.bench = module.bench_report(run.bench, device) if run.bench else run.bench
    wall = time.perf_counter() - t0
    for run in runs:
        run.wall_s = wall
        run.cases = [_graded(module, run, i, *pair) for i, pair in enumerate(zip(cases, expected))]
    return runs


@contextlib.contextmanager
def _interrupts_deferred():
    """SIGINT blocked while torch is imported: a KeyboardInterrupt raised inside its import can be swallowed
    (a C call there clears every error), so a Ctrl-C then would be lost; blocked, it arrives right after."""
    main = threading.current_thread() is threading.main_thread() and hasattr(signal, "pthread_sigmask")
    if main:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        if main:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _watch(active) -> None:
    """Wait until a child's pipe has something, or the nearest deadline, and read what there is. A child whose
    pipes are both at their end is exiting: look again soon."""
    fds = {fd: sup for sup in active for fd in sup.open_fds}
    timeout = 0.2 if all(sup.open_fds for sup in active) else 0.005
    wait = min(sup.deadline for sup in active) - time.monotonic()
    ready, _, _ = select.select(list(fds), [], [], min(max(wait, 0.0), timeout))
    for fd in ready:
        fds[fd].read(fd)


def _as_sent(observation):
    """The oracle's observation in the form the child's reaches the parent (through the protocol)."""
    return decode(encode(CaseDone(0, 0.0, observation))).observation


def _digest() -> str:
    """One hash over the files a forked submission could rewrite to forge a verdict."""
    h = hashlib.sha256()
    for path in [status.path(), *sorted(Path(__file__).parent.rglob("*.py"))]:
        try:
            h.update(str(path).encode() + Path(path).read_bytes())
        except OSError:
            h.update(f"{path}: absent".encode())
    return h.hexdigest()


def _graded(module, run: Result, i: int, case, expected) -> CaseResult:
    record = run.records.get(i)
    if run.load is not None:
        return CaseResult(case.name, Outcome(run.load.verdict, "not run: the submission could not be graded"))
    if i in run.stopped or record is None:
        return CaseResult(case.name, run.stopped.get(i, Outcome(SKIPPED, "not run")), None, case.show)
    try:
        outcome = record.error or module.check(case, expected, record.observation)
    except Exception as exc:                     # the child's observation had an unexpected shape
        outcome = Outcome(WRONG_ANSWER, f"the result has an unexpected form ({type(exc).__name__}: {exc})")
    return CaseResult(case.name, outcome, record.time_s, case.show)
