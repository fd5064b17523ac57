"""A serving simulation with no model, only memory arithmetic: paging vs the paper's three reservations.

Exports: `simulate_serving`, `SERVING_POLICIES`. Arrays are [steps] or [R] (R requests; docs/conventions.md).

Each step, every running request gains one token (continuous batching, Orca / vLLM). The scheduler admits
waiting requests FIFO while memory allows. Policies (`policies.POLICY_KEYS`):
  "paged":       a request holds ceil(num_tokens / block_size) blocks, allocated as it grows (nano-vllm's
                 `may_append`); when a running request cannot grow, the NEWEST running request is preempted
                 and nobody is admitted that step. `preemption` says what happens to its K/V:
                   "recompute" (the default, vLLM V1's scheduler): its blocks are freed, it goes back to the
                       FRONT of the queue, and its tokens are recomputed on re-admission;
                   "swap" (vLLM V0's `PreemptionMode.SWAP`, `vllm/core/scheduler.py`): its K/V goes to host
                       memory and its blocks are freed; it joins the END of a swapped queue, served FIFO in a
                       step that preempted nobody, and nobody waiting is admitted in a step that began with a
                       request swapped out (V0's `_schedule_default`); swapping in takes the blocks an
                       admission would.
                 Both record each preempted length (`ServingResult.preempted_lengths`), so that
                 `swap_or_recompute.preemption_seconds` can price the run either way.
  "orca_max", "orca_pow2", "orca_oracle": one buddy-allocated chunk per request, sized at admission
                 (`reservation.simulate_reserving`): the pre-vLLM systems of the PagedAttention paper.
                 With max_len a power of two, "orca_max" is the plain reservation of budget // max_len slots.

Per step the paged loop does O(1) work plus O(log R) per admission, finish or preemption: a running request's
length is a line in time, L0 + (t - t0), so the requests that need a new block at step t are those with
(L0 - t0 + t) % block_size == 0, counted once per phase at admission. 10,000 requests take well under a
second per policy.
"""
from __future__ import annotations

import heapq
from collections import deque

import numpy as np

from pagedkv_lib.core.validation import check_positive_int
from pagedkv_lib.studies.policies import POLICY_KEYS, make_policy
from pagedkv_lib.studies.serving.reservation import simulate_reserving
from pagedkv_lib.studies.serving.result import ServingResult
from pagedkv_lib.studies.workload import arrival_steps

SERVING_POLICIES = POLICY_KEYS
PREEMPTION_MODES = ("recompute", "swap")


