"""The graded child: limits, guard, the submission, then every case, each reported as a message (protocol.py).
Exec'd in bubblewrap (`python -m pagedkv_lib.judge.child JOB_JSON RESULT_FD CASES_FD UID`: its cases come
pickled from the judge; the library's answer is not in its file tree, harness.py) or forked (`fork_main`:
it inherits the cases, and a notebook's globals, and the library's answers are poisoned in its memory). Either
way `serve` sets the limits (in the sandbox it drops to its own uid first) and installs the guard BEFORE the
submission is imported. It never sees an expected result: the parent computes those.
"""
from __future__ import annotations

import importlib.util
import inspect
import io
import json
import os
import sys
import tempfile
import time
import traceback
from dataclasses import replace

from . import guards, isolation, registry
from .outcome import NOT_IMPLEMENTED, RUNTIME_ERROR, ForbiddenCall, Outcome
from .protocol import CaseDone, Channel, Done, Job, Loaded, Mark, Ready, Refused, receive_cases
from .registry import SOLUTIONS_DIR, resolve


def serve(job: Job, channel: Channel, cases=None, namespace=None, sandbox=None) -> None:
    """`sandbox`: (CASES_FD, UID) in bubblewrap, else None (a fork, given its cases)."""
    exercise = registry.get(job.exercise_id)
    import torch

    torch.set_num_threads(1)
    os.chdir(job.scratch)                             # its working, temporary and home directory
    os.environ.update(TMPDIR=job.scratch, HOME=job.scratch,
                      TRITON_CACHE_DIR=os.path.join(job.scratch, "triton"))
    tempfile.tempdir = job.scratch
    sys.dont_write_bytecode = True                    # importing the submission writes nothing
    module = exercise.cases()                         # torch, triton, the case data: before the guard
    if sandbox is None:                               # a fork: the answer is in its memory
        hidden, hidden_dirs, allowed, originals = close_library(exercise, job.path)
    else:                                             # the sandbox holds no answer to close
        with open(sandbox[0], "rb") as pipe:
            cases = receive_cases(pipe)
        hidden = frozenset()
        hidden_dirs = ()
        allowed = frozenset()
        originals = ()
        isolation.confine(sandbox[1])
    isolation.set_limits(None if job.device == "cuda" else job.memory_mb, job.cpu_s)
    if job.guards:
        guards.install(job.scratch, hidden, hidden_dirs, allowed, lambda what: channel.send(Refused(what)))
    channel.send(Ready(len(cases)))
    try:
        ns, files = load(job.path, namespace, exercise, originals)
    except LoadError as err:
        channel.send(Loaded(err.args[0]))
        return
    channel.send(Loaded())
    for i in range(job.start, len(cases)):
        t0 = time.perf_counter()
        observation = None
        error = None
        try:
            observation = module.run(ns, cases[i])
        except BaseException as exc:
            error = isolation.with_limit_hint(Outcome.of_exception(exc, files), exc)
        channel.send(CaseDone(i, time.perf_counter() - t0, observation, error, _corrupting(observation)))
    figures = None
    if job.bench and hasattr(module, "bench"):
        try:
            marks = {"mark": lambda index: channel.send(Mark(index))} if exercise.speed else {}  # speed.py
            figures = module.bench(ns, job.device, **marks)
        except BaseException as exc:
            figures = {"error": Outcome.of_exception(exc, files).message}
    channel.send(Done(figures))


def _corrupting(observation) -> bool:
    """Whether a case may have left this process's memory corrupt, so that the next case needs a fresh child:
    a kernel case whose observation names writes outside its tensors (cases/kernel_harness.py's
    `wild_writes`, under the observation key of that name)."""
    return isinstance(observation, dict) and bool(observation.get("wild_writes"))


def main(argv=None) -> None:
    """`python -m pagedkv_lib.judge.child JOB_JSON RESULT_FD CASES_FD UID` (inside bwrap); never returns."""
    try:
        job, result_fd, cases_fd, uid = argv or sys.argv[1:]
        for stream in (sys.stdout, sys.stderr):       # a print before a hang or a crash still arrives
            stream.reconfigure(line_buffering=True, errors="replace")
        serve(Job(**json.loads(job)), Channel(int(result_fd)), sandbox=(int(cases_fd), int(uid)))
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


# ----------------------------------------------------------------------------------------------------------
# the submission, loaded with the library's answers closed first: every library object the exercise grades or
# forbids is replaced, wherever pagedkv_lib holds it, by one that refuses to work, an imported `solutions`
# module is forgotten, and the guard keeps their files unread. A notebook's globals were made before: a graded
# name there may not be a library object, nor a class built on one.

