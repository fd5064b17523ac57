"""Two prefix caches under memory pressure: chained block hashes (vLLM, nano-vllm) vs a radix tree (SGLang).

Exports: `PrefixRequest`, `WORKLOADS`, `chat_turns`, `few_shot`, `shared_system_prompt`, `replay`, `serve`,
`ReplayStats`, `compare`, `comparison_table`, `hit_rate_sweep`, `MANAGERS`, `TailEvictingRadixCache`.
`python -m pagedkv_lib.studies.prefix_cache_comparison` prints the table. Units: tokens, steps; R requests
(docs/conventions.md).

No model runs: the engine's own `schedule` (pagedkv_lib/engine/scheduler.py: FIFO admission, one token per
running request per step, preemption of the newest by recompute) drives a block manager over a pool of
`pool_tokens` slots, and each request's output tokens are fixed in advance, so a chat's next turn can repeat
them. Four managers with nano-vllm's interface:
  "hash/16"   `BlockManager`: full 16-token blocks found by chained hashes; freed blocks stay findable in the
              free queue, LRU by release (tail blocks first), and go one block at a time when reused;
  "radix/16"  `RadixBlockManager` at block size 16: the tree, cut to whole blocks;
  "radix/1"   `RadixBlockManager` at block size 1, SGLang's default: token-granular, no partial block;
  "radix/1 trim"  the same tree, but `evict` trims the least recently used leaf from its end, only the blocks
              it needs (`TailEvictingRadixCache`), where SGLang drops whole leaves: the hash manager's
              granularity of eviction on the tree's granularity of matching.
Three workloads, each where the two designs differ:
  chat        multi-turn conversations: each turn's prompt is the whole previous turn (prompt + answer) plus
              a new user message; the next turn arrives a few steps after the last one finished;
  few_shot    requests of a few tasks, each prompt a long task header (its examples) then a short question;
              the headers together do not fit the pool, so eviction order decides what stays;
  system      one system prompt that ends inside a block (100 tokens: 6 blocks of 16 and 4 tokens) and a
              short question.
Measured per run: hit rate (cached / prompt tokens at every admission, re-admissions after preemption
included), prompt tokens computed, those beyond an unbounded token-level cache (`recomputed`), preemptions,
steps, and the pool's mean use: slots held by running requests and slots that hold reusable cache.
Bookkeeping time (the manager's calls, wall clock) is measured too, and machine-dependent.
"""
from __future__ import annotations

import heapq
import random
import time
from collections import deque
from dataclasses import dataclass, field

from pagedkv_lib.core.block_manager import BlockManager
from pagedkv_lib.core.radix_block_manager import RadixBlockManager
from pagedkv_lib.core.radix_cache import RadixCache
from pagedkv_lib.core.sequence import Sequence, SequenceStatus
from pagedkv_lib.core.validation import check_positive_int
from pagedkv_lib.engine.scheduler import schedule

VOCAB = 50_000


class TailEvictingRadixCache(RadixCache):
    """A RadixCache whose `evict` frees only the blocks asked for, from the end of the least recently used
    unlocked leaf (a leaf emptied leaves the tree, and its parent may become a leaf). Not SGLang's."""

    def evict(self, num_blocks: int) -> int:
        heap = [(n.last_access_time, i, n) for i, n in enumerate(self._evictable_leaves())]
        heapq.heapify(heap)
        tie = len(heap)                     # a fresh tie-breaker for each parent pushed back
        freed = 0
        while freed < num_blocks and heap:
            leaf = heap[0][2]
            child_key = self._child_key(leaf.key)
            k = min(len(leaf.value), num_blocks - freed)
            self.pool.free(leaf.value[len(leaf.value) - k:][::-1])          # last block first
            leaf.value = leaf.value[: len(leaf.value) - k]
            leaf.key = leaf.key[: len(leaf.value) * self.block_size]
            self._evictable -= k
            freed += k
            if not leaf.value:
                heapq.heappop(heap)
                parent = leaf.parent
                del parent.children[child_key]
                if parent is not self.root_node and not parent.children and parent.lock_ref == 0:
                    heapq.heappush(heap, (parent.last_access_time, tie, parent))
                    tie += 1
        return freed


