"""The parent's watch over one child: start it, read its messages and output, end it at a deadline, say why it
ended, and reap it (no zombie, whatever the submission did). Its messages move it through phases, each with
a deadline: starting --ready--> loading --loaded--> cases (0, 1, ...) --> (bench) --done--> done.

One rule for a child that does not finish: its deadline passed, a time limit (still starting: a busy machine,
not the submission's time); a MemoryError (in its case's record) or a SIGKILL the judge did not send, a
memory limit; its CPU seconds ran out, a time limit; any other signal or early exit, a runtime error.
"""
from __future__ import annotations

import functools
import os
import pickle
import signal
import subprocess
import sys
import threading
import time

from . import isolation, registry
from .outcome import MEMORY_HINT, MEMORY_LIMIT, RUNTIME_ERROR, SKIPPED, TIME_LIMIT, Outcome
from .protocol import CaseDone, Done, Job, LineReader, Loaded, ProtocolError, Ready, Refused

REFUSED_HINT = ("a graded function computes its answer and returns it: it may not write files outside its "
                "working directory, start processes, load native code or open sockets")
TOO_MUCH = "an infinite loop, or far too much work?"
EXIT_GRACE_S = 2.0                   # a child that sent `done` (or failed to load) has this long to exit
_PHASES = {Ready: ("starting",), Loaded: ("loading",), CaseDone: ("cases",), Done: ("cases", "bench")}
_LATE = {"loading": "loading (importing) the file took longer than {import_limit_s:g} s",
         "bench": "the benchmark took longer than {bench_limit_s:g} s",
         "cases": "over the time limit of {time_limit_s:g} s per case"}


