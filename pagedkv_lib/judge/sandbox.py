"""Run submissions in forked children with a time limit, a memory cap and a cap on printed output.

One child per submission runs every case in turn (see `child.py`). The parent multiplexes up to `jobs`
children from a single thread, stamps each message on arrival, and kills a child's whole process group
with SIGKILL when it overruns a case's time, the total time, or the output cap. A child that dies is
restarted after the case that killed it (at most `max_restarts` times); cases it never reached are skipped.
"""
from __future__ import annotations

import selectors
import time
from collections import deque
from dataclasses import dataclass, field, replace

from .outcome import Outcome
from .supervisor import Supervisor


@dataclass(frozen=True)
class Limits:
    time_limit_s: float = 2.0           # per case
    import_limit_s: float = 10.0        # loading the submission
    total_limit_s: float = 60.0         # all cases of one submission
    bench_limit_s: float = 120.0
    memory_limit_mb: int | None = 2048  # above the judge's own address space
    output_limit_bytes: int = 2**20     # stdout + stderr; more is a runtime error
    output_keep_bytes: int = 4096       # shown in the report
    max_restarts: int = 2

    @classmethod
    def for_exercise(cls, exercise, **overrides) -> Limits:
        base = cls(time_limit_s=exercise.time_limit_s, memory_limit_mb=exercise.memory_limit_mb)
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})


@dataclass
class Submission:
    label: str                          # shown in reports: a path, or "notebook"
    path: str | None = None             # a file to import, or
    namespace: dict | None = None       # the globals of a notebook


@dataclass
class Run:
    """What one submission's children reported: per case ("ok", obs) / ("error", record) / ("outcome", O)."""
    submission: Submission
    raws: list
    load: Outcome | None = None
    output: bytearray = field(default_factory=bytearray)
    output_total: int = 0
    bench: dict | None = None
    restarts: int = 0
    started: float = 0.0
    finished: float = 0.0


@dataclass
class Job:                              # what a child needs; it inherits it through fork
    exercise: object
    submission: Submission
    cases: list
    start: int
    limits: Limits
    device: str
    bench: bool


def run_all(exercise, submissions, cases, limits: Limits, *, jobs: int = 1, device: str = "cpu",
            bench: bool = False, on_done=None) -> list[Run]:
    """Run every submission on every case; `on_done(run)` is called as each submission finishes."""
    runs = [Run(s, [None] * len(cases)) for s in submissions]
    pending = deque((run, 0) for run in runs)
    active: list[Supervisor] = []
    sel = selectors.DefaultSelector()

    def start(run: Run, first_case: int) -> None:
        run.started = run.started or time.monotonic()
        c = Supervisor(Job(exercise, run.submission, cases, first_case, limits, device, bench), run)
        active.append(c)
        sel.register(c.res_fd, selectors.EVENT_READ, c)
        sel.register(c.out_fd, selectors.EVENT_READ, c)

    try:
        while pending or active:
            while pending and len(active) < max(1, jobs):
                start(*pending.popleft())
            wait = min(c.deadline for c in active) - time.monotonic()
            for key, _ in sel.select(min(max(wait, 0.0), 0.2)):
                key.data.read(key.fd)
            for c in [c for c in active if c.check()]:
                active.remove(c)
                sel.unregister(c.res_fd)
                sel.unregister(c.out_fd)
                restart = c.finish()
                if restart is not None:
                    pending.append((c.run, restart))
                    continue
                c.run.finished = time.monotonic()
                if on_done is not None:
                    on_done(c.run)
    finally:                                      # Ctrl-C, or a judge bug: leave no child behind
        for c in active:
            c.abort()
        sel.close()
    return runs