MANAGERS = {  # name -> (make(num_blocks), block_size)
    "hash/16": (lambda n: BlockManager(n, 16), 16),
    "radix/16": (lambda n: RadixBlockManager(n, 16), 16),
    "radix/1": (lambda n: RadixBlockManager(n, 1), 1),
    "radix/1 trim": (lambda n: RadixBlockManager(n, 1, TailEvictingRadixCache), 1),
}


@dataclass(frozen=True)
class PrefixRequest:
    """A prompt, the output it will produce, and when it arrives: at step `arrival`, or `arrival` steps after
    request `after` finished (a chat's next turn)."""

    name: str
    prompt: tuple[int, ...]
    output: tuple[int, ...]
    arrival: int = 0
    after: str | None = None


def _tokens(rng: random.Random, n: int) -> tuple[int, ...]:
    return tuple(rng.randrange(VOCAB) for _ in range(n))


def chat_turns(num_conversations: int = 8, num_turns: int = 5, seed: int = 0, user=(16, 64), answer=(16, 96),
               think_steps: int = 4) -> list[PrefixRequest]:
    """Each turn's prompt is the previous turn's prompt and answer plus a new user message."""
    rng = random.Random(f"chat/{seed}")
    out = []
    for c in range(num_conversations):
        context: tuple[int, ...] = ()
        for k in range(num_turns):
            prompt = context + _tokens(rng, rng.randint(*user))
            output = _tokens(rng, rng.randint(*answer))
            after = f"c{c}t{k - 1}" if k else None
            out.append(PrefixRequest(f"c{c}t{k}", prompt, output, think_steps if k else 2 * c, after))
            context = prompt + output
    return out


def few_shot(num_requests: int = 64, headers=(700, 580, 460, 390), weights=(4, 3, 2, 1), seed: int = 0,
             question=(8, 32), answer=(8, 24), gap_steps: int = 3) -> list[PrefixRequest]:
    """Task t's prompt: its header of headers[t] tokens, then a question; tasks drawn with `weights`."""
    rng = random.Random(f"few_shot/{seed}")
    bodies = [_tokens(rng, n) for n in headers]
    out = []
    for i in range(num_requests):
        task = rng.choices(range(len(headers)), weights)[0]
        prompt = bodies[task] + _tokens(rng, rng.randint(*question))
        out.append(PrefixRequest(f"r{i}", prompt, _tokens(rng, rng.randint(*answer)), gap_steps * i))
    return out


def shared_system_prompt(num_requests: int = 64, system_len: int = 100, seed: int = 0, question=(8, 40),
                         answer=(8, 40), gap_steps: int = 2) -> list[PrefixRequest]:
    """One system prompt (100 tokens ends 4 tokens into a 16-token block), then a question."""
    rng = random.Random(f"system/{seed}")
    system = _tokens(rng, system_len)
    return [PrefixRequest(f"r{i}", system + _tokens(rng, rng.randint(*question)),
                          _tokens(rng, rng.randint(*answer)), gap_steps * i) for i in range(num_requests)]


WORKLOADS = {"chat": chat_turns, "few_shot": few_shot, "system": shared_system_prompt}
POOL_TOKENS = {"chat": 3072, "few_shot": 1536, "system": 512}  # tight enough that eviction happens


