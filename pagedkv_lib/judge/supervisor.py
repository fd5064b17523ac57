"""The parent's watch over one child: start it, read its messages and output, end it at a limit, say why it
ended, and reap it (no zombie, whatever the submission did). What it saw, it reports as a `Seen` (the cases
finished, what was printed, how the child ended, where a new child goes on); grading.py builds the Result.
Its messages move it through phases, each with a limit:
starting --ready--> loading --loaded--> cases (0, 1, ...) --> (bench, its marks) --done--> done.
In the benchmark each Mark is read on the parent's clock (`Seen.marks`): speed.py's window around each timed
call, written into the figures when they arrive.

Time is CPU time, as contest judges measure it: the parent reads the child's CPU seconds itself, from /proc,
summed over the child's process tree (a sandbox's tree under bwrap; a fork itself), and a phase (loading,
a case, the benchmark) is a time limit once it has used more CPU than its limit; all of loading and the cases
together have a CPU budget too. A wall clock WALL_FACTOR times longer is only a backstop (a child that
sleeps, or waits on something), so a busy machine gives the verdict an idle one gives; and a FILE's loading
and cases, over all its children, get at most FILE_WALL_FACTOR times its CPU budget on the clock (a file
that sleeps a little less than each backstop would otherwise cost an instructor's batch minutes: it is a
time limit that says it waited). Without /proc (macOS, where only forks run) the limits are the wall
clock's, as long as each limit. Starting (python, torch, the cases) is the machine's time, not the
submission's: a wall-clock limit of its own. `_limit_passed` is the one check of all these limits.

One rule for a child that does not finish: a limit passed, a time limit (still starting: a busy machine,
not the submission's time); a MemoryError (in its case's record) or a SIGKILL the judge did not send, a
memory limit; its CPU seconds ran out (RLIMIT_CPU, the kernel's cap over everything), a time limit; any
other signal or early exit, a runtime error. A child that ends while still starting (before "ready", so
before the submission was imported; what it sent is read first) is the judge's own failure: a judge error.

The parent reads a bounded amount from each channel at a time (DRAIN_BYTES) and in all (the output limit,
protocol.MAX_RESULT_BYTES), so what the child sends cannot hold it past a limit or fill its memory.
"""
from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from . import isolation, registry, speed
from .outcome import MEMORY_HINT, MEMORY_LIMIT, RUNTIME_ERROR, SKIPPED, TIME_LIMIT, Outcome, judge_error
from .protocol import (
    MAX_RESULT_BYTES,
    CaseDone,
    Done,
    Job,
    LineReader,
    Loaded,
    Mark,
    ProtocolError,
    Ready,
    Refused,
    clip,
    send_cases,
)

INTERRUPTED = threading.Event()      # the command line took a Ctrl-C (cli._interrupted): stop at next look
REFUSED_HINT = ("a graded function computes its answer and returns it: it may not write files outside its "
                "working directory, start processes, load native code or open sockets")
TOO_MUCH = "an infinite loop, or far too much work?"
WAITS = "does it wait for something that never comes (a sleep, input, a lock)?"
EXIT_GRACE_S = 2.0                   # a child that sent `done` (or failed to load) has this long to exit
WALL_FACTOR = 5                      # a CPU limit's wall-clock backstop is this many times longer
FILE_WALL_FACTOR = 2                 # a file's loading and cases: at most this many times its CPU budget
READ_BYTES = 1 << 16                 # one read from a pipe
DRAIN_BYTES = 1 << 20                # read at most this much from one channel before the clock is looked at
RESCAN_S = 1.0                       # how often the child's process tree is looked for new members
REAP_S = 30.0                        # a killed child not gone by then is left (in a kernel wait), unsignalled
_PHASES = {Ready: ("starting",), Loaded: ("loading",), CaseDone: ("cases",), Mark: ("bench",),
           Done: ("cases", "bench")}
_LIMIT_S = {"loading": "import_limit_s", "cases": "time_limit_s", "bench": "bench_limit_s"}
_LATE = {"loading": "loading (importing) the file used more than {import_limit_s:g} s of CPU",
         "bench": "the benchmark used more than {bench_limit_s:g} s of CPU",
         "cases": "over the time limit of {time_limit_s:g} s of CPU per case"}
