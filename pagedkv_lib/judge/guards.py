"""The child's in-process guard: a Python audit hook (PEP 578), installed before the submission is imported.
It refuses what a graded function has no business doing and reports each refusal to the parent, which makes
it the verdict (a submission that catches the PermissionError still does not pass): writing, deleting,
renaming or changing files outside the scratch directory; reading the solutions or the oracle's source;
starting processes (Triton's compilers excepted); signalling others; ctypes (torch's and Triton's own
excepted); sockets; torch.save outside scratch. Under bwrap it makes an attempt the verdict; without, it is
the only line. It is Python: native code gets past it.
"""
from __future__ import annotations

import os
import sys

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_PATH_EVENTS = {  # event -> indexes of its path arguments, and what it does
    "os.remove": ((0,), "deleting"), "os.rmdir": ((0,), "deleting"), "shutil.rmtree": ((0,), "deleting"),
    "os.rename": ((0, 1), "renaming"), "os.link": ((0, 1), "linking"), "os.symlink": ((1,), "linking"),
    "os.mkdir": ((0,), "creating a directory"), "os.truncate": ((0,), "truncating"),
    **{e: ((0,), "changing") for e in ("os.chmod", "os.chown", "os.utime", "os.chflags", "os.setxattr",
                                       "os.removexattr")},
}
_PROCESS_EVENTS = ("os.fork", "os.forkpty", "os.posix_spawn", "os.system", "os.startfile", "subprocess.Popen",
                   "pty.spawn")
_SIGNAL_EVENTS = ("os.kill", "os.killpg", "signal.pthread_kill")
_SOCKET_EVENTS = ("socket.__new__", "socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg")
_STDLIB = os.path.dirname(os.__file__)


def package_dirs(*names: str) -> tuple:
    """The directories of the imported packages `names` (those not imported are left out)."""
    mods = [sys.modules.get(n) for n in names]
    return tuple(os.path.dirname(os.path.realpath(m.__file__)) + os.sep for m in mods
                 if m is not None and getattr(m, "__file__", None))


def install(scratch: str, hidden: frozenset, hidden_dirs: tuple, allowed: frozenset, report) -> None:
    """Add the audit hook; `report(action)` tells the parent before the PermissionError is raised. `hidden`
    files and those under `hidden_dirs` may not be opened, except the `allowed` ones (the graded file)."""
    scratch = os.path.realpath(scratch) + os.sep
    spawners = package_dirs("triton")                 # may start processes (its compilers)
    native = package_dirs("triton", "torch")          # may load native code through ctypes
    realpath = os.path.realpath                       # the hook keeps its own references: a submission
    fspath = os.fspath                                # that patches os or sys does not change them
    getframe = sys._getframe
    getpid = os.getpid

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
            if not (name.startswith(_STDLIB) and "-packages" not in name) and name != __file__:
                return name.startswith(dirs)
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
            if name in hidden or (name.startswith(hidden_dirs) and name not in allowed):
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
        elif event in _PROCESS_EVENTS or event.startswith(("os.exec", "os.spawn")):
            if not called_from(spawners):
                refuse(f"starting a process ({event})")
        elif event in _SIGNAL_EVENTS:
            if not (args and args[0] in (getpid(), 0)):
                refuse(f"sending a signal to process {args[0] if args else '?'}")
        elif event.startswith("ctypes."):
            if not called_from(native):
                refuse(f"native code through ctypes ({event})")
        elif event in _SOCKET_EVENTS:
            refuse(f"a network socket ({event})")

    sys.addaudithook(hook)
    _close_side_doors(refuse, lambda: called_from(spawners), inside)


def _close_side_doors(refuse, trusted, inside) -> None:
    """Two doors without an audit event of their own: `_posixsubprocess.fork_exec` starts a process (refused
    unless Triton calls it), and torch.save to a path opens the file in C++ (refused outside scratch)."""
    import _posixsubprocess

    fork_exec = _posixsubprocess.fork_exec

    def guarded_fork_exec(*args, **kwargs):
        if not trusted():
            refuse("starting a process (_posixsubprocess.fork_exec)")
        return fork_exec(*args, **kwargs)

    _posixsubprocess.fork_exec = guarded_fork_exec
    torch_c = getattr(sys.modules.get("torch"), "_C", None)
    writer = getattr(torch_c, "PyTorchFileWriter", None)
    if writer is None:
        return

    def file_writer(target, *args, **kwargs):
        if isinstance(target, (str, bytes, os.PathLike)) and not inside(target):
            refuse(f"opening {os.path.realpath(os.fspath(target))} for writing (torch.save; a submission may "
                   "write only in its scratch directory)")
        return writer(target, *args, **kwargs)

    torch_c.PyTorchFileWriter = file_writer
