"""Where a graded child runs and what bounds it: the operating system's tools, not the judge's.

- bwrap (bubblewrap): a graded file, where this machine can sandbox. The child sees a file tree made for it
  (`mounts`, printed by `python -m pagedkv_lib.judge.isolation ID`): the system's programs and libraries,
  Python and its site-packages (not the repository, nor what an install of the course put there:
  `installed_copies`, masked), the harness (judge/harness.py: the library without what
  the exercise grades), the one submission, a scratch tmpfs; /proc and a minimal /dev; all read-only but the
  scratch and /dev/shm, both size-limited tmpfs that vanish with the sandbox. No network, its own PID, IPC
  and UTS namespaces (the kernel ends all it started), an environment of a few variables, dying with the
  judge. A seccomp filter makes memfd_create fail (memory written but never mapped escapes RLIMIT_AS), on
  x86_64 (with its i386 and x32 system calls) and aarch64 (with arm); elsewhere there is no filter. Run as
  root, it has no user namespace and the child drops to a uid of its own (`sandbox_uid`) before the
  submission is loaded, so that RLIMIT_NPROC binds; run as a user, bwrap's user namespace counts the
  processes of the sandbox alone. PAGEDKV_JUDGE_BWRAP=0 turns it off.
- fork: a notebook's code, and files where bwrap is missing: a fork in its own session and process group,
  ended with killpg. Not a sandbox: it can read and write what the user can. A process that leaves its
  group (a double fork into a session of its own) is caught all the same: while forks run, the judge is a
  child subreaper (Linux's PR_SET_CHILD_SUBREAPER, as tini and systemd use it), so an orphan becomes the
  judge's child, not init's, and `end_orphans` kills and reaps every child the judge did not start before
  a forked child is reaped (`Orphans`). Its scratch directory is removed by a small watcher process when
  the judge ends, even by SIGKILL (`scratch_dir`).
Either way the child sets its resource limits (`set_limits`: CPU seconds, address space, file size, open
files, no core) before the submission is imported.
"""
from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import os
import platform
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BWRAP = "bwrap"
FORK = "fork"
DESCRIBE = {BWRAP: "bwrap sandbox (its own file tree without the answer, no network, own PID namespace, "
                   "kernel limits)",
            FORK: "forked child in its own process group (not a sandbox)"}
OPEN_FILES = 1024                   # descriptors a child may hold (torch and Triton need a few hundred)
FILE_BYTES = 64 * 2**20             # RLIMIT_FSIZE: the largest file a child may write
SCRATCH = "/scratch"                # in the sandbox: its working directory, HOME and TMPDIR
SCRATCH_BYTES = 256 * 2**20         # the scratch tmpfs
SHM_BYTES = 64 * 2**20              # the /dev/shm tmpfs
HARNESS = "/judge/lib"              # in the sandbox: the library files the exercise may use (its PYTHONPATH)
INSTALLED = ("pagedkv_lib", "pagedkv_course[-.]*", "pagedkv-course*", "__editable__*pagedkv_course*",
             "__pycache__/__editable__*pagedkv_course*")   # an install's entries in site-packages
TASKS_ALLOWANCE = 16                # RLIMIT_NPROC: threads and processes beyond those the child holds at load
UID_BASE = 2_000_000                # a sandboxed child of a root judge runs as UID_BASE + a number of its own
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
ORPHANS_END_S = 5.0                 # how long ending the orphans may take (each kill is waited for)
WATCHER_END_S = 10.0                # a scratch watcher's last removals (at most 50 tries 0.1 s apart)
_NAMESPACES = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
_ROOT_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_CHOWN")   # a root judge's child keeps these to drop its uid
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime")
_CHILDREN = itertools.count()       # numbers this judge's sandboxed children by start (their uids differ)

# seccomp: `struct seccomp_data` starts with nr (u32) and arch (u32); classic BPF as the kernel reads it
_AUDIT_ARCH = {"x86_64": ((0xC000003E, 319, True), (0x40000003, 356, False)),   # arch, memfd_create, x32?
               "aarch64": ((0xC00000B7, 279, False), (0x40000028, 385, False))}
_LD_W_ABS = 0x20                    # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15                       # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35                       # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06                       # BPF_RET | BPF_K
_RET_ALLOW = 0x7FFF0000             # SECCOMP_RET_ALLOW
_RET_EPERM = 0x00050000 | 1         # SECCOMP_RET_ERRNO | EPERM
_X32_BIT = 0x40000000


