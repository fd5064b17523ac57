"""How a child's life ended, read from outside: the exit status of a child that died on its own, the memory a
child's process tree holds (a memory hog vs a slow loop at a deadline), and how the child was kept in."""
from __future__ import annotations

import os
import signal

from .outcome import MEMORY_LIMIT, RUNTIME_ERROR, TIME_LIMIT, Outcome


def ended_how(status: int, mode: str) -> Outcome:
    """Why a child that died on its own ended: a signal (the OOM killer's SIGKILL, SIGXCPU, a crash) or an
    early exit. Under bwrap a signal comes back as exit code 128 + n."""
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    if mode == "bwrap" and code is not None and code > 128:    # bwrap passes a signal on as 128 + n
        sig, code = code - 128, None
    if sig is not None:
        if sig == signal.SIGKILL:
            return Outcome(MEMORY_LIMIT, "killed by the system (out of memory?)")
        if sig == signal.SIGXCPU:
            return Outcome(TIME_LIMIT, "over the CPU time limit")
        name = signal.Signals(sig).name if sig in signal.Signals.__members__.values() else str(sig)
        return Outcome(RUNTIME_ERROR, f"crashed with {name}",
                       "a segmentation fault often means a recursion too deep for the C stack")
    return Outcome(RUNTIME_ERROR, f"the process ended with exit code {code} before finishing",
                   "do not call os._exit() or sys.exit() in a submission")


def memory_held_mb(pid: int, cap_mb: int | None, resident_base: dict | None = None) -> float | None:
    """The most memory a process of the child's tree holds beyond its base (MiB), or None.

    The child caps its address space at its size then + cap_mb (child._set_limits); touching that much can
    take longer than a case's time limit, so at the deadline this tells a memory hog from a slow loop. A
    fork also inherits the judge's free heap, which a hog fills without growing its address space: there
    the growth of its resident memory since `resident_base` (resident_mb, read when it was ready) counts.
    """
    if cap_mb is None:
        return None
    held = None
    for p, cap, size, resident in _capped_processes(pid):
        mine = (size - (cap - cap_mb * 2**20)) / 2**20
        if resident_base and p in resident_base:
            mine = max(mine, resident / 2**20 - resident_base[p])
        held = mine if held is None else max(held, mine)
    return held


def resident_mb(pid: int) -> dict:
    """pid -> resident MiB of each memory-capped process in the child's tree, now."""
    return {p: resident / 2**20 for p, _, _, resident in _capped_processes(pid)}


def _capped_processes(pid: int):
    """(pid, address-space cap, size, resident bytes) of each process in `pid`'s tree that has a cap."""
    children: dict[int, list] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    todo = [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            with open(f"/proc/{p}/limits") as f:
                cap = next(line.split()[3] for line in f if line.startswith("Max address space"))
            with open(f"/proc/{p}/status") as f:
                fields = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f
                          if line.startswith(("VmSize:", "VmRSS:"))}
            size, resident = fields["VmSize"], fields["VmRSS"]
        except (OSError, StopIteration, ValueError, IndexError, KeyError):
            continue
        if cap.isdigit():
            yield p, int(cap), size, resident


def describe(mode: str, containment, guards: bool) -> str:
    """How a submission was graded, for the report and --json."""
    where = ("bwrap sandbox (read-only files, no network, own PID namespace)" if mode == "bwrap"
             else "forked child (no sandbox)")
    layers = [where, containment.describe()]
    if guards:
        layers.append("in-process guards")
    return " + ".join(layers)
