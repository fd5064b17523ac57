"""Grading: one child per submission, then the oracle's answers and the case module's checks.

1. Children, `jobs` at a time, each watched by a Supervisor. A sandboxed child starts before this process
   imports torch, and both load in parallel (its cases come pickled from here, built by a thread of its
   Supervisor); a forked child inherits the cases. A child that dies starts again after the case that ended
   it (at most `max_restarts` times), and one whose case asked for a fresh child goes on in a new one.
2. Once every child has ended, the oracle runs here, where no child can reach it, and each case's check
   compares the observations and names the usual mistake. The Result of each submission is built here,
   from what its children's Supervisors saw (supervisor.Seen): no Supervisor writes a Result.
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
from .isolation import BWRAP, DESCRIBE, FORK, choose
from .outcome import PASSED, SKIPPED, TAMPERING, WRONG_ANSWER, Outcome, not_graded
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
    """One submission's grading, built here once its children have ended (from what their Supervisors saw)
    and the oracle has answered its cases."""
    exercise_id: int
    title: str
    submission: Submission
    seed: int
    device: str
    mode: str                                       # isolation.BWRAP or FORK
    isolation: str                                  # how the submission was kept in, in words
    total: int                                      # cases
    cases: list = field(default_factory=list)       # CaseResult per case
    load: Outcome | None = None                     # why it could not be graded at all
    output: str = ""                                # the first bytes it printed (output_keep_bytes)
    output_total: int = 0                           # all it printed, in bytes
    bench: dict | None = None
    tampered: list = field(default_factory=list)    # what changed while it ran unsandboxed
    duration_s: float = 0.0                         # from its first child's start to its last one's end
    wall_s: float = 0.0                             # the whole grading run (all files)

    @property
    def label(self) -> str:
        """The graded file, or "notebook"."""
        return self.submission.label

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
        if failure is None:
            return PASSED
        return failure.verdict

    @property
    def ok(self) -> bool:
        return self.verdict == PASSED and self.passed == self.total

    def __repr__(self) -> str:                    # one line under a notebook's printed report
        return f"<Result {self.exercise_id} {self.label}: {self.verdict}, {self.passed}/{self.total} passed>"


@dataclass
class _Grading:
    """One submission while its children run: grading's own bookkeeping, which no Supervisor writes."""
    submission: Submission
    mode: str
    children: list = field(default_factory=list)    # supervisor.Seen of each ended child, in order
    started: float | None = None
    finished: float | None = None
    tampered: bool = False


