"""The parent's watch over one child: start it, read its messages and output, enforce limits, explain its end.

A `Supervisor` is non-blocking: `run_all` (sandbox.py) calls `read` when a pipe is readable and `check`
regularly; once `check` says the child is gone, `finish` records why and says where to restart, if anywhere.
The child's progress is a small state machine over protocol.py's messages:

    STARTING --Ready--> LOADING --Loaded--> BETWEEN --CaseStarted(i)--> IN_CASE --CaseFinished(i)--> BETWEEN
    LOADING --LoadFailed--> DONE         BETWEEN --BenchStarted--> IN_BENCH --BenchFinished--> BETWEEN
    BETWEEN (after the last case) --Finished--> DONE

Each phase has a deadline (loading, a case, the benchmark); past it the child's whole process group (and
its cgroup, or its sandbox) is killed and the verdict is a time limit, or a memory limit for a child still
filling its memory cap (deadlines.py). A message out of order, or bytes that are no message, mean the
child's channel was written by something else: a runtime error.
"""
from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass

from . import isolation, launch
from .child_end import describe, ended_how
from .deadlines import RUN_ON, MemoryWatch, Phase, late_message
from .outcome import MEMORY_LIMIT, RUNTIME_ERROR, SKIPPED, TIME_LIMIT, Outcome, from_record
from .protocol import (
    BenchFinished,
    BenchStarted,
    CaseFinished,
    CaseStarted,
    Fatal,
    Finished,
    FrameReader,
    Loaded,
    LoadFailed,
    ProtocolError,
    Ready,
    Refused,
)

REFUSED_HINT = ("a graded function computes its answer and returns it: it may not write files outside its "
                "working directory, start processes, load native code or open sockets")


_EXPECTED_PHASE = {Ready: Phase.STARTING, Loaded: Phase.LOADING, LoadFailed: Phase.LOADING,
                   CaseStarted: Phase.BETWEEN, CaseFinished: Phase.IN_CASE, BenchStarted: Phase.BETWEEN,
                   BenchFinished: Phase.IN_BENCH, Finished: Phase.BETWEEN}


