"""The operating-system layer of the judge's isolation: where a child runs, and how everything it starts ends.

Each mechanism is used where this machine has it, and the report says which graded a submission:
- bubblewrap (`bwrap`, Debian's `bubblewrap`, the sandbox Flatpak uses): a graded FILE runs in a sandbox with
  a read-only view of the file system (only its scratch directory writable), no network, and its own PID
  namespace: when the child ends, the kernel kills every process it started. It is
  probed once; PAGEDKV_JUDGE_BWRAP=0 turns it off. Code defined in a notebook cannot be sent to a fresh
  process, so a notebook's grading always forks.
- a cgroup (v1 `pids`, or v2 with the pids controller, where this user may create one): `pids.max` bounds
  the processes a submission can have, and every process in the cgroup is killed when its verdict is given.
- otherwise RLIMIT_NPROC bounds the processes (the kernel does not enforce it for root), and the judge is a
  child subreaper (Linux `PR_SET_CHILD_SUBREAPER`): a process that leaves the child's session is re-parented
  to the judge when its parent dies, and killed.
What stays out of reach without bwrap: code that reaches native memory gets past the in-process guards
(guards.py), and a process that escapes before its parent is killed runs until the sweep.
"""
from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

MAX_PROCESSES = 256                 # processes one submission may have at once (its own included)
_CGROUP_ROOTS = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup"))
PR_SET_CHILD_SUBREAPER = 36


# ----------------------------------------------------------------------------------------------------------
# bubblewrap

@functools.cache
def bwrap_path() -> str | None:
    """The `bwrap` executable if it can build a sandbox on this machine (user namespaces allowed), or None."""
    if os.environ.get("PAGEDKV_JUDGE_BWRAP", "1") == "0" or not sys.platform.startswith("linux"):
        return None
    exe = shutil.which("bwrap")
    if exe is None:
        return None
    try:
        probe = subprocess.run([exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                                "--unshare-all", "--die-with-parent", "--new-session", "true"],
                               capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return exe if probe.returncode == 0 else None


def bwrap_argv(scratch: str, device: str) -> list[str]:
    """bwrap's arguments: the whole file system read-only (/tmp included: the judge's Python may live there),
    fresh /dev and /proc, `scratch` writable and the working directory (TMPDIR points into it), every
    namespace unshared (no network), dying with the judge; on a GPU the NVIDIA device nodes are bound in."""
    argv = [bwrap_path(), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--bind", scratch, scratch,
            "--chdir", scratch, "--unshare-all", "--die-with-parent", "--new-session"]
    if device == "cuda":
        for node in sorted(Path("/dev").glob("nvidia*")):
            argv += ["--dev-bind", str(node), str(node)]
        if Path("/dev/dri").exists():
            argv += ["--dev-bind", "/dev/dri", "/dev/dri"]
    return argv + ["--"]


# ----------------------------------------------------------------------------------------------------------
# bounding and ending a child's processes

class Containment:
    """One child's processes: a cgroup where possible, else RLIMIT_NPROC and the session/subreaper sweep."""

    def __init__(self, cgroup: Path | None):
        self.cgroup = cgroup

    @classmethod
    def create(cls, max_processes: int = MAX_PROCESSES) -> Containment:
        """A fresh cgroup if this user may make one (PAGEDKV_JUDGE_CGROUP=0 says not to try)."""
        if os.environ.get("PAGEDKV_JUDGE_CGROUP", "1") == "0":
            return cls(None)
        for root in _CGROUP_ROOTS:
            if not (root / "cgroup.procs").exists():
                continue
            if root.name != "pids" and "pids" not in _read(root / "cgroup.controllers"):
                continue
            path = root / "pagedkv-judge" / uuid.uuid4().hex[:12]
            try:
                path.mkdir(parents=True)
                (path / "pids.max").write_text(str(max_processes))
                return cls(path)
            except OSError:
                _rmdir(path)
        return cls(None)

    def describe(self) -> str:
        if self.cgroup is not None:
            return f"cgroup pids.max {MAX_PROCESSES}"
        return f"RLIMIT_NPROC +{MAX_PROCESSES}, subreaper sweep"

    def enter(self) -> None:
        """In the child (or just before exec): join the cgroup, or cap the user's process count."""
        if self.cgroup is not None:
            try:
                (self.cgroup / "cgroup.procs").write_text(str(os.getpid()))
                return
            except OSError:
                pass
        try:
            import resource

            limit = _user_processes() + MAX_PROCESSES
            resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
        except (ImportError, ValueError, OSError):
            pass

    def kill_all(self) -> None:
        """Kill every process of the cgroup (until none is left: a fork loop is bounded by pids.max)."""
        if self.cgroup is None:
            return
        kill_file = self.cgroup / "cgroup.kill"
        if kill_file.exists():
            try:
                kill_file.write_text("1")
            except OSError:
                pass
        for _ in range(200):
            pids = [int(p) for p in _read(self.cgroup / "cgroup.procs").split()]
            if not pids:
                return
            for pid in pids:
                _kill(pid)
            time.sleep(0.005)

    def close(self) -> None:
        if self.cgroup is not None:
            self.kill_all()
            for _ in range(100):
                if _rmdir(self.cgroup):
                    break
                time.sleep(0.01)


class Reaper:
    """The judge as a child subreaper while it grades (Linux): orphans of a child come back to the judge,
    which kills them in `sweep`. Children the judge had before (a notebook's own) are left alone."""

    def __init__(self):
        self.enabled = False
        self.before: set[int] = set()

    def __enter__(self) -> Reaper:
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                self.enabled = ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
            except (OSError, AttributeError):
                self.enabled = False
        self.before = set(children_of(os.getpid()))
        return self

    def sweep(self, keep=()) -> int:
        """Kill the judge's children that are neither older than the grading nor in `keep`; reap them."""
        killed = 0
        for _ in range(50):
            extra = [p for p in children_of(os.getpid()) if p not in self.before and p not in keep]
            if not extra:
                break
            for pid in extra:
                _kill(pid)
                killed += 1
            for pid in extra:
                _reap(pid)
        return killed

    def __exit__(self, *exc) -> None:
        self.sweep()
        if self.enabled:
            import ctypes

            ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def kill_session(sid: int) -> None:
    """Kill every process whose session is `sid` (the child called setsid: its descendants keep it)."""
    for pid in _all_pids():
        try:
            if os.getsid(pid) == sid:
                _kill(pid)
        except OSError:
            pass


def children_of(pid: int) -> list[int]:
    """Live processes whose parent is `pid` (from /proc; empty where there is no /proc)."""
    found = []
    for child in _all_pids():
        try:
            fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(child)
    return found


def _all_pids() -> list[int]:
    try:
        return [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []


def _user_processes() -> int:
    uid, count = os.getuid(), 0
    for pid in _all_pids():
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                count += 1
        except OSError:
            pass
    return count


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def _reap(pid: int) -> None:
    for _ in range(100):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done:
            return
        time.sleep(0.005)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _rmdir(path: Path) -> bool:
    try:
        path.rmdir()
        return True
    except OSError:
        return False