def _start() -> list:
    """Every sandbox's first arguments: namespaces, its own session, death with the judge."""
    argv = ["--die-with-parent", "--new-session", *_NAMESPACES]
    if os.geteuid() != 0:
        return argv + ["--unshare-user"]
    return argv + ["--cap-drop", "ALL", *itertools.chain(*(("--cap-add", c) for c in _ROOT_CAPS))]


def _system() -> list:
    """The system's programs and libraries, read-only (a merged /usr's /bin, /lib ... as symlinks)."""
    mounts = []
    for path in _SYSTEM:
        if os.path.islink(path):
            mounts.append(("--symlink", os.readlink(path), path))
        elif os.path.isdir(path):
            mounts.append(("--ro-bind", path, path))
    return mounts + [("--ro-bind", f"/etc/{n}", f"/etc/{n}") for n in _ETC if os.path.lexists(f"/etc/{n}")]


@functools.cache
def bwrap_path() -> str | None:
    """The `bwrap` executable if it can build a sandbox on this machine, or None."""
    if os.environ.get("PAGEDKV_JUDGE_BWRAP", "1") == "0" or not sys.platform.startswith("linux"):
        return None
    exe = shutil.which("bwrap")
    true = shutil.which("true")
    if exe is None or true is None:
        return None
    try:
        probe = subprocess.run([exe, *_start(), *itertools.chain(*_system()), "--proc", "/proc", true],
                               capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return exe if probe.returncode == 0 else None


class SandboxMissing(RuntimeError):
    """The bwrap sandbox was asked for, and this machine cannot build one."""


def choose(asked: str | None) -> str:
    """The isolation of a graded file: `asked` (BWRAP or FORK), or for None the strongest this machine has.
    SandboxMissing when BWRAP is asked for and `bwrap_path` finds none."""
    if asked not in (None, BWRAP, FORK):
        raise ValueError(f"isolation: expected None, {BWRAP!r} or {FORK!r}, got {asked!r}")
    if asked == FORK:
        return FORK
    if bwrap_path() is not None:
        return BWRAP
    if asked == BWRAP:
        raise SandboxMissing("the bwrap sandbox was asked for, but `bwrap` is missing or cannot sandbox "
                             "here: install bubblewrap (apt install bubblewrap)")
    return FORK


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def site_dirs() -> list:
    """The site-packages (or dist-packages) folders on sys.path."""
    return [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")]


def python_dirs(repository: str) -> list:
    """Python's own folders (sys.base_prefix, the venv's sys.prefix) and the site-packages on sys.path,
    none that is the repository or holds it, and none inside it but a venv there."""
    found = [sys.base_prefix, sys.prefix, *site_dirs()]
    dirs = []
    for d in sorted({os.path.abspath(p) for p in found if os.path.isdir(p)}, key=len):
        inside = _within(d, repository) and not _within(d, os.path.abspath(sys.prefix))
        if not (_within(repository, d) or inside or any(_within(d, kept) for kept in dirs)):
            dirs.append(d)
    return dirs


def installed_copies() -> list:
    """What an install of the course left in site-packages: `pip install .` copies all of pagedkv_lib (the
    oracle included) there, with its dist-info; `pip install -e .` a .pth and a finder that name the
    repository. The sandbox binds site-packages whole, so `mounts` masks each of these."""
    found = set()
    for folder in site_dirs():
        for pattern in INSTALLED:
            found.update(str(p) for p in Path(folder).glob(pattern))
    return sorted(found)


def _masked(path: str) -> list:
    """Mounts that show `path` empty and read-only: a folder as an empty tmpfs, a file as no bytes."""
    if os.path.isdir(path):
        return [("--size", "4096", "--tmpfs", path), ("--remount-ro", path)]
    return [("--ro-bind-data", "", path)]


def mounts(exercise_id: int, submission: str | None, device: str = "cpu") -> list:
    """The sandbox's file tree for exercise `exercise_id`, in order: (bwrap option, *its arguments), where a
    harness file cut down by harness.reduced_source is ("--ro-bind-data", its text, where) and the
    submission ("--ro-bind-data", its path, where): a copy, read-only to the child whatever its mode."""
    from . import harness, registry

    tree = [*_system(), *(("--ro-bind", d, d) for d in python_dirs(str(registry.ROOT)))]
    for path in installed_copies():                   # no copy of the library but the harness
        tree += _masked(path)
    for rel, source, text in harness.harness_files(exercise_id):
        where = f"{HARNESS}/{rel}"
        tree.append(("--ro-bind", source, where) if text is None else ("--ro-bind-data", text, where))
    if submission is not None:
        tree.append(("--ro-bind-data", Path(submission), os.path.realpath(submission)))
    made = {str(p) for _, *args in tree for p in Path(args[-1]).parents if str(p) != "/"}
    tree[:0] = [("--perms", "0755", "--dir", d) for d in sorted(made)]     # (bwrap's own would be 0700)
    tree += [("--proc", "/proc"), ("--dev", "/dev")]
    if device == "cuda":                              # the GPU's device nodes; /sys, where CUDA finds them
        tree += [("--dev-bind", str(n), str(n)) for n in [*sorted(Path("/dev").glob("nvidia*")),
                                                          Path("/dev/dri")] if n.exists()]
        tree.append(("--ro-bind", "/sys", "/sys"))
    tree += [("--perms", "1777", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"),
             ("--size", str(SCRATCH_BYTES), "--tmpfs", SCRATCH),
             ("--chdir", SCRATCH), ("--remount-ro", "/dev"), ("--remount-ro", "/")]
    return tree


def environment(device: str) -> dict:
    """All the child's environment: the sandbox's paths, Python's switches, Triton's mode, one OpenMP thread,
    and on a GPU CUDA's own variables."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": SCRATCH, "TMPDIR": SCRATCH, "LANG": "C.UTF-8",
           "PYTHONPATH": HARNESS, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
           "TRITON_INTERPRET": "1" if device == "cpu" else "0", "TRITON_CACHE_DIR": f"{SCRATCH}/triton",
           "OMP_NUM_THREADS": "1"}
    if device == "cuda":
        env.update({k: v for k, v in os.environ.items() if k.startswith(("CUDA_", "NVIDIA_"))
                    or k == "LD_LIBRARY_PATH"})
    return env


def seccomp_filter() -> bytes | None:
    """A classic BPF program for seccomp: memfd_create fails with EPERM (and on x86_64 every x32 system
    call), everything else is allowed; None on a machine whose system call numbers it does not know."""
    arches = _AUDIT_ARCH.get(platform.machine())
    if arches is None:
        return None
    code = [(_LD_W_ABS, 0, 0, 4)]                                        # A = seccomp_data.arch
    for arch, memfd, x32 in arches:
        block = [(_LD_W_ABS, 0, 0, 0)]                                   # A = seccomp_data.nr
        if x32:
            block.append((_JGE_K, 0, 1, _X32_BIT))                       # an x32 call: refused
            block.append((_RET_K, 0, 0, _RET_EPERM))
        block += [(_JEQ_K, 0, 1, memfd), (_RET_K, 0, 0, _RET_EPERM), (_RET_K, 0, 0, _RET_ALLOW)]
        code.append((_JEQ_K, 0, len(block), arch))                       # not this arch: skip its block
        code += block
    code.append((_RET_K, 0, 0, _RET_ALLOW))
    return b"".join(struct.pack("=HBBI", *op) for op in code)


def _readable(data: bytes) -> int:
    """A descriptor that reads `data` from its start, for bwrap to copy (a memfd: nothing on disk)."""
    fd = os.memfd_create("pagedkv-judge")
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def bwrap_argv(tree, device: str) -> tuple:
    """(bwrap's arguments up to `--`, the descriptors they name, which the child must inherit and the
    judge close once it started)."""
    argv = [bwrap_path(), *_start(), "--clearenv"]
    fds = []
    for key, value in environment(device).items():
        argv += ["--setenv", key, value]
    for option, *args in tree:
        if option != "--ro-bind-data":
            argv += [option, *args]
            continue
        source, where = args
        try:                                          # the submission, whatever its mode: a copy
            data = source.read_bytes() if isinstance(source, Path) else source.encode()
        except OSError:                               # unreadable: the child's import says why
            argv += ["--ro-bind", str(source), where]
            continue
        fds.append(_readable(data))
        argv += ["--perms", "0444", "--ro-bind-data", str(fds[-1]), where]
    program = seccomp_filter()
    if program is not None:
        fds.append(_readable(program))
        argv += ["--seccomp", str(fds[-1])]
    return argv + ["--"], fds


def sandbox_uid() -> int:
    """The uid of the next sandboxed child of a root judge: distinct from every concurrent child's (the
    judge's pid and a count of its children), so that no two sandboxes share an RLIMIT_NPROC count."""
    return UID_BASE + (os.getpid() % 2**16) * 2**8 + next(_CHILDREN) % 2**8


def set_limits(memory_mb: int | None, cpu_s: int) -> None:
    """No core files, at most `cpu_s` CPU seconds (then SIGXCPU), OPEN_FILES descriptors, files of at most
    FILE_BYTES (SIGXFSZ ignored: a longer write fails with OSError EFBIG), and `memory_mb` of address space
    above what the child holds now, set in the child once torch and the cases are imported."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_BYTES, FILE_BYTES))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    cap = OPEN_FILES if hard == resource.RLIM_INFINITY else min(OPEN_FILES, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, cap), cap))
    if memory_mb is not None:
        with open("/proc/self/statm") as f:
            held = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        limit = held + memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def with_limit_hint(outcome, exc: BaseException):
    """`outcome` (of `exc`), with a hint that names the limit when one of the kernel's refused: a file past
    FILE_BYTES, a full scratch or /dev/shm, a thread or process past RLIMIT_NPROC."""
    if outcome.hint:
        return outcome
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        outcome.hint = f"a file may hold at most {FILE_BYTES // 2**20} MiB"
    elif isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        outcome.hint = (f"the scratch directory holds at most {SCRATCH_BYTES // 2**20} MiB and /dev/shm "
                        f"{SHM_BYTES // 2**20} MiB: compute in memory, write little")
    elif (isinstance(exc, OSError) and exc.errno == errno.EAGAIN) or "can't start new thread" in str(exc):
        outcome.hint = f"a submission may start at most {TASKS_ALLOWANCE} threads and processes"
    return outcome


def confine(uid: int) -> None:
    """In the sandbox, before the submission is loaded: a root child hands the scratch to `uid` and becomes
    it (no capability left); then at most TASKS_ALLOWANCE more threads and processes than it runs now."""
    if os.getuid() == 0:
        for folder, dirs, files in os.walk(SCRATCH):
            for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
                os.lchown(name, uid, uid)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    tasks = len(os.listdir("/proc/self/task")) + TASKS_ALLOWANCE
    resource.setrlimit(resource.RLIMIT_NPROC, (tasks, tasks))


def scratch_dir() -> tuple:
    """(a new scratch directory for a forked child, its watcher): a small process that removes the directory
    once the judge closes the watcher's stdin or dies, SIGKILL included (the pipe's end is its signal)."""
    path = tempfile.mkdtemp(prefix=f"pagedkv-judge-{os.getpid()}-")
    watch = ("import os, shutil, sys, time\n"
             "sys.stdin.buffer.read()\n"                 # until the judge closes it, or dies
             "for _ in range(50):\n"                     # a dying child may still write: until it is gone
             "    shutil.rmtree(sys.argv[1], ignore_errors=True)\n"
             "    if not os.path.exists(sys.argv[1]):\n"
             "        break\n"
             "    time.sleep(0.1)\n")
    watcher = subprocess.Popen([sys.executable, "-I", "-S", "-c", watch, path], stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    ORPHANS.started.add(watcher.pid)
    return path, watcher


def release(path: str, watcher) -> None:
    """Remove a forked child's scratch directory, and end its watcher."""
    shutil.rmtree(path, ignore_errors=True)
    watcher.stdin.close()
    try:
        watcher.wait(timeout=WATCHER_END_S)
    except subprocess.TimeoutExpired:                 # it could not remove the folder: end it
        watcher.kill()
        watcher.wait(timeout=WATCHER_END_S)
    ORPHANS.started.discard(watcher.pid)


def die_with_parent() -> None:
    """A forked child is killed when the judge dies (Linux's parent-death signal; elsewhere nothing)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _prctl(option: int, value) -> bool:
    """Linux's prctl(option, value); False where it failed or there is none (macOS)."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def proc_stat(pid: int) -> list | None:
    """The fields of /proc/PID/stat after the command name (state first), or None if it has gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def children_listed(pid: int) -> set:
    """`pid`'s children from /proc/PID/task/*/children (a kernel with CONFIG_PROC_CHILDREN)."""
    found = set()
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found |= {int(n) for n in f.read().split()}
    except OSError:                                   # it has gone, or a thread has
        pass
    return found


def parent_ids() -> dict:
    """{pid: parent pid} of every process, from one pass over /proc ({} without /proc)."""
    found = {}
    if not os.path.isdir("/proc/self"):
        return found
    for entry in filter(str.isdigit, os.listdir("/proc")):
        fields = proc_stat(int(entry))
        if fields is not None:
            found[int(entry)] = int(fields[1])
    return found


def children_by_parent(parents: dict, pid: int) -> set:
    return {child for child, parent in parents.items() if parent == pid}


def has_children_files() -> bool:
    return os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def children(pid: int) -> set:
    """The pids of `pid`'s children (from the kernel's list, else every process's parent id)."""
    if has_children_files():
        return children_listed(pid)
    return children_by_parent(parent_ids(), pid)


class Orphans:
    """The judge as a child subreaper while forked children run: a process that a fork moved out of its
    group (a double fork, setsid) and whose parent ended becomes the judge's child, and `end_orphans` ends
    it. `adopt` / `disown` count the forks running; the judge's own children (forks, watchers, sandboxes)
    are registered as `started`, so that no other child of the judge is taken for an orphan; children the
    process had before it first adopted (a notebook kernel's own) are left alone."""

    def __init__(self):
        self.users = 0
        self.started = set()                          # pids the judge started and has not reaped
        self.before = set()                           # the process's children before it adopted
        self.was = False                              # it was a subreaper already (then it stays one)

    def adopt(self) -> None:
        if self.users == 0:
            self.before = children(os.getpid()) - self.started
            self.was = _subreaper()
            _prctl(PR_SET_CHILD_SUBREAPER, 1)
        self.users += 1

    def disown(self) -> None:
        self.users -= 1
        if self.users == 0 and not self.was:
            _prctl(PR_SET_CHILD_SUBREAPER, 0)

    def strays(self) -> set:
        return children(os.getpid()) - self.started - self.before

    def end(self) -> list:
        """Kill and reap every stray child (and its process group), until none is left (what a killed one
        started comes to the judge in turn) or ORPHANS_END_S passed; the pids ended."""
        ended = []
        deadline = time.monotonic() + ORPHANS_END_S
        strays = self.strays()
        while strays and time.monotonic() < deadline:
            for pid in strays:                        # unreaped children of ours: their pids are not reused
                fields = proc_stat(pid)
                if fields is not None and int(fields[3]) not in (0, os.getpgrp()):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(int(fields[3]), signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            for pid in strays:
                if _reaped(pid, deadline):
                    ended.append(pid)
            strays = self.strays()
        return ended


def _subreaper() -> bool:
    """Whether this process is a child subreaper now."""
    try:
        import ctypes

        flag = ctypes.c_int(0)
        ctypes.CDLL(None, use_errno=True).prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0)
        return bool(flag.value)
    except (OSError, AttributeError):
        return False


def _reaped(pid: int, deadline: float) -> bool:
    """Wait for child `pid` (killed) until `deadline`, looking again every few milliseconds."""
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:                     # reaped elsewhere, or not ours after all
            return True
        if done == pid:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)


ORPHANS = Orphans()


def end_orphans() -> list:
    """Kill and reap every process the judge adopted as a subreaper (see Orphans); the pids ended."""
    return ORPHANS.end()


def kill(pid: int) -> None:
    """SIGKILL the child's process group (under bwrap: the sandbox, and with it its PID namespace)."""
    for send in (os.killpg, os.kill):
        try:
            send(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def main(argv=None) -> None:
    """`python -m pagedkv_lib.judge.isolation ID [--device cuda]`: the sandbox's file tree for exercise ID,
    one mount a line, and its environment."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__.split("\n")[0])
    parser.add_argument("exercise", type=int)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    args = parser.parse_args(argv)
    for option, *rest in mounts(args.exercise, "SUBMISSION.py", args.device):
        if option == "--ro-bind-data":
            rest[0] = "(the submission's bytes)" if isinstance(rest[0], Path) else "(cut down: harness.py)"
        print(option.lstrip("-"), *rest)
    print("environment:", " ".join(f"{k}={v}" for k, v in environment(args.device).items()))
    print("seccomp:", "memfd_create refused" if seccomp_filter() else f"no filter on {platform.machine()}")


if __name__ == "__main__":
    main()
