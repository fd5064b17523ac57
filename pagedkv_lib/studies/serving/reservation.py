"""The serving simulation of the Orca policies: one buddy-allocated chunk per request, event by event.

Exports: `simulate_reserving`. Arrays are [steps] or [R] (R requests; docs/conventions.md).

The model of `simulation.simulate_serving` (continuous batching, one token per running request per step,
FIFO admission; a request admitted at step t is prefilled and gains its first token at t; the memory of a
request that finishes at step t is free at t + 1), with the chunk of a `Reserve` policy instead of blocks.
A chunk never grows, so nothing happens between an admission and the next finish or arrival: the loop visits
only those events (at most 2R), and the per-step series are rebuilt afterwards from difference arrays.
The queue's head blocks the queue (FIFO) while no free buddy block is large enough for its chunk: that wait,
with memory free in total, is the external fragmentation of a contiguous allocator. A chunk never grows, so
the Orca policies never preempt.
"""
from __future__ import annotations

import heapq
from collections import deque

import numpy as np

from pagedkv_lib.core.validation import check_positive_int
from pagedkv_lib.studies.buddy_allocator import BuddyAllocator
from pagedkv_lib.studies.policies import Reserve
from pagedkv_lib.studies.serving.result import ServingResult
from pagedkv_lib.studies.workload import arrival_steps, request_arrays


def _per_step(starts: np.ndarray, ends: np.ndarray, values: np.ndarray, num_steps: int) -> np.ndarray:
    """[steps] the sum of values[i] over the i with starts[i] <= t <= ends[i] (a difference array)."""
    diff = np.bincount(starts, weights=values, minlength=num_steps + 1)         # [steps + 1]
    diff -= np.bincount(ends + 1, weights=values, minlength=num_steps + 1)
    return np.cumsum(diff)[:num_steps].round().astype(np.int64)


def simulate_reserving(requests, policy: Reserve, *, budget_tokens: int, arrival_rate: float | None = None,
                       seed: int = 0, max_num_seqs: int | None = None) -> ServingResult:
    """Serve `requests` with `policy`'s chunks from a BuddyAllocator(budget_tokens) until all finish."""
    if not isinstance(policy, Reserve):
        raise TypeError(f"policy: expected a Reserve (an Orca variant), got {type(policy).__name__}")
    check_positive_int("budget_tokens", budget_tokens)
    if max_num_seqs is not None:
        check_positive_int("max_num_seqs", max_num_seqs)
    prompt, output = request_arrays(requests)                                  # [R], [R]
    chunk = policy.chunk(prompt, output)                                       # [R] slots
    alloc = BuddyAllocator(budget_tokens)
    largest = 1 << max(alloc.region_order)
    if int(chunk.max()) > largest:
        raise ValueError(f"budget_tokens: expected a buddy block for the largest chunk ({int(chunk.max())} "
                         f"slots), got {budget_tokens} (largest block {largest})")
    n = len(prompt)
    arrivals = arrival_steps(n, arrival_rate, seed)                            # [R], sorted
    arr, sizes, outs = arrivals.tolist(), chunk.tolist(), output.tolist()
    max_seqs = max_num_seqs or n
    admit = [-1] * n                          # [R] step of admission
    offset = [0] * n                          # [R] where its chunk starts
    leaving: list[tuple[int, int]] = []       # heap of (step its memory is free again, id)
    waiting: deque[int] = deque()
    next_arrival = 0                          # index of the next request to arrive
    done = 0
    running = 0
    t = 0
    while done < n:
        while leaving and leaving[0][0] <= t:
            _, rid = heapq.heappop(leaving)
            alloc.free(offset[rid])
            running -= 1
            done += 1
        while next_arrival < n and arr[next_arrival] <= t:
            waiting.append(next_arrival)
            next_arrival += 1
        while waiting and running < max_seqs:
            got = alloc.alloc(sizes[waiting[0]])
            if got is None:
                break
            rid = waiting.popleft()
            admit[rid] = t
            offset[rid] = got
            heapq.heappush(leaving, (t + outs[rid], rid))
            running += 1
        events = [leaving[0][0]] if leaving else []
        if next_arrival < n:
            events.append(arr[next_arrival])
        if not events:
            break
        t = max(t + 1, min(events))

    admit_step = np.array(admit, dtype=np.int64)                               # [R]
    finish_step = admit_step + output - 1                                      # [R]
    steps = int(finish_step.max()) + 1
    num_running = _per_step(admit_step, finish_step, np.ones(n), steps)        # [steps]
    # tokens of request i at step t: prompt + (t - admit + 1) = (prompt - admit + 1) + t
    used = _per_step(admit_step, finish_step, (prompt - admit_step + 1).astype(float), steps) \
        + np.arange(steps) * num_running                                       # [steps]
    arrived = np.cumsum(np.bincount(arrivals, minlength=steps)[:steps])        # [steps]
    admitted = np.cumsum(np.bincount(admit_step, minlength=steps)[:steps])     # [steps]
    return ServingResult(
        policy=policy.key, budget_tokens=budget_tokens, block_size=0, max_len=policy.max_len,
        num_running=num_running, num_waiting=arrived - admitted, used_tokens=used,
        allocated_tokens=_per_step(admit_step, finish_step, chunk.astype(float), steps),
        arrival_step=arrivals, admit_step=admit_step, finish_step=finish_step, num_preemptions=0,
        recomputed_tokens=0,
    )
