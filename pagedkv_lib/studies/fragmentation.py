"""External fragmentation: requests arrive and leave a KV memory of `capacity` token slots.

Exports: `simulate_fragmentation`, `FragmentationResult`, `FirstFitAllocator`, `PagedAllocator`.
Arrays are [steps, R] (R requests) or [steps, columns] (the memory map: capacity // granularity columns).

A contiguous allocator (first fit, as in the pre-vLLM systems the PagedAttention paper describes in section 3)
gives each request ONE range of token slots; as requests of different sizes come and go, free memory splits
into holes, and the head of the FIFO queue may wait although enough memory is free in total. Paging (blocks
of `block_size` taken from a `BlockPool`, any free blocks) has no such holes: every free block is usable.
Each request holds its memory for ceil(output_len / tokens_per_step) steps, then leaves.
"""
from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass

import numpy as np

from pagedkv_lib.core.block_pool import BlockPool
from pagedkv_lib.core.validation import check_positive_int
from pagedkv_lib.studies.workload import arrival_steps, make_workload


class FirstFitAllocator:
    """One contiguous range per request, placed in the lowest free hole that is large enough."""

    def __init__(self, capacity: int):
        self.owner = np.full(capacity, -1, dtype=np.int32)  # [capacity] request id per slot, -1 free
        self.ranges: dict[int, tuple[int, int]] = {}
        self._holes: tuple[np.ndarray, np.ndarray] | None = None  # cached until the next place / release

    def holes(self) -> tuple[np.ndarray, np.ndarray]:
        """Start and length of every free run of slots, in address order."""
        if self._holes is None:
            edges = np.diff(np.concatenate(([0], (self.owner == -1).view(np.int8), [0])))  # [capacity + 1]
            starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
            self._holes = starts, ends - starts
        return self._holes

    def place(self, rid: int, num_tokens: int) -> bool:
        starts, lengths = self.holes()
        fits = np.flatnonzero(lengths >= num_tokens)
        if len(fits) == 0:
            return False
        start = int(starts[fits[0]])
        self.owner[start:start + num_tokens] = rid
        self.ranges[rid] = (start, num_tokens)
        self._holes = None
        return True

    def release(self, rid: int) -> None:
        start, num_tokens = self.ranges.pop(rid)
        self.owner[start:start + num_tokens] = -1
        self._holes = None

    def largest_free(self) -> int:
        """The largest request that could be placed now: the largest hole."""
        lengths = self.holes()[1]
        return int(lengths.max()) if len(lengths) else 0