class Supervisor:
    """One child running the submission of `run` (a grading.Result) from case `start` on."""

    def __init__(self, exercise, run, limits, start: int, seed: int, device: str, bench: bool, cases=None):
        self.run, self.limits, self.bench = run, limits, bench
        self.scratch, self.watcher = (None, None) if run.mode == isolation.BWRAP else isolation.scratch_dir()
        cpu_s = int(limits.import_limit_s + limits.total_limit_s + bench * limits.bench_limit_s) + 5
        job = Job(exercise.id, run.submission.path, seed, device, start, bench,
                  self.scratch or isolation.SCRATCH, limits.memory_limit_mb, cpu_s, limits.guards)
        res_r, res_w = os.pipe()
        out_r, out_w = os.pipe()
        if run.mode == isolation.BWRAP:
            self.proc = _exec_in_sandbox(job, res_w, out_w, cases)
            self.pid = self.proc.pid
        else:
            self.proc = None
            self.pid = _fork(job, cases, run.submission.namespace, res_w, out_w)
        os.close(res_w)
        os.close(out_w)
        for fd in (res_r, out_r):
            os.set_blocking(fd, False)
        self.res_fd, self.out_fd, self.open_fds = res_r, out_r, {res_r, out_r}   # open: not at end of file
        self.reader, self.phase, self.next = LineReader(), "starting", start
        self.outcome: Outcome | None = None           # why the judge ended it, once it did
        self.wild_case: int | None = None             # a case that wrote outside its tensors: ended after it
        self.ended: tuple | None = None               # (signal, exit code), once it has exited
        self.reaped = False                           # then its pid may name another process: never signal
        self.deadline = time.monotonic() + limits.startup_limit_s
        run.started = run.started or time.monotonic()
        run.isolation = isolation.DESCRIBE[run.mode] + (" + in-process guard" if limits.guards else "")

    def read(self, fd: int) -> bool:
        """Take what `fd` holds now; False when it held nothing (or is closed)."""
        try:
            data = os.read(fd, 1 << 16)
        except OSError:
            return False
        if not data:
            self.open_fds.discard(fd)
        run, lim = self.run, self.limits
        if fd == self.out_fd:
            run.output_total += len(data)
            run.printed += data[: max(0, lim.output_keep_bytes - len(run.printed))]
            if run.output_total > lim.output_limit_bytes and self.outcome is None:
                while self.read(self.res_fd):         # what it reported before the flood comes first
                    pass
                self.stop(Outcome(RUNTIME_ERROR, f"output limit: more than {lim.output_limit_bytes} bytes "
                                  "printed to stdout/stderr", "remove the prints (or print much less)"))
        elif data and self.outcome is None:
            try:
                for message in self.reader.feed(data):
                    self._handle(message, time.monotonic())
            except ProtocolError as err:
                self.stop(Outcome(RUNTIME_ERROR, "the judge's result channel held data it did not write "
                                  "(did the submission write to the judge's file descriptors?)",
                                  details=[str(err)]))
        return bool(data)

    def _handle(self, message, now: float) -> None:
        run, lim = self.run, self.limits
        if self.wild_case is not None:                # ended after a wild write: nothing more counts
            return
        if isinstance(message, Refused):              # the refusal is the verdict, whatever happens next
            refused = Outcome(RUNTIME_ERROR, f"refused by the judge: {message.action}", REFUSED_HINT)
            if self.phase == "cases":
                run.stopped.setdefault(self.next, refused)
            else:
                run.load = run.load or refused
            return
        if self.phase not in _PHASES[type(message)] or (isinstance(message, Done) and self.next < run.total):
            raise ProtocolError(f"{type(message).__name__} while {self.phase} (case {self.next})")
        if isinstance(message, Ready):                # the submission's own clock starts now
            if run.total not in (0, message.cases):
                raise ProtocolError(f"the child built {message.cases} cases, the judge {run.total}")
            run.total = message.cases
            run.budget_end = run.budget_end or now + lim.import_limit_s + lim.total_limit_s
            self.phase, self.deadline = "loading", now + lim.import_limit_s
            return
        if isinstance(message, Done) or (isinstance(message, Loaded) and message.error is not None):
            if isinstance(message, Loaded):
                run.load = run.load or message.error
            run.bench = getattr(message, "figures", None)
            self.phase, self.deadline = "done", now + EXIT_GRACE_S
            return
        if isinstance(message, CaseDone):
            if message.index != self.next:
                raise ProtocolError(f"case {message.index} reported, expected {self.next}")
            run.records[self.next] = message
            self.next += 1
            if isinstance(message.observation, dict) and message.observation.get("wild_writes"):
                self.wild_case = message.index        # its heap may be corrupt (cases/kernel_harness.py):
                isolation.kill(self.pid)              # the next case runs in a fresh child
        if self.next == run.total and self.bench:
            self.phase, self.deadline = "bench", now + lim.bench_limit_s
        else:
            self.phase, self.deadline = "cases", min(now + lim.time_limit_s, run.budget_end)

    def stop(self, outcome: Outcome) -> None:
        """End the child (and everything in its group or sandbox) with `outcome` as the reason."""
        self.outcome = self.outcome or outcome
        if not self.reaped:
            isolation.kill(self.pid)

    def poll(self) -> bool:
        """Enforce the deadline; True once the child has exited (it is reaped in `finish`)."""
        if time.monotonic() > self.deadline and self.outcome is None:
            while self.read(self.res_fd):             # a message already in the pipe comes first
                pass
            if time.monotonic() > self.deadline and self.outcome is None:
                if self.phase == "done":
                    isolation.kill(self.pid)          # finished, but slow to exit: nothing to report
                else:
                    self.stop(self._late())
        gone = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)   # not reaped yet
        if gone is not None and gone.si_pid == self.pid:
            signalled = gone.si_code in (os.CLD_KILLED, os.CLD_DUMPED)
            self.ended = (gone.si_status, None) if signalled else (None, gone.si_status)
        return self.ended is not None

    def _late(self) -> Outcome:
        lim = self.limits
        if self.phase == "starting":
            return Outcome(RUNTIME_ERROR, f"the grading process did not start within {lim.startup_limit_s:g} "
                           "s (is the machine overloaded?); this is not the submission's time",
                           "grade it again when the machine is less busy")
        if self.phase == "cases" and time.monotonic() >= self.run.budget_end:
            return Outcome(TIME_LIMIT, f"loading it and all cases took longer than "
                           f"{lim.import_limit_s + lim.total_limit_s:g} s", TOO_MUCH)
        return Outcome(TIME_LIMIT, _LATE[self.phase].format(**vars(lim)), TOO_MUCH)

    def finish(self) -> int | None:
        """After `poll` said it ended: reap it, read what is left, record why it ended. Returns the case to
        restart from in a new child, or None."""
        self._reap()                                  # whatever it left in its group, before its pid is free
        while self.read(self.res_fd) or self.read(self.out_fd):
            pass
        self._close()
        run, lim = self.run, self.limits
        wild = self.wild_case is not None and self.outcome is None    # killed after a wild write: go on
        if self.phase == "done" and self.outcome is None:
            return None
        outcome = self.outcome or self._ended_how()
        if self.phase != "cases":
            if self.phase == "bench":
                run.bench = {"error": outcome.message}
            else:
                run.load = run.load or outcome
            return None
        if not wild:                                  # a wild case failed alone: restarts after it are free
            run.stopped.setdefault(self.next, outcome)
        rest = self.next + (not wild)
        if rest < run.total and (run.restarts < lim.max_restarts or wild) and \
                time.monotonic() < run.budget_end - lim.time_limit_s:
            run.restarts += not wild
            return rest
        for i in range(rest, run.total):
            run.stopped[i] = Outcome(SKIPPED, f"not run: case {rest - 1} ended the process")
        return None

    def _ended_how(self) -> Outcome:
        """Why a child that the judge did not stop ended: a signal, or an early exit."""
        sig, code = self.ended
        if self.run.mode == isolation.BWRAP and code is not None and code > 128:    # bwrap passes a signal on
            sig, code = code - 128, None
        if sig == signal.SIGKILL:
            return Outcome(MEMORY_LIMIT, "killed by the system (out of memory?)", MEMORY_HINT)
        if sig == signal.SIGXCPU:
            return Outcome(TIME_LIMIT, "over the CPU time limit", TOO_MUCH)
        if sig is not None:
            name = signal.Signals(sig).name if sig in signal.Signals.__members__.values() else str(sig)
            return Outcome(RUNTIME_ERROR, f"crashed with {name}",
                           "a segmentation fault often means a recursion too deep for the C stack")
        return Outcome(RUNTIME_ERROR, f"the process ended with exit code {code} before finishing",
                       "do not call os._exit() or sys.exit() in a submission")

    def abort(self) -> None:
        """The judge itself is stopping (Ctrl-C, or a bug of its own): end the child now, leave nothing."""
        self._reap()
        self._close()

    def _reap(self) -> None:
        """Kill the child's group, then reap it: no zombie, and no signal to a pid that may be reused."""
        if not self.reaped:
            isolation.kill(self.pid)
            self.proc.wait() if self.proc is not None else os.waitpid(self.pid, 0)
            self.reaped = True

    def _close(self) -> None:
        for fd in (self.res_fd, self.out_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.scratch is not None:
            isolation.release(self.scratch, self.watcher)
            self.scratch = None


def _exec_in_sandbox(job: Job, res_w: int, out_w: int, cases) -> subprocess.Popen:
    """`python -m pagedkv_lib.judge.child JOB RESULT_FD CASES_FD UID` inside bwrap (isolation.mounts: a file
    tree without the answer), in a session of its own (its process group). Its cases come from here, through
    CASES_FD, pickled by a thread (`_send_cases`) while the child imports torch: building them may need the
    library's answer, which the sandbox does not hold."""
    argv, fds = isolation.bwrap_argv(isolation.mounts(job.exercise_id, job.path, job.device), job.device)
    cases_r, cases_w = os.pipe()
    argv += [sys.executable, "-m", "pagedkv_lib.judge.child", job.to_json(), str(res_w), str(cases_r),
             str(isolation.sandbox_uid())]
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out_w, stderr=out_w, env={},
                                pass_fds=(res_w, cases_r, *fds), start_new_session=True,
                                preexec_fn=functools.partial(isolation.set_limits, None, job.cpu_s))
    except BaseException:
        os.close(cases_w)
        raise
    finally:
        for fd in (cases_r, *fds):
            os.close(fd)
    threading.Thread(target=_send_cases, args=(cases_w, job, cases), daemon=True).start()
    return proc


def _send_cases(fd: int, job: Job, cases) -> None:
    """Pickle the cases (built here if not given) into the pipe `fd`; a child that is gone ends it."""
    try:
        with open(fd, "wb") as pipe:
            if cases is None:
                cases = registry.get(job.exercise_id).cases().build(job.seed, job.device)
            pickle.dump(cases, pipe)
    except OSError:
        pass


def _fork(job: Job, cases, namespace, res_w: int, out_w: int) -> int:
    """A forked child; it points every descriptor it inherited but its two pipes at /dev/null."""
    for stream in (sys.stdout, sys.stderr):           # nothing buffered may be printed twice
        if stream is not None:
            stream.flush()
    pid = os.fork()
    if pid == 0:
        from .child import fork_main

        fork_main(job, cases, namespace, res_w, out_w)
    return pid