@dataclass
class ReplayStats:
    manager: str
    pool_tokens: int
    steps: int = 0
    admissions: int = 0
    prompt_tokens: int = 0         # tokens of every admitted sequence (its output too, after a preemption)
    cached_tokens: int = 0         # of them, found in the cache
    preemptions: int = 0
    readmitted_computed: int = 0   # of the computed tokens, those of requests readmitted after a preemption
    held_slots: list[int] = field(default_factory=list)    # [steps] slots of blocks running requests hold
    cached_slots: list[int] = field(default_factory=list)  # [steps] slots of idle blocks holding reusable K/V
    bookkeeping_s: float = 0.0     # wall clock inside the manager's calls (machine-dependent)

    @property
    def computed_tokens(self) -> int:
        return self.prompt_tokens - self.cached_tokens

    @property
    def hit_rate(self) -> float:
        return self.cached_tokens / max(self.prompt_tokens, 1)

    @property
    def mean_held(self) -> float:
        """Mean share of the pool held by running requests."""
        return sum(self.held_slots) / max(len(self.held_slots), 1) / self.pool_tokens

    @property
    def mean_cached(self) -> float:
        """Mean share of the pool holding reusable K/V that no running request uses."""
        return sum(self.cached_slots) / max(len(self.cached_slots), 1) / self.pool_tokens


class _Timed:
    """The manager's five calls, with the wall clock they take added to stats.bookkeeping_s."""

    def __init__(self, manager, stats: ReplayStats):
        self.manager = manager
        self.stats = stats

    def __getattr__(self, name):
        fn = getattr(self.manager, name)

        def timed(*args):
            t = time.perf_counter()
            try:
                return fn(*args)
            finally:
                self.stats.bookkeeping_s += time.perf_counter() - t

        return timed


def _pool_use(manager) -> tuple[int, int]:
    """(blocks held by running requests, idle blocks holding reusable K/V); a manager with a `pool_use`
    method says it itself."""
    if hasattr(manager, "pool_use"):
        return manager.pool_use()
    if isinstance(manager, BlockManager):
        held = manager.pool.num_blocks - manager.pool.num_free()
        idle = sum(1 for b in manager.hash_to_block_id.values() if manager.pool.ref_counts[b] == 0)
        return held, idle
    private = sum(len(p) for p in manager.private.values())
    return manager.cache.protected_size() + private, manager.cache.evictable_size()


