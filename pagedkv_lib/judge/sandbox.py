"""Run submissions in children with a time limit, a memory cap, a cap on printed output and the isolation of
isolation.py, and check after each one that no protected file changed (integrity.py).

One child per submission runs every case in turn (child.py); a `Supervisor` (supervisor.py) watches each.
The parent multiplexes up to `jobs` children from a single thread. A child that dies is restarted after the
case that killed it (at most `max_restarts` times); cases it never reached are skipped. If a protected file
changed while a child ran, its submission gets the verdict "tampering", and a batch stops there: what ran
next to it cannot be trusted either.
"""
from __future__ import annotations

import os
import selectors
import time
from collections import deque
from dataclasses import dataclass, field, replace

from . import isolation
from .integrity import Snapshot
from .outcome import SKIPPED, TAMPERING, Outcome
from .protocol import CaseRecord
from .supervisor import Stopped, Supervisor

BWRAP, FORK = "bwrap", "fork"


@dataclass(frozen=True)
class Limits:
    time_limit_s: float = 2.0           # per case
    startup_limit_s: float = 90.0       # a child's own start (python, torch, the cases): not the submission's
    import_limit_s: float = 10.0        # loading (importing) the submission
    total_limit_s: float = 60.0         # all cases of one submission (with import_limit_s: the worst case)
    bench_limit_s: float = 120.0
    memory_limit_mb: int | None = 2048  # above the child's own address space once torch is imported
    output_limit_bytes: int = 2**20     # stdout + stderr; more is a runtime error
    output_keep_bytes: int = 4096       # shown in the report
    max_restarts: int = 2
    guards: bool = True                 # the in-process audit hook (guards.py); off only to test the OS layer

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
class Run:
    """What one submission's children reported: per case a CaseRecord, a Stopped, or None (not reached)."""
    submission: Submission
    cases: list
    isolation: str = ""                 # how it was graded, in words
    load: Outcome | None = None
    output: bytearray = field(default_factory=bytearray)
    output_total: int = 0
    bench: dict | None = None
    restarts: int = 0
    started: float = 0.0
    finished: float = 0.0
    budget_end: float = 0.0             # when loading plus all cases must be done (set when ready)
    tampered: list = field(default_factory=list)    # protected files that changed while it ran

    def record(self, index: int, value: CaseRecord | Stopped) -> None:
        if not isinstance(self.cases[index], Stopped):   # a refusal stands, whatever the case returned
            self.cases[index] = value


@dataclass
class Job:
    """What a child needs (a fork inherits it; an exec'd child reads it pickled from stdin)."""
    exercise: object
    submission: Submission
    cases: list
    start: int
    limits: Limits
    device: str
    bench: bool
    scratch: str = ""
    containment: object = None


def mode_for(submission: Submission, isolation_mode: str | None = None) -> str:
    """bwrap for a file when this machine can, else fork (always for a notebook's namespace)."""
    if submission.path is None or isolation_mode == FORK:
        return FORK
    if isolation_mode == BWRAP and isolation.bwrap_path() is None:
        raise RuntimeError("isolation bwrap asked for, but `bwrap` is missing or cannot sandbox here")
    return BWRAP if isolation.bwrap_path() is not None else FORK


def run_all(exercise, submissions, cases, limits: Limits, *, jobs: int = 1, device: str = "cpu",
            bench: bool = False, on_done=None, isolation_mode: str | None = None) -> list[Run]:
    """Run every submission on every case; `on_done(run)` is called as each submission finishes."""
    submissions = [replace(s, path=os.path.abspath(s.path)) if s.path else s for s in submissions]
    runs = [Run(s, [None] * len(cases)) for s in submissions]
    pending = deque((run, 0) for run in runs)
    active: list[Supervisor] = []
    sel = selectors.DefaultSelector()
    extra = [s.path for s in submissions if s.path]
    trusted = Snapshot(extra)
    stop: list[str] = []

    def start(run: Run, first_case: int) -> None:
        job = Job(exercise, run.submission, cases, first_case, limits, device, bench)
        c = Supervisor(job, run, mode_for(run.submission, isolation_mode))
        active.append(c)
        sel.register(c.res_fd, selectors.EVENT_READ, c)
        sel.register(c.out_fd, selectors.EVENT_READ, c)

    with isolation.Reaper() as reaper:
        try:
            while (pending and not stop) or active:
                while pending and not stop and len(active) < max(1, jobs):
                    start(*pending.popleft())
                wait = min(c.deadline for c in active) - time.monotonic()
                for key, _ in sel.select(min(max(wait, 0.0), 0.2)):
                    key.data.read(key.fd)
                for c in [c for c in active if c.check()]:
                    active.remove(c)
                    sel.unregister(c.res_fd)
                    sel.unregister(c.out_fd)
                    restart = c.finish()
                    reaper.sweep(keep=[a.pid for a in active])
                    changed = trusted.changes()
                    if changed:                      # everything running now is suspect, and the rest
                        stop.extend(changed)
                        for suspect in [c, *active]:
                            suspect.run.tampered = changed
                            suspect.kill(TAMPERING, "a protected file changed while it ran")
                        trusted = Snapshot(extra)
                    if restart is not None and not stop:
                        pending.appendleft((c.run, restart))      # before the others: its clock runs
                        continue
                    c.run.finished = time.monotonic()
                    if on_done is not None:
                        on_done(c.run)
        finally:                                     # Ctrl-C, or a judge bug: leave no child behind
            for c in active:
                c.abort()
            sel.close()
    for run in runs:
        if stop and not run.started:
            run.load = Outcome(SKIPPED, "not graded: the batch stopped after a submission changed protected "
                                        "files (see the tampering verdict)")
        for i, rec in enumerate(run.cases):
            if rec is None and run.load is None:
                run.cases[i] = Stopped(Outcome(SKIPPED, "not run"))
    return runs
