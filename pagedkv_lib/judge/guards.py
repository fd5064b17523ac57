"""The child's in-process guards: a Python audit hook, installed before the submission is imported, that
refuses what a graded function has no business doing. Under bubblewrap they are a second layer; without it
(macOS, containers without user namespaces, a notebook) they are the only one.

Refused, each with a `Refused` message to the parent (which makes it the verdict) and a PermissionError:
- opening a file for writing, deleting, renaming, linking or changing one, outside the scratch directory
  (the child's working directory, where TMPDIR and Triton's cache point);
- reading the reference solutions (but the graded file) or the oracle's source;
- starting a process (fork, exec, subprocess, spawn, system), signalling another process;
- loading or calling native code through ctypes;
- opening a socket.
What the judged code legitimately needs keeps working: torch's own threads and libraries; Triton compiling a
learner's kernel on a GPU (it runs the C compiler and ptxas, allowed when the call comes from Triton's own
code, and writes its cache into the scratch directory). Writing is never trusted: `torch.save` outside the
scratch directory is refused like any other write, and so is torch starting a compiler
(`torch.utils.cpp_extension`).

An audit hook cannot be removed (PEP 578), but it is Python: code that reaches native memory, or rewrites
the hook's closure through `gc`, gets past it. The operating-system layer (isolation.py) is the line.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_PATH_EVENTS = {  # event -> indexes of its path arguments, and what it does
    "os.remove": ((0,), "deleting"), "os.rmdir": ((0,), "deleting"), "shutil.rmtree": ((0,), "deleting"),
    "os.rename": ((0, 1), "renaming"), "os.link": ((0, 1), "linking"), "os.symlink": ((1,), "linking"),
    "os.mkdir": ((0,), "creating a directory"), "os.chmod": ((0,), "changing"),
    "os.chown": ((0,), "changing"),
    "os.truncate": ((0,), "truncating"), "os.utime": ((0,), "changing"), "os.chflags": ((0,), "changing"),
    "os.setxattr": ((0,), "changing"), "os.removexattr": ((0,), "changing"),
}
_PROCESS_EVENTS = ("os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.system",
                   "os.startfile", "subprocess.Popen", "pty.spawn")
_SIGNAL_EVENTS = ("os.kill", "os.killpg", "signal.pthread_kill")
_SOCKET_EVENTS = ("socket.__new__", "socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg")
_STDLIB = os.path.dirname(os.__file__)


@dataclass(frozen=True)
class Policy:
    scratch: str                                  # the only directory a submission may write into
    hidden: frozenset = frozenset()               # files (and __pycache__ dirs) that may not be opened at all
    hidden_prefixes: tuple = ()                   # directories whose files may not be opened ...
    allowed: frozenset = frozenset()              # ... except these (the graded file)
    spawners: tuple = field(default_factory=tuple)  # package dirs whose own calls may start their compilers
    native: tuple = field(default_factory=tuple)    # package dirs whose own calls may use ctypes


def package_dirs(*names: str) -> tuple:
    """The directories of the imported packages `names` (those not imported are left out)."""
    dirs = []
    for name in names:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            dirs.append(os.path.dirname(os.path.realpath(module.__file__)) + os.sep)
    return tuple(dirs)


def default_policy(scratch: str, hidden=frozenset(), hidden_prefixes=(), allowed=frozenset()) -> Policy:
    """Triton may start its compilers (the C launcher and ptxas, on a GPU) and Triton and torch may use
    ctypes for their own libraries. Nobody writes outside the scratch directory: not even torch (a
    `torch.save` to the status file is refused), and Triton's cache and temporary files live in scratch."""
    return Policy(scratch, frozenset(hidden), tuple(hidden_prefixes), frozenset(allowed),
                  spawners=package_dirs("triton"), native=package_dirs("triton", "torch"))