def replay(requests: list[PrefixRequest], manager: str, pool_tokens: int, *, max_num_seqs: int = 8,
           max_num_batched_tokens: int = 4096) -> ReplayStats:
    """Serve `requests` with the manager `manager` (a key of MANAGERS) over `pool_tokens` slots."""
    if manager not in MANAGERS:
        raise ValueError(f"manager: expected one of {tuple(MANAGERS)}, got {manager!r}")
    check_positive_int("pool_tokens", pool_tokens)
    make, block_size = MANAGERS[manager]
    longest = max(len(r.prompt) + len(r.output) for r in requests)
    if -(-longest // block_size) > pool_tokens // block_size:
        raise ValueError(f"pool_tokens: expected room for the longest request ({longest} tokens), got "
                         f"{pool_tokens}")
    return serve(requests, make(pool_tokens // block_size), block_size, ReplayStats(manager, pool_tokens),
                 max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens)


def serve(requests: list[PrefixRequest], block_manager, block_size: int, stats: ReplayStats, *,
          max_num_seqs: int = 8, max_num_batched_tokens: int = 4096) -> ReplayStats:
    """The replay itself, with any block manager of nano-vllm's interface (what engine/scheduler.py calls:
    can_allocate, allocate, can_append, may_append, deallocate), filling `stats`."""
    bm = _Timed(block_manager, stats)
    by_id = dict(enumerate(requests))
    pending = set(by_id)
    finished_at = {}
    waiting: deque[Sequence] = deque()
    running: deque[Sequence] = deque()
    t = 0
    while len(finished_at) < len(requests):
        for i in sorted(pending):
            r = by_id[i]
            start = r.arrival if r.after is None else finished_at.get(r.after, float("inf")) + r.arrival
            if start <= t:
                pending.discard(i)
                waiting.append(Sequence(list(r.prompt), block_size, seq_id=i))
        if not waiting and not running:
            t += 1
            continue
        num_waiting = len(waiting)
        seqs, is_prefill = schedule(waiting, running, bm, max_num_seqs, max_num_batched_tokens)
        if not seqs:
            raise RuntimeError(f"{stats.manager}: nothing can run at step {t} ({len(waiting)} waiting)")
        if is_prefill:
            stats.admissions += len(seqs)
            stats.prompt_tokens += sum(len(s) for s in seqs)
            stats.cached_tokens += sum(s.num_cached_tokens for s in seqs)
            readmitted = [s for s in seqs if s.num_completion_tokens]              # preempted before
            stats.readmitted_computed += sum(len(s) - s.num_cached_tokens for s in readmitted)
        else:
            stats.preemptions += len(waiting) - num_waiting
        held, idle = _pool_use(bm.manager)
        stats.held_slots.append(held * block_size)
        stats.cached_slots.append(idle * block_size)
        for s in seqs:                                                  # postprocess: the fixed next token
            output = by_id[s.seq_id].output
            s.append_token(output[s.num_completion_tokens])
            if s.num_completion_tokens == len(output):
                s.status = SequenceStatus.FINISHED                      # as Scheduler.postprocess does
                running.remove(s)
                bm.deallocate(s)
                finished_at[by_id[s.seq_id].name] = t
        t += 1
        stats.steps += 1
    return stats


def ideal_computed(requests: list[PrefixRequest], manager: str = "radix/1") -> int:
    """Prompt tokens an unbounded token-level cache computes: every prompt in arrival order, each token once
    (the last token of a prompt always computed), counted on a radix tree of token ids with no eviction.
    Another manager of MANAGERS gives its own unbounded cache ("hash/16": only full blocks are found)."""
    stats = replay(requests, manager, pool_tokens=2 * sum(len(r.prompt) + len(r.output) for r in requests),
                   max_num_seqs=len(requests))
    return stats.computed_tokens


def compare(workload: str, pool_tokens: int | None = None, seed: int = 0, **kwargs) -> dict[str, ReplayStats]:
    """{manager: stats} for one workload of WORKLOADS (its POOL_TOKENS unless given)."""
    if workload not in WORKLOADS:
        raise ValueError(f"workload: expected one of {tuple(WORKLOADS)}, got {workload!r}")
    requests = WORKLOADS[workload](seed=seed)
    pool = pool_tokens or POOL_TOKENS[workload]
    return {m: replay(requests, m, pool, **kwargs) for m in MANAGERS}


def comparison_table(workloads=tuple(WORKLOADS), seed: int = 0, timing: bool = False) -> str:
    """The table of the module docstring, one row per (workload, manager)."""
    head = (f"{'workload':9s} {'manager':12s} {'hit rate':>8s} {'computed':>9s} {'recomputed':>10s} "
            f"{'preempt':>7s} {'steps':>6s} {'held':>6s} {'cached':>6s}" + ("  us/step" if timing else ""))
    lines = [head]
    for w in workloads:
        requests = WORKLOADS[w](seed=seed)
        ideal = ideal_computed(requests)
        for m, s in compare(w, seed=seed).items():
            line = (f"{w:9s} {m:12s} {s.hit_rate:8.1%} {s.computed_tokens:9,d} "
                    f"{s.computed_tokens - ideal:10,d} {s.preemptions:7d} {s.steps:6d} {s.mean_held:6.1%} "
                    f"{s.mean_cached:6.1%}")
            lines.append(line + (f"  {1e6 * s.bookkeeping_s / s.steps:7.1f}" if timing else ""))
    return "\n".join(lines)


def hit_rate_sweep(workload: str, pools, seed: int = 0) -> dict[str, list[float]]:
    """{manager: [hit rate at each pool size]} for one workload: where memory pressure starts to matter."""
    requests = WORKLOADS[workload](seed=seed)
    return {m: [replay(requests, m, p).hit_rate for p in pools] for m in MANAGERS}


if __name__ == "__main__":
    print(comparison_table(timing=True))
