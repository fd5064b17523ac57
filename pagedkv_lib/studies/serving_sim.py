"""A serving simulation with no model, only memory arithmetic: paged KV cache vs reserving `max_len`.

Exports: `simulate_serving`, `ServingResult`. Arrays are [steps] or [R] (R requests; docs/conventions.md).

Each step, every running request gains one token (continuous batching, Orca / vLLM). The scheduler admits
waiting requests FIFO while memory allows. Policies:
  "paged":   a request holds ceil(num_tokens / block_size) blocks, allocated as it grows (nano-vllm's
             `may_append`); when a running request cannot grow, the NEWEST running request is preempted by
             recompute (its blocks freed, it goes back to the FRONT of the queue, its tokens recomputed on
             re-admission), and nobody is admitted that step, as in vLLM V1's scheduler.
  "reserve": a request reserves `max_len` slots at admission (budget // max_len equal slots, so contiguity
             costs nothing more) and never grows: the pre-vLLM systems of the PagedAttention paper.

Per step the work is O(1) plus O(log N) per admission, finish or preemption, so 10,000 requests take well
under a second: a running request's length is a line in time, L0 + (t - t0), so the requests that need a new
block at step t are those with (L0 - t0 + t) % block_size == 0, counted once per phase at admission.
"""
from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass

import numpy as np

from pagedkv_lib.core.validation import check_positive_int
from pagedkv_lib.studies.workload import arrival_steps

POLICIES = ("paged", "reserve")


@dataclass(frozen=True)
class ServingResult:
    """Per-step series (for plots) and per-request steps; the summary figures are properties."""

    policy: str
    budget_tokens: int
    block_size: int
    max_len: int
    num_running: np.ndarray       # [steps] requests that gained a token in this step
    num_waiting: np.ndarray       # [steps] queued (arrived, not running) after admission
    used_tokens: np.ndarray       # [steps] tokens held by running requests after this step's growth
    allocated_tokens: np.ndarray  # [steps] slots allocated (blocks x block_size, or running x max_len)
    admit_step: np.ndarray        # [R] first admission
    finish_step: np.ndarray       # [R] step of the last token
    num_preemptions: int
    recomputed_tokens: int        # tokens whose KV was dropped by a preemption and computed again

    @property
    def num_steps(self) -> int:
        return len(self.num_running)

    @property
    def throughput(self) -> float:
        """Generated tokens per step."""
        return float(self.num_running.sum() / self.num_steps)

    @property
    def mean_concurrency(self) -> float:
        return float(self.num_running.mean())

    @property
    def max_concurrency(self) -> int:
        return int(self.num_running.max())

    @property
    def mean_utilization(self) -> float:
        """Used tokens / allocated slots, summed over all steps (1 - this is the waste)."""
        return float(self.used_tokens.sum() / max(int(self.allocated_tokens.sum()), 1))

    @property
    def mean_budget_utilization(self) -> float:
        """Used tokens / budget, averaged over steps."""
        return float(self.used_tokens.mean() / self.budget_tokens)