class PagedAllocator:
    """ceil(num_tokens / block_size) blocks per request from a `BlockPool`, wherever they are."""

    def __init__(self, capacity: int, block_size: int):
        self.block_size = block_size
        self.pool = BlockPool(capacity // block_size)
        self.owner = np.full(capacity, -1, dtype=np.int32)  # [capacity]
        self.block_tables: dict[int, list[int]] = {}

    def place(self, rid: int, num_tokens: int) -> bool:
        blocks = self.pool.allocate(-(-num_tokens // self.block_size))
        if blocks is None:
            return False
        self._set_owner(blocks, rid)
        self.block_tables[rid] = blocks
        return True

    def release(self, rid: int) -> None:
        blocks = self.block_tables.pop(rid)
        self.pool.free(blocks)
        self._set_owner(blocks, -1)

    def largest_free(self) -> int:
        return self.pool.num_free() * self.block_size

    def _set_owner(self, blocks: list[int], rid: int) -> None:
        view = self.owner.reshape(-1, self.block_size)  # [num_blocks, block_size]
        view[blocks] = rid


@dataclass(frozen=True)
class FragmentationResult:
    """What `simulate_fragmentation` saw, one row per recorded step (plots: imshow(memory_map.T))."""

    allocator: str
    capacity: int
    granularity: int
    steps: np.ndarray          # [steps] the step of each row
    memory_map: np.ndarray     # [steps, columns] owner of the first slot of each granule, -1 free
    num_running: np.ndarray    # [steps]
    num_waiting: np.ndarray    # [steps]
    free: np.ndarray           # [steps] free token slots
    largest_free: np.ndarray   # [steps] the largest request the allocator could place (first fit: a hole)
    head_blocked: np.ndarray   # [steps] bool: the queue's head waits although `free` covers its need
    arrival_step: np.ndarray   # [R]
    admit_step: np.ndarray     # [R]
    finish_step: np.ndarray    # [R] the step its memory is released

    @property
    def external_fragmentation(self) -> np.ndarray:
        """[T] share of free memory outside the largest usable hole: 1 - largest_free / free, 0 if none."""
        safe = np.maximum(self.free, 1)
        return np.where(self.free > 0, 1.0 - self.largest_free / safe, 0.0)

    @property
    def mean_wait(self) -> float:
        """Mean steps a request spent in the queue."""
        return float((self.admit_step - self.arrival_step).mean())


def simulate_fragmentation(allocator: str = "first_fit", *, requests=None, num_requests: int = 100,
                           seed: int = 0, capacity: int = 16384, block_size: int = 16, reserve: str = "exact",
                           max_len: int = 4096, arrival_rate: float | None = 0.2, tokens_per_step: int = 10,
                           granularity: int = 16, record_every: int = 1) -> FragmentationResult:
    """Run FIFO admission over `allocator` ("first_fit" or "paged"); deterministic for a given seed.

    `requests` defaults to make_workload(num_requests, seed); arrivals come from
    arrival_steps(R, arrival_rate, seed). First fit reserves `max_len` slots per request if reserve == "max",
    else prompt + output ("exact"); paged always takes the blocks of prompt + output.
    """
    if allocator not in ("first_fit", "paged"):
        raise ValueError(f"allocator: expected 'first_fit' or 'paged', got {allocator!r}")
    if reserve not in ("exact", "max"):
        raise ValueError(f"reserve: expected 'exact' or 'max', got {reserve!r}")
    for name, value in (("capacity", capacity), ("block_size", block_size), ("max_len", max_len),
                        ("tokens_per_step", tokens_per_step), ("granularity", granularity),
                        ("record_every", record_every)):
        check_positive_int(name, value)
    if capacity % block_size or capacity % granularity:
        raise ValueError(f"capacity: expected a multiple of block_size ({block_size}) and granularity "
                         f"({granularity}), got {capacity}")
    requests = make_workload(num_requests, seed) if requests is None else list(requests)
    arrivals = arrival_steps(len(requests), arrival_rate, seed)  # [R]
    if allocator == "paged":
        alloc = PagedAllocator(capacity, block_size)
        sizes = [r.total_len for r in requests]
        need = [-(-s // block_size) * block_size for s in sizes]
    else:
        alloc = FirstFitAllocator(capacity)
        sizes = [max_len if reserve == "max" else r.total_len for r in requests]
        need = sizes
    if max(need) > capacity or (reserve == "max" and max(r.total_len for r in requests) > max_len):
        raise ValueError(f"requests: expected each to fit in capacity {capacity} (and in max_len {max_len} "
                         f"when reserving it), got one needing {max(need)} slots")
    lifetimes = [-(-r.output_len // tokens_per_step) for r in requests]

    n = len(requests)
    admit = np.full(n, -1, dtype=np.int64)     # [R]
    finish = np.full(n, -1, dtype=np.int64)    # [R]
    waiting: deque[int] = deque()
    leaving: list[tuple[int, int]] = []  # heap of (finish step, request id)
    keys = ("steps", "map", "running", "waiting", "free", "largest", "blocked")
    rows: dict[str, list] = {k: [] for k in keys}
    next_arrival = 0                     # index of the next request to arrive
    done = 0
    free = capacity                      # free token slots
    t = 0
    while done < n:
        while leaving and leaving[0][0] <= t:
            _, rid = heapq.heappop(leaving)
            alloc.release(rid)
            free += need[rid]
            done += 1
        while next_arrival < n and arrivals[next_arrival] <= t:
            waiting.append(next_arrival)
            next_arrival += 1
        while waiting and alloc.place(waiting[0], sizes[waiting[0]]):
            rid = waiting.popleft()
            admit[rid] = t
            finish[rid] = t + lifetimes[rid]
            free -= need[rid]
            heapq.heappush(leaving, (t + lifetimes[rid], rid))
        if t % record_every == 0:
            rows["steps"].append(t)
            rows["map"].append(alloc.owner[::granularity].copy())  # [columns]
            rows["running"].append(len(leaving))
            rows["waiting"].append(len(waiting))
            rows["free"].append(free)
            rows["largest"].append(alloc.largest_free())
            rows["blocked"].append(bool(waiting) and free >= need[waiting[0]])
        t += 1
    return FragmentationResult(
        allocator=allocator, capacity=capacity, granularity=granularity,
        steps=np.array(rows["steps"]), memory_map=np.stack(rows["map"]),
        num_running=np.array(rows["running"]), num_waiting=np.array(rows["waiting"]),
        free=np.array(rows["free"]), largest_free=np.array(rows["largest"]),
        head_blocked=np.array(rows["blocked"]), arrival_step=arrivals, admit_step=admit, finish_step=finish,
    )