def grade(exercise_id, submissions, *, seed: int = 0, device: str = "cpu", limits: Limits | None = None,
          jobs: int = 1, bench: bool = False, on_done=None, isolation: str | None = None) -> list[Result]:
    """Grade `submissions` (Submission objects, or paths) against exercise `exercise_id`'s hidden cases.
    `isolation`: None picks the strongest this machine has; "fork" or "bwrap" forces one (isolation.choose).
    `on_done(submission)` is called as each one's last child ends."""
    t0 = time.perf_counter()
    exercise = registry.get(exercise_id)
    if device not in exercise.devices:
        raise ValueError(f"device: exercise {exercise.id} has cases for {exercise.devices}, got {device!r}")
    limits = limits or Limits.for_exercise(exercise)
    sandbox = choose(isolation)
    subs = [s if isinstance(s, Submission) else Submission(str(s), os.path.abspath(s)) for s in submissions]
    runs = [_Grading(s, sandbox if s.path else FORK) for s in subs]      # a notebook's code: a fork
    torch = sys.modules.get("torch")
    cuda_started = torch is not None and torch.cuda.is_initialized()
    if device == "cuda" and cuda_started and FORK in (r.mode for r in runs):
        raise RuntimeError("CUDA is already started in this process, and a forked child cannot use it: grade "
                           "on the GPU from a fresh process (python practice/judge.py ID --device cuda)")
    if exercise.triton and "triton" not in sys.modules:   # a fork inherits Triton's mode, chosen at import
        os.environ["TRITON_INTERPRET"] = "1" if device == "cpu" else "0"
    queue = deque((run, 0) for run in runs)           # (run, the case its next child starts from)
    active = {}                                       # Supervisor of a child running now -> its _Grading
    stopped = False                                   # a tampering verdict stopped the batch
    digest = None
    if any(r.mode == FORK for r in runs):
        digest = _digest()

    def start_children(cases) -> None:
        while queue and len(active) < max(1, jobs) and not stopped and (cases or queue[0][0].mode == BWRAP):
            run, first = queue.popleft()
            if run.started is None:
                run.started = time.monotonic()
            sup = Supervisor(exercise, run.submission, run.mode, limits, first, seed, device, bench, cases,
                             run.children)
            active[sup] = run

    threads = None                                    # the caller's torch threads, given back at the end
    try:
        start_children(None)                          # sandboxed children load while torch loads here
        with _interrupts_deferred():
            import torch

        module = exercise.cases()
        threads = torch.get_num_threads()
        torch.set_num_threads(1)          # small tensors: one thread is fastest, and nothing parallel to fork
        cases = module.build(seed, device)
        for sup in active:                            # started before the cases were built here
            sup.total = len(cases)
        start_children(cases)
        while active:
            _watch(active)
            for sup in [s for s in active if s.poll()]:
                run = active.pop(sup)
                seen = sup.finish()
                run.children.append(seen)
                if run.mode == FORK and _digest() != digest:      # and what ran beside it is suspect too
                    stopped = True
                    run.tampered = True
                    for other, other_run in active.items():
                        other_run.tampered = True
                        other.stop(TAMPERED)
                if seen.restart is not None and not stopped:
                    queue.appendleft((run, seen.restart))
                else:
                    run.finished = time.monotonic()
                    if on_done is not None:
                        on_done(run.submission)
                start_children(cases)
        oracle = exercise.oracle_namespace()
        expected = [_as_sent(module.run(oracle, case)) for case in cases]
    finally:                                          # Ctrl-C, or a judge bug: leave no child behind, and
        for sup in active:                            # the caller (a notebook's kernel) its threads
            sup.abort()
        if threads is not None:
            torch.set_num_threads(threads)
    wall = time.perf_counter() - t0
    results = []
    for run in runs:
        result = _result(exercise, run, module, cases, expected, seed, device, limits, stopped)
        if bench and hasattr(module, "bench_report") and result.bench:    # timed here, now no child runs
            result.bench = module.bench_report(result.bench, device)
        result.wall_s = wall
        results.append(result)
    return results


TAMPERED = Outcome(TAMPERING, "a file the verdict rests on changed while it ran")


def _result(exercise, run: _Grading, module, cases, expected, seed, device, limits, stopped) -> Result:
    """The Result of one submission, from what its children's Supervisors saw (supervisor.Seen)."""
    records = {}
    ended = {}                                        # case index -> Outcome: refused, ended, skipped
    load = None
    bench = None
    printed = bytearray()
    output_total = 0
    for seen in run.children:
        records.update(seen.records)
        for i, outcome in seen.stopped.items():
            ended.setdefault(i, outcome)
        load = load or seen.load
        if seen.bench is not None:
            bench = seen.bench
        printed += seen.printed
        output_total += seen.output_bytes
    if stopped and run.started is None:
        load = Outcome(SKIPPED, "not graded: the batch stopped at a tampering verdict")
    tampered = []
    if run.tampered:
        tampered = ["the status file or the judge's own files"]
    how = DESCRIBE[run.mode]
    if limits.guards:
        how += " + in-process guard"
    duration = 0.0
    if run.started is not None and run.finished is not None:
        duration = run.finished - run.started
    graded = [_graded(module, load, records.get(i), ended.get(i), case, answer)
              for i, (case, answer) in enumerate(zip(cases, expected))]
    return Result(exercise_id=exercise.id, title=exercise.title, submission=run.submission, seed=seed,
                  device=device, mode=run.mode, isolation=how, total=len(cases), cases=graded, load=load,
                  output=bytes(printed).decode("utf-8", "replace"), output_total=output_total, bench=bench,
                  tampered=tampered, duration_s=duration)


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


def _graded(module, load, record, ended, case, expected) -> CaseResult:
    """Case `case`'s result: `record` its CaseDone (or None), `ended` why it did not finish (or None)."""
    if load is not None:
        return CaseResult(case.name, Outcome(load.verdict, f"not run: {not_graded(load)}"))
    if ended is not None:
        return CaseResult(case.name, ended, None, case.show)
    if record is None:
        return CaseResult(case.name, Outcome(SKIPPED, "not run"), None, case.show)
    try:
        outcome = record.error or module.check(case, expected, record.observation)
    except Exception as exc:                     # the child's observation had an unexpected shape
        outcome = Outcome(WRONG_ANSWER, f"the result has an unexpected form ({type(exc).__name__}: {exc})")
    return CaseResult(case.name, outcome, record.time_s, case.show)
