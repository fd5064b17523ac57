"""Inside the child process: contain it, load the submission, run the cases, report each one (protocol.py).

A child is started one of two ways (isolation.py decides):
- exec: `python -m pagedkv_lib.judge.child --result-fd N` inside a bubblewrap sandbox; the pickled `Job`
  arrives on stdin, stdout and stderr are the parent's output pipe;
- fork: a fork of the judge (torch already imported), for notebooks and where bwrap is missing.
Either way `serve` sets the limits, moves into the scratch directory, installs the guards (guards.py and
submission.install_guard) and only then imports the submission. The child never sees an expected result:
the parent computes those after every child has exited.
"""
from __future__ import annotations

import argparse
import gc
import io
import os
import pickle
import resource
import signal
import sys
import tempfile
import time
import traceback

import torch

from . import guards
from .outcome import describe_exception
from .protocol import (
    BenchFinished,
    BenchStarted,
    CaseFinished,
    CaseRecord,
    CaseStarted,
    Channel,
    ErrorRecord,
    Fatal,
    Finished,
    Loaded,
    LoadFailed,
    Ready,
    Refused,
)
from .submission import LoadError, install_guard, load_submission


def fork_main(job, res_fd: int, out_fd: int) -> None:
    """Entry in a forked child; never returns (the child always ends with os._exit)."""
    channel = None
    try:
        os.setsid()                                   # its own session: the parent kills its group
        job.containment.enter()
        _die_with_parent()
        _redirect_output(out_fd)
        _blind_inherited_fds(keep=(0, 1, 2, res_fd))
        channel = Channel(res_fd)
        _shed_inherited_memory()
        serve(job, channel)
    except BaseException:
        _fatal(channel)
    finally:
        _exit()


def exec_main(argv=None) -> None:
    """Entry of `python -m pagedkv_lib.judge.child` (in the sandbox); never returns."""
    channel = None
    try:
        parser = argparse.ArgumentParser(prog="python -m pagedkv_lib.judge.child")
        parser.add_argument("--result-fd", type=int, required=True)
        args = parser.parse_args(argv)
        job = pickle.loads(sys.stdin.buffer.read())   # from the parent, trusted
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        sys.stdin = io.StringIO()
        for stream in (sys.stdout, sys.stderr):       # a print before a hang or a crash still arrives
            stream.reconfigure(line_buffering=True, errors="replace")
        _die_with_parent()
        _blind_inherited_fds(keep=(0, 1, 2, args.result_fd))
        channel = Channel(args.result_fd)
        serve(job, channel)
    except BaseException:
        _fatal(channel)
    finally:
        _exit()


def serve(job, channel: Channel) -> None:
    """Limits, scratch directory, guards, the submission, then every case from `job.start` (and the bench)."""
    _set_limits(job.limits, job.bench)
    torch.set_num_threads(1)
    scratch = job.scratch
    os.makedirs(os.path.join(scratch, "tmp"), exist_ok=True)
    os.chdir(scratch)
    os.environ.update(TMPDIR=os.path.join(scratch, "tmp"), HOME=scratch,
                      TRITON_CACHE_DIR=os.path.join(scratch, "triton-cache"))
    tempfile.tempdir = os.path.join(scratch, "tmp")
    sys.dont_write_bytecode = True                    # importing the submission writes nothing
    module = job.exercise.cases()                     # imports torch, triton ... before the guards
    hidden, prefixes, allowed = install_guard(job.exercise, job.submission.path)
    if job.limits.guards:
        guards.install(guards.default_policy(scratch, hidden, prefixes, allowed),
                       lambda action: channel.send(Refused(action)))
    channel.send(Ready())
    try:
        ns, files = load_submission(job.submission, job.exercise)
    except LoadError as err:
        channel.send(LoadFailed(err.record))
        return
    channel.send(Loaded())
    for i in range(job.start, len(job.cases)):
        channel.send(CaseStarted(i))
        t0 = time.perf_counter()
        try:
            record = CaseRecord(observation=module.run(ns, job.cases[i]))
        except BaseException as exc:
            record = CaseRecord(error=ErrorRecord.from_exception(exc, files))
        channel.send(CaseFinished(i, CaseRecord(record.observation, record.error, time.perf_counter() - t0)))
    if job.bench and hasattr(module, "bench"):
        channel.send(BenchStarted())
        try:
            channel.send(BenchFinished(figures=module.bench(ns, job.device)))
        except BaseException as exc:
            channel.send(BenchFinished(error=describe_exception(exc, files)["message"]))
    channel.send(Finished())


def _fatal(channel) -> None:
    if channel is not None:
        try:
            channel.send(Fatal(traceback.format_exc()[-1500:]))
        except BaseException:
            pass


def _exit() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(0)


def _die_with_parent() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)      # PR_SET_PDEATHSIG (Linux)
    except Exception:
        pass


def _redirect_output(out_fd: int) -> None:
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    os.close(out_fd)
    sys.stdin = io.StringIO()
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True, errors="replace")
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True, errors="replace")


def _blind_inherited_fds(keep) -> None:
    """Point every inherited descriptor (the judge's terminal, other children's pipes, a notebook's sockets)
    at /dev/null; dup2 rather than close, so no number is freed for an old file object to close later."""
    try:
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 256))
    null = os.open(os.devnull, os.O_RDWR)
    for fd in fds:
        if fd not in keep and fd != null:
            try:
                os.dup2(null, fd)
            except OSError:
                pass


def _set_limits(limits, bench: bool) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    cpu = int(limits.total_limit_s + limits.import_limit_s + bench * limits.bench_limit_s) + 5
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    if limits.memory_limit_mb is not None:
        with open("/proc/self/statm") as f:
            vm = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        cap = vm + limits.memory_limit_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _shed_inherited_memory() -> None:
    """A fork inherits the judge's uncollected garbage and free heap. Garbage freed after the memory cap is
    set would lower the base the parent's memory watch counts from, and a hog filling free heap would not grow
    its address space: collect the garbage, and give the free heap back (glibc's malloc_trim) so that filling
    it grows resident memory, which the watch also reads. (An exec'd child starts with neither.)"""
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):                 # not glibc
        pass


if __name__ == "__main__":
    exec_main()
