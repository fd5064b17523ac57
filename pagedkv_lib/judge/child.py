"""Inside the child process: guard the library, load the submission, run the cases, report each result.

The child is a fork of the judge (torch already imported). Results go back through a pipe as frames in
`wire` format, which the parent loads without running any code; stdout and stderr go to another pipe that
the parent caps and never parses. The child never sees an expected result: the parent computes those after
every child has exited.
"""
from __future__ import annotations

import io
import os
import resource
import signal
import struct
import sys
import time
import traceback

import torch

from . import wire
from .outcome import describe_exception
from .submission import LoadError, install_guard, load_submission

MAGIC = b"PKVJ"
HEADER = struct.Struct("!4sQ")


class Channel:
    """Frames to the parent; holds its own references, so patching torch or os later does not reach it."""

    def __init__(self, fd: int):
        self.fd, self.write, self.encode = fd, os.write, wire.encode

    def send(self, kind: str, index: int = 0, data=None) -> None:
        payload = self.encode((kind, index, data))
        frame = HEADER.pack(MAGIC, len(payload)) + payload
        view = memoryview(frame)
        while view:
            view = view[self.write(self.fd, view):]


def child_main(job, res_fd: int, out_fd: int) -> None:
    """Never returns: the child always ends with os._exit."""
    channel = None
    try:
        os.setsid()                                   # its own process group: the parent kills them all
        _die_with_parent()
        _redirect_output(out_fd)
        _blind_inherited_fds(keep=(0, 1, 2, res_fd))
        _set_limits(job.limits, job.bench)
        torch.set_num_threads(1)
        channel = Channel(res_fd)
        _run(job, channel)
    except BaseException:
        if channel is not None:
            try:
                channel.send("fatal", 0, traceback.format_exc()[-1500:])
            except BaseException:
                pass
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        os._exit(0)


def _run(job, channel: Channel) -> None:
    install_guard(job.exercise, job.submission.path)
    try:
        ns, files = load_submission(job.submission, job.exercise)
    except LoadError as err:
        channel.send("load_error", 0, err.record)
        return
    channel.send("loaded")
    module = job.exercise.cases()
    for i in range(job.start, len(job.cases)):
        channel.send("begin", i)
        t0 = time.perf_counter()
        try:
            record = {"ok": module.run(ns, job.cases[i])}
        except BaseException as exc:
            record = {"error": describe_exception(exc, files)}
        record["time_s"] = time.perf_counter() - t0
        channel.send("done", i, record)
    if job.bench and hasattr(module, "bench"):
        channel.send("begin", -1)
        try:
            record = {"ok": module.bench(ns, job.device)}
        except BaseException as exc:
            record = {"error": describe_exception(exc, files)}
        channel.send("done", -1, record)
    channel.send("end")


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
