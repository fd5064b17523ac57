"""The parent's watch over one child: fork it, read its frames and output, enforce limits, explain its end.

A `Supervisor` is non-blocking: `run_all` (sandbox.py) calls `read` when a pipe is readable and `check`
regularly; once `check` says the child is gone, `finish` records why and says where to restart, if anywhere.
"""
from __future__ import annotations

import os
import signal
import sys
import time

from . import child, wire
from .outcome import MEMORY_LIMIT, RUNTIME_ERROR, SKIPPED, TIME_LIMIT, Outcome, from_record

MAX_FRAME = 64 * 2**20                 # bytes of one result frame; more is tampering


class Supervisor:
    """One child process running one submission's cases from `job.start` on."""

    def __init__(self, job, run):
        self.job, self.run, self.limits = job, run, job.limits
        res_r, res_w = os.pipe()
        out_r, out_w = os.pipe()
        for stream in (sys.stdout, sys.stderr):       # nothing buffered may be printed twice
            if stream is not None:
                stream.flush()
        pid = os.fork()
        if pid == 0:                                  # the child: never returns
            os.close(res_r)
            os.close(out_r)
            child.child_main(job, res_w, out_w)
        os.close(res_w)
        os.close(out_w)
        os.set_blocking(res_r, False)
        os.set_blocking(out_r, False)
        self.pid, self.res_fd, self.out_fd = pid, res_r, out_r
        self.buf = bytearray()
        self.phase: object = "load"                   # "load", a case index, "between", "bench", "done"
        self.next = job.start
        self.deadline = time.monotonic() + self.limits.import_limit_s
        self.outcome: Outcome | None = None           # why we stopped it, once we have
        self.status: int | None = None
        self.eof = False
        self.eof_at: float | None = None

    # reading ------------------------------------------------------------------------------------------
    def read(self, fd: int) -> None:
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        if fd == self.out_fd:
            run = self.run
            run.output_total += len(data)
            run.output += data[: max(0, self.limits.output_keep_bytes - len(run.output))]
            if run.output_total > self.limits.output_limit_bytes:
                self.kill(RUNTIME_ERROR, f"output limit: more than {self.limits.output_limit_bytes} bytes "
                          "printed to stdout/stderr", "remove the prints (or print much less)")
            return
        if not data:
            self.eof = True
            return
        self.buf += data
        while len(self.buf) >= child.HEADER.size and self.outcome is None:
            magic, size = child.HEADER.unpack_from(self.buf)
            if magic != child.MAGIC or size > MAX_FRAME:
                return self._tampered()
            if len(self.buf) < child.HEADER.size + size:
                return
            payload = bytes(self.buf[child.HEADER.size : child.HEADER.size + size])
            del self.buf[: child.HEADER.size + size]
            try:
                kind, index, data = wire.decode(payload)
                self._message(kind, index, data)
            except Exception:
                return self._tampered()

    def _message(self, kind: str, index: int, data) -> None:
        now, lim = time.monotonic(), self.limits
        if kind == "loaded" and self.phase == "load":
            self.phase, self.deadline = "between", now + lim.time_limit_s
        elif kind == "load_error" and self.phase == "load":
            self.run.load = from_record(data)
            self.phase, self.deadline = "done", now + 2.0
        elif kind == "begin" and self.phase == "between" and index in (self.next, -1):
            self.phase = index if index >= 0 else "bench"
            budget = lim.time_limit_s if index >= 0 else lim.bench_limit_s
            self.deadline = min(now + budget, self.run.started + lim.total_limit_s + (index < 0) * budget)
        elif kind == "done" and self.phase == (index if index >= 0 else "bench") and type(data) is dict:
            if index < 0:
                self.run.bench = data.get("ok", data)
            else:
                ok = "ok" in data
                self.run.raws[index] = ("ok" if ok else "error", data["ok"] if ok else data.get("error", {}),
                                        float(data.get("time_s", 0.0)))
                self.next = index + 1
            self.phase, self.deadline = "between", now + lim.time_limit_s
        elif kind == "end" and self.phase == "between" and self.next == len(self.job.cases):
            self.phase, self.deadline = "done", now + 2.0
        elif kind == "fatal":
            self.kill(RUNTIME_ERROR, "the grading process failed (did the submission break torch or os?)",
                      details=str(data).splitlines()[-6:])
        else:
            raise ValueError(f"unexpected message {kind!r} in phase {self.phase!r}")

    def _tampered(self) -> None:
        self.kill(RUNTIME_ERROR, "the judge's result channel held data it did not write "
                  "(did the submission write to the judge's file descriptors?)")

    # stopping -----------------------------------------------------------------------------------------
    def kill(self, verdict: str, message: str, hint: str = "", details=()) -> None:
        if self.outcome is None:
            self.outcome = Outcome(verdict, message, hint, list(details))
        self._killpg()

    def check(self) -> bool:
        """Enforce the deadline and notice the end; True once the child is gone (or must be reaped)."""
        now = time.monotonic()
        if now > self.deadline:
            if self.phase == "done":                  # finished, but slow to exit
                self._killpg()
            elif self.outcome is None:
                self.kill(TIME_LIMIT, self._late_message(), "an infinite loop, or far too much work?")
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = status
            elif not self.eof:
                return False
            elif self.phase == "done" or self.outcome is not None:
                self.status = -1                      # finish() kills and reaps it
            elif self.eof_at is None or now < self.eof_at + 0.3:   # channel closed: give it time to exit
                self.eof_at = self.eof_at or now
                return False
            else:
                self.kill(RUNTIME_ERROR, "the submission closed the judge's result channel")
                self.status = -1
        while not self.eof and self.outcome is None:  # what it wrote before exiting
            before = len(self.buf)
            self.read(self.res_fd)
            if len(self.buf) == before and not self.eof:
                break
        return True

    def abort(self) -> None:
        """Kill and reap the child at once (the judge itself is stopping)."""
        self._killpg()
        if self.status is None:
            os.waitpid(self.pid, 0)
        os.close(self.res_fd)
        os.close(self.out_fd)

    def _killpg(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _late_message(self) -> str:
        lim = self.limits
        if self.phase == "load":
            return f"loading the file took longer than {lim.import_limit_s:g} s"
        if time.monotonic() >= self.run.started + lim.total_limit_s:
            return f"all cases together took longer than {lim.total_limit_s:g} s"
        if self.phase == "bench":
            return f"the benchmark took longer than {lim.bench_limit_s:g} s"
        return f"over the time limit of {lim.time_limit_s:g} s per case"

    def finish(self) -> int | None:
        """Record why the child ended; the case to restart from, or None."""
        self._killpg()                                # grandchildren too
        if self.status == -1:
            self.status = os.waitpid(self.pid, 0)[1]
        while True:
            try:
                if not os.read(self.out_fd, 1 << 16):
                    break
            except (BlockingIOError, OSError):
                break
        os.close(self.res_fd)
        os.close(self.out_fd)
        if self.phase == "done" and self.outcome is None:
            return None
        outcome = self.outcome or self._death()
        run, phase = self.run, self.phase
        if phase in ("load", "done"):
            run.load = run.load or outcome
            return None
        if phase == "bench":
            run.bench = {"error": outcome.message}
            return None
        index = self.next
        if index < len(run.raws):
            run.raws[index] = ("outcome", outcome, 0.0)
        rest = index + 1
        lim = self.limits
        if rest < len(run.raws) and run.restarts < lim.max_restarts and \
                time.monotonic() < run.started + lim.total_limit_s:
            run.restarts += 1
            return rest
        for i in range(rest, len(run.raws)):
            run.raws[i] = ("outcome", Outcome(SKIPPED, f"not run: case {index} ended the process"), 0.0)
        return None

    def _death(self) -> Outcome:
        status = self.status or 0
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            if sig == signal.SIGKILL:
                return Outcome(MEMORY_LIMIT, "killed by the system (out of memory?)")
            if sig == signal.SIGXCPU:
                return Outcome(TIME_LIMIT, "over the CPU time limit")
            return Outcome(RUNTIME_ERROR, f"crashed with {signal.Signals(sig).name}",
                           "a segmentation fault often means a recursion too deep for the C stack")
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
        return Outcome(RUNTIME_ERROR, f"the process ended with exit code {code} before finishing",
                       "do not call os._exit() or sys.exit() in a submission")
