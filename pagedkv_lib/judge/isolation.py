"""Where a graded child runs and what bounds it: the operating system's tools, not the judge's.

- bwrap (bubblewrap): a graded file, where this machine can sandbox: everything read-only but the child's
  scratch directory, no network, its own PID namespace (the kernel ends all it started), dying with the judge.
  PAGEDKV_JUDGE_BWRAP=0 turns it off.
- fork: a notebook's code, and files where bwrap is missing: a fork in its own session and process group,
  ended with killpg. Not a sandbox: it can write what the user can, and what leaves its group outlives it.
Either way the child sets its resource limits (`set_limits`) before the submission is imported.
"""
from __future__ import annotations

import functools
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

BWRAP, FORK = "bwrap", "fork"
DESCRIBE = {BWRAP: "bwrap sandbox (read-only files, no network, own PID namespace)",
            FORK: "forked child in its own process group (not a sandbox)"}
OPEN_FILES = 1024                   # descriptors a child may hold (torch and Triton need a few hundred)
PR_SET_PDEATHSIG = 1
_BWRAP = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--die-with-parent",
          "--new-session"]                  # every sandbox's start (the probe's too)


@functools.cache
def bwrap_path() -> str | None:
    """The `bwrap` executable if it can build a sandbox on this machine (user namespaces allowed), or None."""
    if os.environ.get("PAGEDKV_JUDGE_BWRAP", "1") == "0" or not sys.platform.startswith("linux"):
        return None
    exe = shutil.which("bwrap")
    if exe is None:
        return None
    try:
        probe = subprocess.run([exe, *_BWRAP, "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return exe if probe.returncode == 0 else None


def bwrap_argv(scratch: str, device: str) -> list[str]:
    """bwrap's arguments, up to `--`: everything read-only (/tmp too: the judge's Python may live there),
    `scratch` writable and the working directory; on a GPU the NVIDIA device nodes are bound in."""
    argv = [bwrap_path(), *_BWRAP, "--bind", scratch, scratch, "--chdir", scratch]
    if device == "cuda":
        for node in [*sorted(Path("/dev").glob("nvidia*")), Path("/dev/dri")]:
            if node.exists():
                argv += ["--dev-bind", str(node), str(node)]
    return argv + ["--"]


def set_limits(memory_mb: int | None, cpu_s: int) -> None:
    """No core files, at most `cpu_s` CPU seconds (then SIGXCPU), OPEN_FILES descriptors (a sandboxed child
    gets these before exec), and `memory_mb` of address space above what the child holds now, set in the
    child once torch and the cases are imported (CUDA reserves far more address space than it uses: None)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    cap = OPEN_FILES if hard == resource.RLIM_INFINITY else min(OPEN_FILES, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, cap), cap))
    if memory_mb is not None:
        with open("/proc/self/statm") as f:
            held = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        limit = held + memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def die_with_parent() -> None:
    """A forked child is killed when the judge dies (Linux's parent-death signal; elsewhere nothing)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def kill(pid: int) -> None:
    """SIGKILL the child's process group (under bwrap: the sandbox, and with it its PID namespace)."""
    for send in (os.killpg, os.kill):
        try:
            send(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