class _Scheduler:
    """The state of one simulation; a running request admitted at step t0 with L0 tokens holds
    L0 + (t - t0) tokens at the start of step t, and ceil(that / unit) units of memory."""

    def __init__(self, prompt: list[int], total: list[int], policy: str, unit: int, num_units: int):
        self.paged, self.unit, self.free = policy == "paged", unit, num_units
        self.num_tokens = prompt            # [R] tokens at the latest admission: prompt + generated so far
        self.total = total                  # [R] prompt + output
        self.start = [-1] * len(total)      # [R] step of the latest admission
        self.running = [False] * len(total)  # [R]
        self.order: list[int] = []          # admission order; finished ids are skipped lazily
        self.phase_count = [0] * unit if self.paged else []  # running requests per phase (L0 - t0) % unit
        self.leaving: list[tuple[int, int, int]] = []  # heap of (finish step, id, admission step)
        self.num_running = self.used = self.num_preemptions = self.recomputed = 0

    def length(self, rid: int, t: int) -> int:
        return self.num_tokens[rid] + t - self.start[rid]

    def demand(self, t: int) -> int:
        """Blocks the running requests need to gain this step's token."""
        return self.phase_count[-t % self.unit] if self.paged else 0

    def admission_cost(self, rid: int) -> int:
        return -(-(self.num_tokens[rid] + 1) // self.unit) if self.paged else 1

    def admit(self, rid: int, t: int) -> None:
        self.free -= self.admission_cost(rid)
        self.start[rid], self.running[rid] = t, True
        self.order.append(rid)
        if self.paged:
            self.phase_count[(self.num_tokens[rid] - t) % self.unit] += 1
        heapq.heappush(self.leaving, (t + self.total[rid] - self.num_tokens[rid] - 1, rid, t))
        self.num_running += 1
        self.used += self.num_tokens[rid]

    def _release(self, rid: int, length: int) -> None:
        self.running[rid] = False
        if self.paged:
            self.phase_count[(self.num_tokens[rid] - self.start[rid]) % self.unit] -= 1
        self.free += -(-length // self.unit) if self.paged else 1
        self.num_running -= 1
        self.used -= length

    def preempt_newest(self, t: int) -> tuple[int, bool]:
        """Preempt by recompute before step t's growth; returns the id and whether it was due a block."""
        while not self.running[self.order[-1]]:
            self.order.pop()
        rid = self.order.pop()
        length = self.length(rid, t)
        self._release(rid, length)
        self.num_tokens[rid] = length
        self.num_preemptions += 1
        self.recomputed += length
        return rid, self.paged and length % self.unit == 0

    def finish(self, t: int) -> list[int]:
        """Release the requests whose last token came at step t."""
        done = []
        while self.leaving and self.leaving[0][0] <= t:
            _, rid, t0 = heapq.heappop(self.leaving)
            if self.running[rid] and self.start[rid] == t0:  # else preempted since: a stale entry
                self._release(rid, self.total[rid])
                done.append(rid)
        return done


def simulate_serving(requests, policy: str = "paged", *, budget_tokens: int, block_size: int = 16,
                     max_len: int = 4096, arrival_rate: float | None = None, seed: int = 0,
                     max_num_seqs: int | None = None) -> ServingResult:
    """Serve `requests` (`Request`s) until all finish and return the series and summary.

    Arrivals: all at step 0 if `arrival_rate` is None, else arrival_steps(N, arrival_rate, seed).
    A request admitted at step t is prefilled and gains its first token at t; it finishes at the step that
    brings it to prompt_len + output_len tokens. Budget and lengths are in tokens (slots).
    """
    if policy not in POLICIES:
        raise ValueError(f"policy: expected one of {POLICIES}, got {policy!r}")
    for name, value in (("budget_tokens", budget_tokens), ("block_size", block_size), ("max_len", max_len)):
        check_positive_int(name, value)
    if max_num_seqs is not None:
        check_positive_int("max_num_seqs", max_num_seqs)
    n = len(requests)
    check_positive_int("len(requests)", n)
    prompt = [r.prompt_len for r in requests]
    total = [r.total_len for r in requests]
    unit = block_size if policy == "paged" else max_len  # the allocation unit
    num_units = budget_tokens // unit                     # blocks, or reserved slots
    longest = max(total)
    if policy == "reserve" and longest > max_len:
        raise ValueError(f"max_len: expected >= the longest request ({longest} tokens), got {max_len}")
    if -(-longest // unit) > num_units:
        raise ValueError(f"budget_tokens: expected room for the longest request ({longest} tokens in units "
                         f"of {unit}), got {budget_tokens}")
    arrivals = arrival_steps(n, arrival_rate, seed).tolist()  # [R], sorted
    max_seqs = max_num_seqs or n

    sched = _Scheduler(prompt, total, policy, unit, num_units)
    admit, finish = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    waiting: deque[int] = deque()
    series: dict[str, list[int]] = {"running": [], "waiting": [], "used": [], "allocated": []}
    next_arrival = done = t = 0
    while done < n:
        if sched.num_running == 0 and not waiting and arrivals[next_arrival] > t:  # idle until next arrival
            for key in series:
                series[key].extend([0] * (arrivals[next_arrival] - t))
            t = arrivals[next_arrival]
        while next_arrival < n and arrivals[next_arrival] <= t:
            waiting.append(next_arrival)
            next_arrival += 1
        demand, preempted = sched.demand(t), False
        while demand > sched.free:  # the running cannot all grow: preempt the newest, by recompute
            rid, was_due = sched.preempt_newest(t)
            waiting.appendleft(rid)
            demand -= was_due
            preempted = True
        sched.free -= demand
        while not preempted and waiting and sched.num_running < max_seqs \
                and sched.admission_cost(waiting[0]) <= sched.free:
            rid = waiting.popleft()
            sched.admit(rid, t)
            if admit[rid] < 0:
                admit[rid] = t
        sched.used += sched.num_running  # every running request gains one token
        series["running"].append(sched.num_running)
        series["waiting"].append(len(waiting))
        series["used"].append(sched.used)
        series["allocated"].append((num_units - sched.free) * unit)
        gone = sched.finish(t)
        if gone:
            finish[gone] = t
            done += len(gone)
        t += 1
    return ServingResult(
        policy=policy, budget_tokens=budget_tokens, block_size=block_size, max_len=max_len,
        num_running=np.array(series["running"]), num_waiting=np.array(series["waiting"]),
        used_tokens=np.array(series["used"]), allocated_tokens=np.array(series["allocated"]),
        admit_step=admit, finish_step=finish, num_preemptions=sched.num_preemptions,
        recomputed_tokens=sched.recomputed,
    )