def install(policy: Policy, report) -> None:
    """Add the audit hook; `report(action)` tells the parent before the PermissionError is raised."""
    scratch = os.path.realpath(policy.scratch) + os.sep
    allowed = set(policy.allowed) | {cached for f in policy.allowed for cached in _bytecode_of(f)}
    realpath, fspath, getframe, getpid = os.path.realpath, os.fspath, sys._getframe, os.getpid

    def inside(path) -> bool:
        if isinstance(path, int):
            return True                           # an open descriptor: already granted
        real = realpath(fspath(path))
        return real + os.sep == scratch or real.startswith(scratch) or real == os.devnull

    def called_from(dirs) -> bool:
        """The first caller outside the standard library (and this file) is code in one of `dirs`."""
        frame = getframe(1)
        while frame is not None:
            name = frame.f_code.co_filename
            if not _in_stdlib(name) and name != __file__:
                return any(name.startswith(d) for d in dirs)
            frame = frame.f_back
        return False

    def refuse(action: str) -> None:
        report(action)
        raise PermissionError(f"refused by the judge: {action}")

    def hook(event: str, args) -> None:
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None))[:3]
            if isinstance(path, int):
                return
            name = realpath(fspath(path))
            if name in policy.hidden or (name.startswith(policy.hidden_prefixes) and name not in allowed):
                refuse(f"reading {name} (the reference solutions and the oracle's source are closed)")
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                (isinstance(flags, int) and flags & _WRITE_FLAGS)
            if writes and not inside(path):
                refuse(f"opening {name} for writing (a submission may write only in its scratch directory "
                       f"{scratch.rstrip(os.sep)})")
        elif event in _PATH_EVENTS:
            indexes, verb = _PATH_EVENTS[event]
            for i in indexes:
                if i < len(args) and isinstance(args[i], (str, bytes, os.PathLike)) and not inside(args[i]):
                    refuse(f"{verb} {realpath(fspath(args[i]))} (outside the scratch directory)")
        elif event in _PROCESS_EVENTS or event.startswith("os.exec") or event.startswith("os.spawn"):
            if not called_from(policy.spawners):
                refuse(f"starting a process ({event}{_first(args)})")
        elif event in _SIGNAL_EVENTS:
            if not (args and args[0] in (getpid(), 0)):
                refuse(f"sending a signal to process {args[0] if args else '?'}")
        elif event.startswith("ctypes."):
            if not called_from(policy.native):
                refuse(f"native code through ctypes ({event})")
        elif event in _SOCKET_EVENTS:
            refuse(f"a network socket ({event})")

    sys.addaudithook(hook)
    _close_side_doors(refuse, lambda: called_from(policy.spawners), inside)


def _bytecode_of(source: str) -> list[str]:
    """Where Python caches the bytecode of `source` (read on import, whether or not it exists yet)."""
    import importlib.util

    try:
        return [importlib.util.cache_from_source(source)]
    except (NotImplementedError, ValueError):
        return []


def _in_stdlib(filename: str) -> bool:
    return filename.startswith(_STDLIB) and "-packages" not in filename


def _first(args) -> str:
    try:
        return f": {str(args[0])[:80]}" if args else ""
    except Exception:
        return ""


def _close_side_doors(refuse, called_by_trusted, inside) -> None:
    """Doors that raise no audit event of their own, wrapped: `_posixsubprocess.fork_exec` starts a process
    (subprocess raises its event before calling it), refused unless trusted code calls it; torch's C++ file
    writer (`torch.save` to a path) opens the file in C, refused outside the scratch directory."""
    try:
        import _posixsubprocess
    except ImportError:
        _posixsubprocess = None
    if _posixsubprocess is not None:
        original = _posixsubprocess.fork_exec

        def fork_exec(*args, **kwargs):
            if not called_by_trusted():
                refuse("starting a process (_posixsubprocess.fork_exec)")
            return original(*args, **kwargs)

        _posixsubprocess.fork_exec = fork_exec
    torch_c = getattr(sys.modules.get("torch"), "_C", None)
    writer = getattr(torch_c, "PyTorchFileWriter", None)
    if writer is not None:
        def file_writer(target, *args, **kwargs):
            if isinstance(target, (str, bytes, os.PathLike)) and not inside(target):
                refuse(f"opening {os.path.realpath(os.fspath(target))} for writing (torch.save; a submission "
                       "may write only in its scratch directory)")
            return writer(target, *args, **kwargs)

        torch_c.PyTorchFileWriter = file_writer
