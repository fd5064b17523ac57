"""The graded child: limits, guard, the submission, then every case, each reported as a message (protocol.py).

It starts one of two ways (isolation.py): exec'd inside bubblewrap as `python -m pagedkv_lib.judge.child
JOB_JSON RESULT_FD` (it builds the cases itself, from the seed), or as a fork of the judge (`fork_main`:
it inherits the cases, and a notebook's globals). Either way `serve` closes the library's answers, sets the
resource limits and installs the guard BEFORE the submission is imported. The child never sees an expected
result: the parent computes those.
"""
from __future__ import annotations

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
    """`python -m pagedkv_lib.judge.child JOB_JSON RESULT_FD` (inside bwrap); never returns."""
    try:
        job, result_fd = argv or sys.argv[1:]
        for stream in (sys.stdout, sys.stderr):       # a print before a hang or a crash still arrives
            stream.reconfigure(line_buffering=True, errors="replace")
        serve(Job(**json.loads(job)), Channel(int(result_fd)))
    finally:
        _exit()


def fork_main(job: Job, cases, namespace, res_fd: int, out_fd: int) -> None:
    """Entry in a forked child; never returns."""
    try:
        os.setsid()                                   # its own session and group: the parent kills the group
        isolation.die_with_parent()
        _own_descriptors(res_fd, out_fd)
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


def _own_descriptors(res_fd: int, out_fd: int) -> None:
    """In a fork: stdout and stderr to the output pipe, every other descriptor it inherited (the judge's
    terminal, other children's pipes, a notebook's sockets, stdin) pointed at /dev/null; dup2 rather than
    close, so no number is freed for an old file object to close later."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in map(int, os.listdir("/dev/fd")):
        if fd not in (res_fd, out_fd, null):
            try:
                os.dup2(null, fd)
            except OSError:
                pass
    for fd in (1, 2):
        os.dup2(out_fd, fd)
    sys.stdin = io.StringIO()
    sys.stdout, sys.stderr = (io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), line_buffering=True,
                                               errors="replace") for fd in (1, 2))


if __name__ == "__main__":
    main()