class Supervisor:
    """One child process running one submission's cases from `job.start` on."""

    def __init__(self, job, run, mode: str):
        self.job, self.run, self.limits, self.mode = job, run, job.limits, mode
        job.scratch = tempfile.mkdtemp(prefix="pagedkv-judge-")
        self.containment = isolation.Containment.create()
        job.containment = self.containment
        res_r, res_w = os.pipe()
        out_r, out_w = os.pipe()
        if mode == "bwrap":
            self.pid, self._keep = launch.in_sandbox(job, res_w, out_w, self.containment.enter)
        else:
            self.pid = launch.in_fork(job, res_r, res_w, out_r, out_w)
        os.close(res_w)
        os.close(out_w)
        os.set_blocking(res_r, False)
        os.set_blocking(out_r, False)
        self.res_fd, self.out_fd = res_r, out_r
        self.reader = FrameReader()
        self.phase, self.index = Phase.STARTING, None
        self.next = job.start
        run.started = run.started or time.monotonic()
        self.hard_end = run.budget_end or float("inf")    # fixed when the first child of the run is ready
        self.deadline = time.monotonic() + self.limits.startup_limit_s
        self.outcome: Outcome | None = None           # why we stopped it, once we have
        self.status: int | None = None
        self.eof = False
        self.eof_at: float | None = None
        self.memory = MemoryWatch(self.limits.memory_limit_mb)
        run.isolation = describe(mode, self.containment, self.limits.guards)

    # reading ------------------------------------------------------------------------------------------
    def read(self, fd: int) -> bool:
        """Read what is there on `fd` and act on it; False when nothing was there (or the pipe closed)."""
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return False
        if fd == self.out_fd:
            run = self.run
            run.output_total += len(data)
            run.output += data[: max(0, self.limits.output_keep_bytes - len(run.output))]
            if run.output_total > self.limits.output_limit_bytes:
                self.kill(RUNTIME_ERROR, f"output limit: more than {self.limits.output_limit_bytes} bytes "
                          "printed to stdout/stderr", "remove the prints (or print much less)")
            return bool(data)
        if not data:
            self.eof = True
            return False
        if self.outcome is not None:
            return True
        try:
            for message in self.reader.feed(data):
                self._handle(message)
                if self.outcome is not None:
                    return True
        except ProtocolError:
            self.kill(RUNTIME_ERROR, "the judge's result channel held data it did not write "
                      "(did the submission write to the judge's file descriptors?)")
        return True

    def drain(self) -> None:
        """Act on every message the child has already sent (before a verdict about what it did not send)."""
        while not self.eof and self.outcome is None and self.read(self.res_fd):
            pass

    def _handle(self, message) -> None:
        now, lim, run = time.monotonic(), self.limits, self.run
        if isinstance(message, Refused):
            outcome = Outcome(RUNTIME_ERROR, f"refused by the judge: {message.action}", REFUSED_HINT)
            if self.phase == Phase.IN_CASE:
                run.record(self.index, _stopped(outcome))
            elif self.phase == Phase.LOADING:
                run.load = run.load or outcome
            return
        if isinstance(message, Fatal):
            self.kill(RUNTIME_ERROR, "the grading process failed (did the submission break torch or os?)",
                      details=message.trace.splitlines()[-6:])
            return
        expected = _EXPECTED_PHASE[type(message)]
        if self.phase != expected:
            raise ProtocolError(f"{type(message).__name__} while {self.phase.value}")
        if isinstance(message, Ready):               # the submission's clock starts now
            self.memory.ready(self.pid)
            run.budget_end = run.budget_end or now + lim.import_limit_s + lim.total_limit_s
            self.hard_end = run.budget_end
            self.phase, self.deadline = Phase.LOADING, min(now + lim.import_limit_s, self.hard_end)
        elif isinstance(message, Loaded):
            self.phase, self.deadline = Phase.BETWEEN, min(now + lim.time_limit_s, self.hard_end)
        elif isinstance(message, LoadFailed):
            run.load = run.load or from_record(message.error)
            self.phase, self.deadline = Phase.DONE, now + 2.0
        elif isinstance(message, CaseStarted):
            if message.index != self.next:
                raise ProtocolError(f"case {message.index} started, expected {self.next}")
            self.phase, self.index = Phase.IN_CASE, message.index
            self.deadline = min(now + lim.time_limit_s, self.hard_end)
        elif isinstance(message, CaseFinished):
            if message.index != self.index:
                raise ProtocolError(f"case {message.index} finished, {self.index} was running")
            run.record(message.index, message.record)
            error = message.record.error
            if error is not None and error.verdict == MEMORY_LIMIT:   # ends the child as a crash would:
                self.outcome = from_record(error)                      # its next cases would fill it again
                self._kill_everything()
                return
            self.next = message.index + 1
            self.phase, self.deadline = Phase.BETWEEN, min(now + lim.time_limit_s, self.hard_end)
        elif isinstance(message, BenchStarted):
            if self.next != len(self.job.cases):
                raise ProtocolError("the benchmark started before every case ran")
            self.phase, self.deadline = Phase.IN_BENCH, now + lim.bench_limit_s
            self.hard_end = self.deadline
        elif isinstance(message, BenchFinished):
            run.bench = message.figures if not message.error else {"error": message.error}
            self.phase, self.deadline = Phase.BETWEEN, min(now + lim.time_limit_s, self.hard_end)
        elif isinstance(message, Finished):
            if self.next != len(self.job.cases):
                raise ProtocolError(f"finished after {self.next} of {len(self.job.cases)} cases")
            self.phase, self.deadline = Phase.DONE, now + 2.0

    # stopping -----------------------------------------------------------------------------------------
    def kill(self, verdict: str, message: str, hint: str = "", details=()) -> None:
        if self.outcome is None:
            self.outcome = Outcome(verdict, message, hint, list(details))
        self._kill_everything()

    def check(self) -> bool:
        """Enforce the deadline and notice the end; True once the child is gone (or must be reaped)."""
        now = time.monotonic()
        if now > self.deadline and self.outcome is None:
            self.drain()                              # a report already in the pipe comes first
        if now > self.deadline:
            if self.phase == Phase.DONE:              # finished, but slow to exit
                self._kill_everything()
            elif self.outcome is None and self.phase == Phase.STARTING:
                self.kill(RUNTIME_ERROR, self._late_message(), "grade it again when the machine is less busy")
            elif self.outcome is None:
                self._late(now)
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = status
            elif not self.eof:
                return False
            elif self.phase == Phase.DONE or self.outcome is not None:
                self.status = -1                      # finish() kills and reaps it
            elif self.eof_at is None or now < self.eof_at + 0.3:   # channel closed: give it time to exit
                self.eof_at = self.eof_at or now
                return False
            else:
                self.kill(RUNTIME_ERROR, "the submission closed the judge's result channel")
                self.status = -1
        self.drain()                                  # what it wrote before exiting
        return True

    def _late(self, now: float) -> None:
        """Past the deadline in a case, the benchmark or loading: a time limit, a memory limit, or run on."""
        verdict, value = self.memory.at_deadline(self.pid, (self.phase, self.index), now,
                                                 self.limits.time_limit_s, self.hard_end)
        if verdict == RUN_ON:
            self.deadline = value
        elif verdict == MEMORY_LIMIT:
            self.kill(MEMORY_LIMIT, f"{self._late_message()}, still allocating: {value:.0f} MiB held of a "
                      f"{self.limits.memory_limit_mb} MiB memory cap",
                      "the judge caps the memory a submission may allocate")
        else:
            self.kill(TIME_LIMIT, self._late_message(), "an infinite loop, or far too much work?")

    def abort(self) -> None:
        """Kill and reap the child at once (the judge itself is stopping)."""
        self._kill_everything()
        if self.status is None:
            os.waitpid(self.pid, 0)
        self._close()

    def _kill_everything(self) -> None:
        for kill in (os.killpg, os.kill):
            try:
                kill(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.containment.kill_all()
        if self.mode == "fork":
            isolation.kill_session(self.pid)

    def _close(self) -> None:
        for fd in (self.res_fd, self.out_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.containment.close()
        shutil.rmtree(self.job.scratch, ignore_errors=True)

    def _late_message(self) -> str:
        return late_message(self.phase, self.limits, self.hard_end)

    def finish(self) -> int | None:
        """Record why the child ended; the case to restart from, or None."""
        self._kill_everything()                       # whatever it started, too
        if self.status == -1:
            self.status = os.waitpid(self.pid, 0)[1]
        while True:                                   # what it printed last (a flush at exit) is kept too
            try:
                if not self.read(self.out_fd):
                    break
            except OSError:
                break
        self._close()
        if self.phase == Phase.DONE and self.outcome is None:
            return None
        outcome = self.outcome or self._death()
        run, phase = self.run, self.phase
        if phase in (Phase.STARTING, Phase.LOADING, Phase.DONE):
            run.load = run.load or outcome
            return None
        if phase == Phase.IN_BENCH:
            run.bench = {"error": outcome.message}
            return None
        index = self.next
        if index < len(run.cases):
            run.record(index, _stopped(outcome))
        rest = index + 1
        lim = self.limits
        if rest < len(run.cases) and run.restarts < lim.max_restarts and not run.tampered and \
                time.monotonic() < self.hard_end - lim.time_limit_s:
            run.restarts += 1
            return rest
        for i in range(rest, len(run.cases)):
            run.record(i, _stopped(Outcome(SKIPPED, f"not run: case {index} ended the process")))
        return None

    def _death(self) -> Outcome:
        return ended_how(self.status or 0, self.mode)


@dataclass(frozen=True)
class Stopped:
    """A case with no record from the child: it ended (time limit, crash, refused action) or never ran."""
    outcome: Outcome


def _stopped(outcome: Outcome) -> Stopped:
    return Stopped(outcome)