class _Scheduler:
    """The state of one paged simulation; a running request admitted at step t0 with L0 tokens holds
    L0 + (t - t0) tokens at the start of step t, and ceil(that / block_size) blocks."""

    def __init__(self, prompt: list[int], total: list[int], block_size: int, num_blocks: int):
        self.unit = block_size
        self.free = num_blocks              # free blocks
        self.num_tokens = prompt            # [R] tokens at the latest admission: prompt + generated so far
        self.total = total                  # [R] prompt + output
        self.start = [-1] * len(total)      # [R] step of the latest admission
        self.running = [False] * len(total)  # [R]
        self.order: list[int] = []          # admission order; finished ids are skipped lazily
        self.phase_count = [0] * block_size  # running requests per phase (L0 - t0) % block_size
        self.leaving: list[tuple[int, int, int]] = []  # heap of (finish step, id, admission step)
        self.num_running = 0
        self.used = 0                       # tokens held by the running requests
        self.num_preemptions = 0
        self.recomputed = 0                 # tokens dropped by a preemption, to be computed again
        self.swapped = 0                    # tokens sent to host memory by a preemption
        self.preempted_lengths: list[int] = []

    def length(self, rid: int, t: int) -> int:
        return self.num_tokens[rid] + t - self.start[rid]

    def demand(self, t: int) -> int:
        """Blocks the running requests need to gain this step's token."""
        return self.phase_count[-t % self.unit]

    def admission_cost(self, rid: int) -> int:
        return -(-(self.num_tokens[rid] + 1) // self.unit)

    def admit(self, rid: int, t: int) -> None:
        self.free -= self.admission_cost(rid)
        self.start[rid] = t
        self.running[rid] = True
        self.order.append(rid)
        self.phase_count[(self.num_tokens[rid] - t) % self.unit] += 1
        heapq.heappush(self.leaving, (t + self.total[rid] - self.num_tokens[rid] - 1, rid, t))
        self.num_running += 1
        self.used += self.num_tokens[rid]

    def _release(self, rid: int, length: int) -> None:
        self.running[rid] = False
        self.phase_count[(self.num_tokens[rid] - self.start[rid]) % self.unit] -= 1
        self.free += -(-length // self.unit)
        self.num_running -= 1
        self.used -= length

    def preempt_newest(self, t: int, swap: bool = False) -> tuple[int, bool]:
        """Preempt before step t's growth (by recompute, or by swap); returns the id and whether it was due a
        block."""
        while not self.running[self.order[-1]]:
            self.order.pop()
        rid = self.order.pop()
        length = self.length(rid, t)
        self._release(rid, length)
        self.num_tokens[rid] = length
        self.num_preemptions += 1
        self.preempted_lengths.append(length)
        if swap:
            self.swapped += length
        else:
            self.recomputed += length
        return rid, length % self.unit == 0

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
                     max_num_seqs: int | None = None, preemption: str = "recompute") -> ServingResult:
    """Serve `requests` (`Request`s) under `policy` (one of SERVING_POLICIES) until all finish.

    Arrivals: all at step 0 if `arrival_rate` is None, else arrival_steps(R, arrival_rate, seed).
    A request admitted at step t is prefilled and gains its first token at t; it finishes at the step that
    brings it to prompt_len + output_len tokens. Budget and lengths are in tokens (slots); `block_size`
    matters to paging only, `max_len` to the Orca policies only; so does `preemption` (PREEMPTION_MODES) to
    paging: the Orca policies never preempt.
    """
    if policy not in SERVING_POLICIES:
        raise ValueError(f"policy: expected one of {SERVING_POLICIES}, got {policy!r}")
    if preemption not in PREEMPTION_MODES:
        raise ValueError(f"preemption: expected one of {PREEMPTION_MODES}, got {preemption!r}")
    for name, value in (("budget_tokens", budget_tokens), ("block_size", block_size), ("max_len", max_len)):
        check_positive_int(name, value)
    if max_num_seqs is not None:
        check_positive_int("max_num_seqs", max_num_seqs)
    n = len(requests)
    check_positive_int("len(requests)", n)
    if policy != "paged":
        return simulate_reserving(requests, make_policy(policy, max_len=max_len), budget_tokens=budget_tokens,
                                  arrival_rate=arrival_rate, seed=seed, max_num_seqs=max_num_seqs)
    prompt = [r.prompt_len for r in requests]
    total = [r.total_len for r in requests]
    num_blocks = budget_tokens // block_size
    longest = max(total)
    if -(-longest // block_size) > num_blocks:
        raise ValueError(f"budget_tokens: expected room for the longest request ({longest} tokens in blocks "
                         f"of {block_size}), got {budget_tokens}")
    arrival = arrival_steps(n, arrival_rate, seed)            # [R], sorted
    arrivals = arrival.tolist()
    max_seqs = max_num_seqs or n

    sched = _Scheduler(prompt, total, block_size, num_blocks)
    admit = np.full(n, -1, dtype=np.int64)                    # [R] first admission
    finish = np.full(n, -1, dtype=np.int64)                   # [R] step of the last token
    waiting: deque[int] = deque()
    swapped: deque[int] = deque()                              # preempted by swap, K/V in host memory
    series: dict[str, list[int]] = {"running": [], "waiting": [], "used": [], "allocated": []}
    next_arrival = 0                                           # index of the next request to arrive
    done = 0
    t = 0
    while done < n:
        if sched.num_running == 0 and not waiting and not swapped and arrivals[next_arrival] > t:  # idle
            for key in series:
                series[key].extend([0] * (arrivals[next_arrival] - t))
            t = arrivals[next_arrival]
        while next_arrival < n and arrivals[next_arrival] <= t:
            waiting.append(next_arrival)
            next_arrival += 1
        demand = sched.demand(t)
        preempted = False
        had_swapped = bool(swapped)
        while demand > sched.free:  # the running cannot all grow: preempt the newest
            rid, was_due = sched.preempt_newest(t, swap=preemption == "swap")
            if preemption == "swap":
                swapped.append(rid)
            else:
                waiting.appendleft(rid)
            demand -= was_due
            preempted = True
        sched.free -= demand
        while not preempted and swapped and sched.num_running < max_seqs \
                and sched.admission_cost(swapped[0]) <= sched.free:
            sched.admit(swapped.popleft(), t)                   # swap in: blocks back, nothing recomputed
        while not preempted and not had_swapped and waiting and sched.num_running < max_seqs \
                and sched.admission_cost(waiting[0]) <= sched.free:
            rid = waiting.popleft()
            sched.admit(rid, t)
            if admit[rid] < 0:
                admit[rid] = t
        sched.used += sched.num_running  # every running request gains one token
        series["running"].append(sched.num_running)
        series["waiting"].append(len(waiting) + len(swapped))
        series["used"].append(sched.used)
        series["allocated"].append((num_blocks - sched.free) * block_size)
        gone = sched.finish(t)
        if gone:
            finish[gone] = t
            done += len(gone)
        t += 1
    return ServingResult(
        policy=policy, budget_tokens=budget_tokens, block_size=block_size, max_len=max_len,
        num_running=np.array(series["running"]), num_waiting=np.array(series["waiting"]),
        used_tokens=np.array(series["used"]), allocated_tokens=np.array(series["allocated"]),
        arrival_step=arrival, admit_step=admit, finish_step=finish, num_preemptions=sched.num_preemptions,
        recomputed_tokens=sched.recomputed, preemption=preemption, swapped_tokens=sched.swapped,
        preempted_lengths=np.array(sched.preempted_lengths, dtype=np.int64),
    )