class LoadError(Exception):
    """The submission cannot be graded at all; its one argument, an Outcome, says why."""


def close_library(exercise, graded_file: str | None = None):
    """Poison the library objects the exercise grades or forbids, forget `solutions`. Returns what
    the guard keeps closed, (files, directories, allowed files): the source and cached bytecode of the
    modules that hold those objects, and solutions/ except `graded_file`; and the objects themselves."""
    hidden = set()
    originals = []
    for target in (*exercise.oracle.values(), *exercise.forbidden):
        original = resolve(target)
        originals.append(original)
        poison = _poisoned(original, f"{target.replace(':', '.')} is the library's implementation (the "
                                     f"oracle of exercise {exercise.id}): write your own")
        for name, module in list(sys.modules.items()):        # the judge's own modules too (case data)
            if module is not None and name.startswith("pagedkv_lib"):
                for attr, value in list(vars(module).items()):
                    if value is original:
                        setattr(module, attr, poison)
        source = os.path.realpath(sys.modules[target.partition(":")[0]].__file__)
        cache = os.path.join(os.path.dirname(source), "__pycache__")
        stem = os.path.basename(source)[:-3] + "."
        hidden.add(source)
        if os.path.isdir(cache):
            hidden.update(os.path.join(cache, f) for f in os.listdir(cache) if f.startswith(stem))
    for name in [n for n in sys.modules if n == "solutions" or n.startswith("solutions.")]:
        del sys.modules[name]
    allowed = set()
    if graded_file:                                  # the graded file and its bytecode (read on import)
        real = os.path.realpath(graded_file)
        allowed = {real, importlib.util.cache_from_source(real)}
    return frozenset(hidden), (str(SOLUTIONS_DIR) + os.sep,), frozenset(allowed), tuple(originals)


def _poisoned(original, message: str) -> type:
    """What stands in for `original` (a function, a class, a Triton kernel): calling it, subclassing it or
    indexing it (kernel[grid]) raises ForbiddenCall(message)."""
    def refuse(*args, **kwargs):
        raise ForbiddenCall(message)

    return type(getattr(original, "__name__", "poisoned"), (), {"__doc__": message, "__new__": refuse,
                "__init_subclass__": refuse, "__class_getitem__": refuse})


def load(path: str | None, namespace: dict | None, exercise, originals=()):
    """(namespace, files) of the submission: a file's module globals, or a notebook's globals, where no
    graded name may be one of the library's `originals`."""
    if path is None:
        ns = dict(namespace)
        files = ()
        label = "the notebook"
    else:
        path = os.path.realpath(path)
        sys.path.insert(0, os.path.dirname(path))          # its own helper modules, if any
        spec = importlib.util.spec_from_file_location("submission", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["submission"] = module
        try:
            spec.loader.exec_module(module)
        except BaseException as exc:
            o = isolation.with_limit_hint(Outcome.of_exception(exc, (path,)), exc)
            raise LoadError(replace(o, message=f"while importing the file: {o.message}")) from None
        ns = dict(vars(module))
        files = (path,)
        label = os.path.basename(path)
    if not any(name in ns for name in exercise.oracle):
        names = ", ".join(exercise.oracle)
        raise LoadError(Outcome(NOT_IMPLEMENTED, f"{label} defines none of what exercise {exercise.id} "
                                f"grades ({names})", f"is it the file of exercise {exercise.id}? Its stub is "
                                f"practice/{exercise.filename}"))
    for name in exercise.oracle:
        if name not in ns:
            ns[name] = _missing(name)
        elif _from_library(ns[name], originals):
            raise LoadError(Outcome(RUNTIME_ERROR, f"`{name}` is the library's own (the oracle of exercise "
                                    f"{exercise.id}), not code of yours", "define the graded names yourself"))
    return ns, files


def _from_library(obj, originals) -> bool:
    """The object, what it wraps, or a class it is built on, is one of the library's closed objects."""
    try:
        found = [inspect.unwrap(obj), *(getattr(obj, "__mro__", ())[1:])]
        return any(any(o is x for x in originals) for o in [obj, *found])
    except Exception:                                # a hostile object that breaks inspection
        return True


def _missing(name: str):
    def missing(*args, **kwargs):
        raise NotImplementedError(f"`{name}` is not defined")
    return missing


if __name__ == "__main__":
    main()
