"""What a passed deadline means: the supervisor's phases, the words for each phase's limit, and the watch that
tells a slow loop (a time limit) from a child still filling its memory cap (a memory limit).

Touching a few hundred MiB can take longer than one case's time limit, so at a deadline the child's memory
decides: little held is a time limit; much held earns one more time limit to reach the cap (where its
MemoryError is a memory limit); at that second deadline, memory still growing or a quarter of the cap held is
a memory limit, and memory let go of gets SETTLE_S for the MemoryError's report to arrive.
"""
from __future__ import annotations

import enum
import time

from .child_end import memory_held_mb, resident_mb
from .outcome import MEMORY_LIMIT, TIME_LIMIT

GRACE_MB = 64            # held beyond the child's start at a deadline: maybe filling its memory cap
SETTLE_S = 0.5           # for a child that held that at one deadline and let go of it by the next
RUN_ON = "run on"        # MemoryWatch.at_deadline's third answer: not a verdict, a later deadline


class Phase(enum.Enum):
    STARTING = "starting"
    LOADING = "loading"
    BETWEEN = "between cases"
    IN_CASE = "in a case"
    IN_BENCH = "in the benchmark"
    DONE = "done"


class MemoryWatch:
    """The memory rule above for one child; `grace`: (phase, case, MiB held) of the deadline extended once."""

    def __init__(self, cap_mb: int):
        self.cap_mb = cap_mb
        self.grace: tuple | None = None
        self.settling = False
        self.resident: dict | None = None             # resident MiB when the child was ready

    def ready(self, pid: int) -> None:
        """The child is set up: its resident memory now is the base a hog's growth is counted from."""
        if self.cap_mb is not None:
            self.resident = resident_mb(pid)

    def at_deadline(self, pid: int, where: tuple, now: float, time_limit_s: float, hard_end: float):
        """(RUN_ON, the new deadline), (MEMORY_LIMIT, MiB held) or (TIME_LIMIT, None) for the child `pid`
        past its deadline at `where` = (phase, case)."""
        held = memory_held_mb(pid, self.cap_mb, self.resident)
        first = self.grace is None or self.grace[:2] != where
        if not first and not self.settling and (held is None or held < self.grace[2]):
            self.settling = True                      # it let go of what it held: a MemoryError being
            return RUN_ON, now + SETTLE_S             # reported (its frame not yet in the pipe)
        if held is None or held < GRACE_MB:
            return TIME_LIMIT, None
        if first and now < hard_end:
            self.grace = (*where, held)
            return RUN_ON, min(now + time_limit_s, hard_end)
        growing = not first and held > self.grace[2]
        if not growing and held < self.cap_mb / 4:
            return TIME_LIMIT, None
        return MEMORY_LIMIT, held


def late_message(phase: Phase, limits, hard_end: float) -> str:
    """What a child past its deadline in `phase` was late for."""
    if phase == Phase.STARTING:
        return (f"the grading process did not start within {limits.startup_limit_s:g} s (is the machine "
                "overloaded?); this is not the submission's time")
    if phase == Phase.LOADING:
        return f"loading (importing) the file took longer than {limits.import_limit_s:g} s"
    if time.monotonic() >= hard_end:
        return (f"loading it and all cases together took longer than "
                f"{limits.import_limit_s + limits.total_limit_s:g} s")
    if phase == Phase.IN_BENCH:
        return f"the benchmark took longer than {limits.bench_limit_s:g} s"
    return f"over the time limit of {limits.time_limit_s:g} s per case"