_CLK_TCK = os.sysconf("SC_CLK_TCK")
HAVE_PROC = os.path.isdir("/proc/self/task")   # Linux; elsewhere (macOS, forks only) the wall clock at 1x
BACKSTOP = WALL_FACTOR if HAVE_PROC else 1     # a phase's wall clock, in times its CPU limit


class ProcessTree:
    """CPU seconds of a process and its descendants, read from /proc (utime + stime, and the cutime + cstime
    of the children each one reaped). Members are found through /proc/PID/task/TID/children where the kernel
    has it, else by a scan of /proc's parent ids, at most every RESCAN_S; one that has gone adds nothing."""

    def __init__(self, root: int):
        self.members = {root}
        self.scanned = float("-inf")

    def cpu_seconds(self) -> float:
        now = time.monotonic()
        if now - self.scanned >= RESCAN_S:
            self.scanned = now
            self._find_members()
        ticks = 0
        for pid in list(self.members):
            fields = isolation.proc_stat(pid)
            if fields is None:
                self.members.discard(pid)
            else:
                ticks += sum(int(n) for n in fields[11:15])    # utime stime cutime cstime (proc(5) 14-17)
        return ticks / _CLK_TCK

    def _find_members(self) -> None:
        if isolation.has_children_files():
            children = isolation.children_listed
        else:                                         # a kernel without CONFIG_PROC_CHILDREN: parent ids
            children = functools.partial(isolation.children_by_parent, isolation.parent_ids())
        todo = list(self.members)
        while todo:
            found = children(todo.pop()) - self.members
            self.members |= found
            todo += found


@dataclass
class Seen:
    """What one child did, as its Supervisor saw it. The grader (grading.py) builds the submission's Result
    from the Seen of all its children, as DMOJ's judge-server lets the grader own the result it returns."""
    start: int                                      # the first case it ran
    records: dict = field(default_factory=dict)     # case index -> CaseDone, as the child reported it
    stopped: dict = field(default_factory=dict)     # case index -> Outcome: refused, ended it, skipped after
    load: Outcome | None = None                     # why the submission could not be graded at all
    bench: dict | None = None                       # the benchmark's figures, or its error
    printed: bytearray = field(default_factory=bytearray)   # the first bytes it printed (after earlier ones)
    output_bytes: int = 0                           # all it printed
    result_bytes: int = 0                           # all it wrote on its result channel
    cpu_s: float = 0.0                              # CPU seconds of loading and cases
    wall_end: float = 0.0                           # the file's wall clock ends: loading plus all cases
    restart: int | None = None                      # the case a new child starts from, if one does
    fresh: bool = False                             # ... because the child asked for one (not a crash)
    marks: list = field(default_factory=list)       # the parent's clock at each Mark of the benchmark


