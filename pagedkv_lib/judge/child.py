"""The graded child: limits, guard, the submission, then every case, each reported as a message (protocol.py).

It starts one of two ways (isolation.py): exec'd inside bubblewrap as `python -m pagedkv_lib.judge.child
JOB_JSON --result-fd N` (it builds the cases itself, from the seed), or as a fork of the judge (`fork_main`:
it inherits the cases, and a notebook's globals). Either way `serve` closes the library's answers, sets the
resource limits and installs the guard BEFORE the submission is imported. The child never sees an expected
result: the parent computes those.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
import traceback

from . import guards, isolation, registry
from .outcome import Outcome
from .protocol import CaseDone, Channel, Done, Job, Loaded, Ready, Refused
from .submission import LoadError, close_library, load


def serve(job: Job, channel: Channel, cases=None, namespace=None) -> None:
    exercise = registry.get(job.exercise_id)
    import torch

    torch.set_num_threads(1)
    tmp = os.path.join(job.scratch, "tmp")
    os.makedirs(tmp, exist_ok=True)
    os.chdir(job.scratch)
    os.environ.update(TMPDIR=tmp, HOME=job.scratch, TRITON_CACHE_DIR=os.path.join(job.scratch, "triton"))
    tempfile.tempdir = tmp
    sys.dont_write_bytecode = True                    # importing the submission writes nothing
    module = exercise.cases()                         # torch, triton, the case data: before the guard
    cases = module.build(job.seed, job.device) if cases is None else cases
    hidden, hidden_dirs, allowed, originals = close_library(exercise, job.path)
    isolation.set_limits(job.memory_mb, job.cpu_s)
    if job.guards:
        guards.install(job.scratch, hidden, hidden_dirs, allowed, lambda what: channel.send(Refused(what)))
    channel.send(Ready(len(cases)))
    try:
        ns, files = load(job.path, namespace, exercise, originals)
    except LoadError as err:
        channel.send(Loaded(err.outcome))
        return
    channel.send(Loaded())
    for i in range(job.start, len(cases)):
        t0 = time.perf_counter()
        try:
            observation, error = module.run(ns, cases[i]), None
        except BaseException as exc:
            observation, error = None, Outcome.of_exception(exc, files)
        channel.send(CaseDone(i, time.perf_counter() - t0, observation, error))
    figures = None
    if job.bench and hasattr(module, "bench"):
        try:
            figures = module.bench(ns, job.device)
        except BaseException as exc:
            figures = {"error": Outcome.of_exception(exc, files).message}
    channel.send(Done(figures))


def main(argv=None) -> None:
    """`python -m pagedkv_lib.judge.child JOB_JSON --result-fd N` (inside bwrap); never returns."""
    try:
        parser = argparse.ArgumentParser(prog="python -m pagedkv_lib.judge.child")
        parser.add_argument("job")
        parser.add_argument("--result-fd", type=int, required=True)
        args = parser.parse_args(argv)
        for stream in (sys.stdout, sys.stderr):       # a print before a hang or a crash still arrives
            stream.reconfigure(line_buffering=True, errors="replace")
        serve(Job(**json.loads(args.job)), Channel(args.result_fd))
    finally:
        _exit()


def fork_main(job: Job, cases, namespace, res_fd: int, out_fd: int) -> None:
    """Entry in a forked child; never returns."""
    try:
        os.setsid()                                   # its own session and group: the parent kills the group
        isolation.die_with_parent()
        _redirect_output(out_fd)
        _blind_inherited_fds(keep=(0, 1, 2, res_fd))
        serve(job, Channel(res_fd), cases, namespace)
    finally:
        _exit()


def _exit() -> None:
    """The end of every child: a failure of its own (the judge's, or a broken torch) as a traceback on its
    stderr, which the report shows, and no exit handler of the judge run again."""
    if sys.exc_info()[0] is not None:
        traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(0)


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
    """Point every descriptor a fork inherits (the judge's terminal, other children's pipes, a notebook's
    sockets) at /dev/null; dup2 rather than close, so no number is freed for an old file object to close."""
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


if __name__ == "__main__":
    main()