class Supervisor:
    """One child running `submission` (a grading.Submission) from case `start` on, in isolation `mode`.
    `earlier`: the Seen of the submission's children before this one, whose CPU, output and restarts count
    against the same limits. `total`: the cases the judge built, once it has (grading sets it)."""

    def __init__(self, exercise, submission, mode: str, limits, start: int, seed: int, device: str,
                 bench: bool, cases=None, earlier=()):
        self.limits = limits
        self.bench = bench
        self.mode = mode
        self.device = device
        if mode == isolation.BWRAP:
            self.scratch = None
            self.watcher = None
        else:
            self.scratch, self.watcher = isolation.scratch_dir()
        cpu_s = int(limits.import_limit_s + limits.total_limit_s + bench * limits.bench_limit_s) + 5
        path = None                                  # a notebook's code, or a file: through any link
        if submission.path is not None:
            path = os.path.realpath(submission.path)
        job = Job(exercise.id, path, seed, device, start, bench,
                  self.scratch or isolation.SCRATCH, limits.memory_limit_mb, cpu_s, limits.guards)
        res_r, res_w = os.pipe()
        out_r, out_w = os.pipe()
        self.send_failed: list = []                  # why the cases did not reach a sandboxed child, if so
        if mode == isolation.BWRAP:
            self.proc = _exec_in_sandbox(job, res_w, out_w, cases, self.send_failed)
            self.pid = self.proc.pid
        else:
            self.proc = None
            isolation.ORPHANS.adopt()                # what the fork moves out of its group comes back here
            self.pid = _fork(job, cases, submission.namespace, res_w, out_w)
        isolation.ORPHANS.started.add(self.pid)
        os.close(res_w)
        os.close(out_w)
        for fd in (res_r, out_r):
            os.set_blocking(fd, False)
        self.res_fd = res_r
        self.out_fd = out_r
        self.open_fds = {res_r, out_r}               # not at end of file yet
        self.reader = LineReader()
        self.phase = "starting"
        self.next = start                            # the case it runs now
        self.total = None if cases is None else len(cases)     # the cases the judge built
        self.seen = Seen(start)
        self.cpu_before = sum(s.cpu_s for s in earlier)          # the budgets that earlier children used
        self.output_before = sum(s.output_bytes for s in earlier)
        self.result_before = sum(s.result_bytes for s in earlier)
        self.keep_bytes = limits.output_keep_bytes - sum(len(s.printed) for s in earlier)
        self.restarts = sum(s.restart is not None and not s.fresh for s in earlier)
        self.seen.wall_end = max((s.wall_end for s in earlier), default=0.0)    # 0.0: set when ready
        self.outcome: Outcome | None = None          # why the judge ended it, once it did
        self.fresh_asked = False                     # it reported a case after which it must not go on
        self.ended: tuple | None = None              # (signal, exit code), once it has exited
        self.reaped = False                          # then its pid may name another process: never signal
        self.tree = ProcessTree(self.pid)
        self.cpu_s = 0.0                             # its CPU seconds, as last read
        self.cpu_ready: float | None = None          # ... when it said it was ready (the submission's start)
        self.cpu_mark = 0.0                          # ... when the phase began
        self.deadline = time.monotonic() + limits.startup_limit_s      # the phase's or file's wall clock
        self.loaded_at: float | None = None

    # ------------------------------------------------------------------------------------------------------
    # reading

    def read(self, fd: int) -> bool:
        """Take one read of what `fd` holds now; False when it held nothing (or is closed)."""
        try:
            data = os.read(fd, READ_BYTES)
        except OSError:
            return False
        if not data:
            self.open_fds.discard(fd)
        seen = self.seen
        lim = self.limits
        if fd == self.out_fd:
            seen.output_bytes += len(data)
            seen.printed += data[: max(0, self.keep_bytes - len(seen.printed))]
            if self.output_before + seen.output_bytes > lim.output_limit_bytes and self.outcome is None:
                self.drain(self.res_fd)               # what it reported before the flood comes first
                self.stop(Outcome(RUNTIME_ERROR, f"output limit: more than {lim.output_limit_bytes} bytes "
                                  "printed to stdout/stderr", "remove the prints (or print much less)"))
        elif data and self.outcome is None:
            seen.result_bytes += len(data)
            try:
                cap = MAX_RESULT_BYTES[self.device]
                if self.result_before + seen.result_bytes > cap:
                    raise ProtocolError(f"more than {cap} bytes on the result channel")
                for message in self.reader.feed(data, self.device):
                    self._handle(message, time.monotonic())
            except ProtocolError as err:
                self.stop(Outcome(RUNTIME_ERROR, "the judge's result channel held data it did not write "
                                  "(did the submission write to the judge's file descriptors?)",
                                  details=[clip(str(err))]))
        return bool(data)

    def drain(self, fd: int) -> None:
        """Read what `fd` holds, at most DRAIN_BYTES: a child that keeps writing cannot hold the parent."""
        for _ in range(DRAIN_BYTES // READ_BYTES):
            if not self.read(fd):
                return

    def _handle(self, message, now: float) -> None:
        seen = self.seen
        if self.fresh_asked:                          # ended after a case that asked for it: nothing counts
            return
        if isinstance(message, Refused):              # the refusal is the verdict, whatever happens next
            refused = Outcome(RUNTIME_ERROR, f"refused by the judge: {message.action}", REFUSED_HINT)
            if self.phase == "cases":
                seen.stopped.setdefault(self.next, refused)
            elif seen.load is None:
                seen.load = refused
            return
        if self.phase not in _PHASES[type(message)] or (isinstance(message, Done) and self.next < self.total):
            raise ProtocolError(f"{type(message).__name__} while {self.phase} (case {self.next})")
        if isinstance(message, Mark):                 # a timed call begins or ends: the parent's own clock
            if message.index != len(seen.marks):
                raise ProtocolError(f"mark {message.index}, expected {len(seen.marks)}")
            seen.marks.append(now)
            return
        cpu = self._cpu()
        if isinstance(message, Ready):                # the submission's own clock starts now
            if message.cases != self.total:           # a sandboxed child gets the judge's own cases
                raise ProtocolError(f"the child built {message.cases} cases, the judge {self.total}: a "
                                    "forged message, or cases that depend on more than (seed, device)")
            seen.wall_end = seen.wall_end or now + self._file_wall_s()
            self.cpu_ready = cpu
            self._begin("loading", now, cpu)
            return
        if isinstance(message, Loaded):
            self.loaded_at = now
            if message.error is not None:
                seen.load = seen.load or message.error
                self._begin("done", now, cpu)
                return
        if isinstance(message, Done):
            seen.bench = speed.watched(message.figures, seen.marks)
            self._begin("done", now, cpu)
            return
        if isinstance(message, CaseDone):
            if message.index != self.next:
                raise ProtocolError(f"case {message.index} reported, expected {self.next}")
            watched = now - (self.loaded_at or now)   # a case cannot have taken longer than the parent saw
            seen.records[self.next] = CaseDone(message.index, min(message.time_s, watched),
                                               message.observation, message.error)
            self.next += 1
            if message.fresh_child:                   # its memory may be corrupt: the next case runs in a
                self.fresh_asked = True               # fresh child
                isolation.kill(self.pid)
        if self.next == self.total and self.bench:
            self._begin("bench", now, cpu)
        else:
            self._begin("cases", now, cpu)

    def _begin(self, phase: str, now: float, cpu: float) -> None:
        """Phase `phase` starts: its CPU from `cpu` on, its wall clock BACKSTOP times its CPU limit (loading
        and a case: no later than the file's)."""
        self.phase = phase
        self.cpu_mark = cpu
        if phase == "done":
            self.deadline = now + EXIT_GRACE_S
            return
        self.deadline = now + BACKSTOP * getattr(self.limits, _LIMIT_S[phase])
        if phase != "bench":
            self.deadline = min(self.deadline, self.seen.wall_end)

    # ------------------------------------------------------------------------------------------------------
    # limits

    def _cpu(self) -> float:
        if not self.reaped:
            self.cpu_s = max(self.cpu_s, self.tree.cpu_seconds())
        return self.cpu_s

    def spent(self) -> float:
        """CPU seconds the submission used in this child: loading and cases (0 before it was ready)."""
        return 0.0 if self.cpu_ready is None else self.cpu_s - self.cpu_ready

    def _budget(self) -> float:
        return self.limits.import_limit_s + self.limits.total_limit_s

    def _file_wall_s(self) -> float:
        """The file's wall clock, in seconds: FILE_WALL_FACTOR times its CPU budget (no more than each
        phase's backstop factor: without /proc, the budget itself)."""
        return min(BACKSTOP, FILE_WALL_FACTOR) * self._budget()

    def _limit_passed(self, now: float) -> Outcome | None:
        """Why the phase must end now, or None: the one check of its limits (its CPU, the run's CPU budget,
        the file's wall clock, its own), the first passed giving the outcome."""
        lim = self.limits
        if self.phase == "starting":
            if now <= self.deadline:
                return None
            return judge_error(f"the grading process did not start within {lim.startup_limit_s:g} s (is the "
                               "machine overloaded? grade it again when it is less busy)", self.mode,
                               self.send_failed)
        if self.phase == "done":                      # finished, but slow to exit: nothing to report
            return None
        limit_s = getattr(lim, _LIMIT_S[self.phase])
        cpu = self._cpu()
        if cpu - self.cpu_mark > limit_s:
            return Outcome(TIME_LIMIT, _LATE[self.phase].format(**vars(lim)), TOO_MUCH)
        budget = self._budget()
        used = self.cpu_before + self.spent()
        if self.phase != "bench" and used > budget:
            return Outcome(TIME_LIMIT, f"loading it and all cases used more than {budget:g} s of CPU",
                           TOO_MUCH)
        if self.phase != "bench" and now >= self.seen.wall_end:
            wall_s = self._file_wall_s()
            return Outcome(TIME_LIMIT, f"loading it and all cases took {wall_s:g} s on the clock but only "
                           f"{used:.1f} s of CPU: it waited rather than computed (a file gets "
                           f"{wall_s / budget:g} times its budget of {budget:g} s of CPU on the clock)",
                           WAITS)
        if now <= self.deadline:
            return None
        return Outcome(TIME_LIMIT, f"no answer after {BACKSTOP * limit_s:g} s on the clock (the limit is "
                       f"{limit_s:g} s of CPU; a submission that sleeps or waits is stopped at {BACKSTOP} "
                       "times it)", WAITS)

    def stop(self, outcome: Outcome) -> None:
        """End the child (and everything in its group or sandbox) with `outcome` as the reason."""
        self.outcome = self.outcome or outcome
        if not self.reaped:
            isolation.kill(self.pid)

    def poll(self) -> bool:
        """Enforce the limits; True once the child has exited (it is reaped in `finish`). KeyboardInterrupt
        once a Ctrl-C was taken, in case Python swallowed the one its handler raised."""
        if INTERRUPTED.is_set():
            raise KeyboardInterrupt
        if self.phase == "done" and time.monotonic() > self.deadline:
            isolation.kill(self.pid)                  # finished, but slow to exit: nothing to report
        elif self.outcome is None and self._limit_passed(time.monotonic()) is not None:
            self.drain(self.res_fd)                   # a message already in the pipe comes first
            if self.outcome is None:
                passed = self._limit_passed(time.monotonic())
                if passed is not None:
                    self.stop(passed)
        gone = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)   # not reaped yet
        if gone is not None and gone.si_pid == self.pid:
            if gone.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
                self.ended = (gone.si_status, None)
            else:
                self.ended = (None, gone.si_status)
        return self.ended is not None

    # ------------------------------------------------------------------------------------------------------
    # the end

    def finish(self) -> Seen:
        """After `poll` said it ended: reap it, read what is left, record why it ended and where a new child
        goes on (`Seen.restart`)."""
        self._cpu()                                   # its last reading, before it is reaped
        self._reap()                                  # whatever it left in its group, before its pid is free
        self.drain(self.res_fd)
        self.drain(self.out_fd)
        self._close()
        seen = self.seen
        lim = self.limits
        fresh = self.fresh_asked and self.outcome is None     # ended by the judge as it asked: go on
        seen.cpu_s = self.spent()
        if self.phase == "done" and self.outcome is None:
            return seen
        outcome = self.outcome or self._ended_how()
        if self.phase != "cases":
            if self.phase == "bench":
                seen.bench = {"error": outcome.message}
            elif seen.load is None:
                seen.load = outcome
            return seen
        if not fresh:                                 # a case that asked for a fresh child failed alone
            seen.stopped.setdefault(self.next, outcome)
        if fresh:
            rest = self.next
        else:
            rest = self.next + 1
        spent = self.cpu_before + seen.cpu_s
        room = spent < self._budget() - lim.time_limit_s and time.monotonic() < seen.wall_end
        if rest < self.total and (fresh or self.restarts < lim.max_restarts) and room:
            seen.restart = rest                       # restarts after a fresh child's case are free
            seen.fresh = fresh
            return seen
        for i in range(rest, self.total):
            seen.stopped[i] = Outcome(SKIPPED, f"not run: case {rest - 1} ended the process")
        return seen

    def _ended_how(self) -> Outcome:
        """Why a child that the judge did not stop ended: a signal, or an early exit."""
        sig, code = self.ended
        if self.mode == isolation.BWRAP and code is not None and code > 128:    # bwrap passes a signal on
            sig, code = code - 128, None
        if self.phase == "starting":                  # before the submission was imported
            how = f"signal {sig}" if sig is not None else f"exit code {code}"
            return judge_error(f"the grading process ended ({how}) before it was ready", self.mode,
                               self.send_failed)
        if sig == signal.SIGKILL:
            return Outcome(MEMORY_LIMIT, "killed by the system (out of memory?)", MEMORY_HINT)
        if sig == signal.SIGXCPU:
            return Outcome(TIME_LIMIT, "over the CPU time limit", TOO_MUCH)
        if sig is not None:
            if sig in signal.Signals.__members__.values():
                name = signal.Signals(sig).name
            else:
                name = str(sig)
            return Outcome(RUNTIME_ERROR, f"crashed with {name}",
                           "a segmentation fault often means a recursion too deep for the C stack")
        return Outcome(RUNTIME_ERROR, f"the process ended with exit code {code} before finishing",
                       "do not call os._exit() or sys.exit() in a submission")

    def abort(self) -> None:
        """The judge itself is stopping (Ctrl-C, or a bug of its own): end the child now, leave nothing. A
        second Ctrl-C meanwhile does not stop it halfway (the kill is sent again, the wait goes on)."""
        while not self.reaped:
            try:
                self._reap()
            except KeyboardInterrupt:
                continue
        self._close()

    def _reap(self) -> None:
        """Kill the child's group (unsandboxed: and every orphan the judge adopted, before and after the
        child is reaped, so that none outlives the verdict), then reap it: no zombie, and no signal to a pid
        that may be reused. Each wait looks again every few milliseconds, and gives up after REAP_S."""
        if self.reaped:
            return
        isolation.kill(self.pid)
        if self.mode == isolation.FORK:
            isolation.end_orphans()
        deadline = time.monotonic() + REAP_S
        while not self._gone() and time.monotonic() < deadline:
            isolation.kill(self.pid)
            time.sleep(0.005)
        self.reaped = True
        isolation.ORPHANS.started.discard(self.pid)
        if self.mode == isolation.FORK:
            isolation.end_orphans()
            isolation.ORPHANS.disown()

    def _gone(self) -> bool:
        """Whether the child has exited, reaping it if so."""
        if self.proc is not None:
            return self.proc.poll() is not None
        try:
            done, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:                     # reaped already
            return True
        return done == self.pid

    def _close(self) -> None:
        for fd in (self.res_fd, self.out_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.scratch is not None:
            isolation.release(self.scratch, self.watcher)
            self.scratch = None


def _exec_in_sandbox(job: Job, res_w: int, out_w: int, cases, failed: list) -> subprocess.Popen:
    """`python -m pagedkv_lib.judge.child JOB RESULT_FD CASES_FD UID` inside bwrap (isolation.mounts: a file
    tree without the answer), in a session of its own (its process group). Its cases come from here, through
    CASES_FD, pickled by a thread (`_send_cases`) while the child imports torch: building them may need the
    library's answer, which the sandbox does not hold. Why they could not be sent goes into `failed`."""
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
    _start_deaf(threading.Thread(target=_send_cases, args=(cases_w, job, cases, failed), daemon=True))
    return proc


def _start_deaf(thread: threading.Thread) -> None:
    """Start `thread` with SIGINT blocked (a thread inherits the mask of the one that starts it). Python runs
    a signal's handler in the main thread, but the kernel delivers the signal to any thread that does not
    block it: one delivered here while the main thread defers Ctrl-C (grading._interrupts_deferred, while
    torch is imported) would run the handler inside that import after all, where Python 3.10 swallowed
    the KeyboardInterrupt in an import lock's callback and the judge hung."""
    if not hasattr(signal, "pthread_sigmask"):
        thread.start()
        return
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _send_cases(fd: int, job: Job, cases, failed: list) -> None:
    """Pickle the cases (built here if not given) into the pipe `fd`; a child that is gone ends it. A failure
    of the judge's own (building or pickling them) goes into `failed`: the child, at the pipe's end, ends
    before it is ready."""
    try:
        with open(fd, "wb") as pipe:
            if cases is None:
                cases = registry.get(job.exercise_id).cases().build(job.seed, job.device)
            send_cases(cases, pipe)
    except OSError:
        pass
    except Exception as err:
        failed.append(clip(f"sending the cases: {type(err).__name__}: {err}"))


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
