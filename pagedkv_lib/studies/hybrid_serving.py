"""Prefix hits of a hybrid model under memory pressure, with and without the sliding-window rule.

Exports: `HybridBlockManager`, `long_chats`, `hit_rates`, `HIT_SETUP`. Units: tokens, blocks.

The serving replay of prefix_cache_comparison.py (`serve`: the engine's own `schedule`, FIFO admission, one
token per running request per step, preemption of the newest by recompute) drives a `KVCacheCoordinator`
(core/kv_cache_coordinator.py) through `HybridBlockManager`, nano-vllm's block-manager interface:
  allocate     the request's hit (the agreement of every group, at most len - 1 tokens), its table in every
               group, its full blocks registered;
  can_append   first frees what left the windows (vLLM's `KVCacheManager.allocate_slots` calls
               remove_skipped_blocks before it counts, kv_cache_manager.py@003df29), then counts;
  may_append   one more slot, and the hash of a block it fills.
The workload is multi-turn chat (`chat_turns`) with turns long enough that a conversation outgrows the
window. A sliding-window group frees the blocks that leave its window while the turn runs; they go to the
END of the free queue and stay hittable until reused. With the rule, the next turn needs only the last
window's blocks; without it, every block of the prefix, and under pressure the early ones are gone first.
"""
from __future__ import annotations

from pagedkv_lib.core.block_manager import BlockManager, block_hashes
from pagedkv_lib.core.kv_cache_coordinator import KVCacheCoordinator
from pagedkv_lib.core.sequence import Sequence
from pagedkv_lib.core.validation import check_no_lookahead
from pagedkv_lib.studies.hybrid_memory import HYBRID_MODELS, layer_groups, page_bytes
from pagedkv_lib.studies.memory import GiB
from pagedkv_lib.studies.prefix_cache_comparison import ReplayStats, chat_turns, serve


class HybridBlockManager:
    """nano-vllm's BlockManager interface over a KVCacheCoordinator (the module docstring says how)."""

    def __init__(self, coordinator: KVCacheCoordinator):
        self.coordinator = coordinator
        self.block_size = coordinator.block_size
        self.hashes: dict[str, list[int]] = {}
        self.waiting_hashes: dict[tuple[int, int], list[int]] = {}   # (seq_id, len) of a waiting sequence

    def _hit(self, seq: Sequence) -> tuple[list[int], list[list[int]], int]:
        key = (seq.seq_id, len(seq))
        if key not in self.waiting_hashes:          # the scheduler asks again each step the head waits
            self.waiting_hashes = {key: block_hashes(seq.token_ids, self.block_size)}
        hashes = self.waiting_hashes[key]
        hits, length = self.coordinator.find_longest_cache_hit(hashes, len(seq) - 1)
        return hashes, hits, length

    def can_allocate(self, seq: Sequence) -> bool:
        _, hits, _ = self._hit(seq)
        need = self.coordinator.num_blocks_to_allocate(str(seq.seq_id), len(seq), hits)
        return need <= self.coordinator.pool.num_free()

    def allocate(self, seq: Sequence) -> None:
        key = str(seq.seq_id)
        hashes, hits, length = self._hit(seq)
        if not self.coordinator.allocate_slots(key, len(seq), hits):
            raise ValueError(f"allocate: expected can_allocate first, seq {seq.seq_id} does not fit")
        seq.num_cached_tokens = length
        self.coordinator.cache_blocks(key, hashes, len(seq))
        self.hashes[key] = hashes

    def can_append(self, seq: Sequence, num_lookahead_tokens: int = 0) -> bool:
        check_no_lookahead(num_lookahead_tokens)
        key = str(seq.seq_id)
        self.coordinator.remove_skipped_blocks(key, len(seq) - 1)    # all but the new token are computed
        return self.coordinator.num_blocks_to_allocate(key, len(seq)) <= self.coordinator.pool.num_free()

    def may_append(self, seq: Sequence, num_lookahead_tokens: int = 0) -> None:
        check_no_lookahead(num_lookahead_tokens)
        key = str(seq.seq_id)
        self.coordinator.allocate_slots(key, len(seq))
        if len(seq) % self.block_size == 0:                              # the token fills a block
            prefix = self.hashes[key][-1] if self.hashes[key] else -1
            self.hashes[key].append(BlockManager.compute_hash(seq.block(seq.num_blocks - 1), prefix))
            self.coordinator.cache_blocks(key, self.hashes[key], len(seq))

    def deallocate(self, seq: Sequence) -> None:
        key = str(seq.seq_id)
        self.coordinator.free(key)
        del self.hashes[key]
        seq.num_cached_tokens = 0
        seq.block_table.clear()

    def pool_use(self) -> tuple[int, int]:
        """(blocks held by running requests, idle blocks that still hold a hash), the null block aside."""
        pool = self.coordinator.pool
        idle = len(self.coordinator.index.block_to_hash.keys() & set(pool.free_block_ids))
        return pool.num_blocks - pool.num_free() - 1, idle


HIT_SETUP = dict(num_conversations=8, num_turns=4, user=(200, 600), answer=(100, 300), think_steps=4)


def long_chats(seed: int = 0):
    """Chats whose contexts outgrow a 1024-token window by their third turn (HIT_SETUP)."""
    return chat_turns(seed=seed, **HIT_SETUP)


def hit_rates(model_names=("5:1 local:global, W 1024", "alternating, W 128"), pool_gib=(1.0, 2.0, 8.0),
              block_size: int = 16, seed: int = 0) -> list[dict]:
    """One row per (model, pool size, rule): the prompt tokens served from the cache over `long_chats`."""
    requests = long_chats(seed)
    rows = []
    for name in model_names:
        model = HYBRID_MODELS[name]
        _, groups = layer_groups(model)
        for gib in pool_gib:
            num_blocks = int(gib * GiB) // page_bytes(model, block_size)
            for rule in (True, False):
                coord = KVCacheCoordinator(num_blocks, block_size, groups, sliding_window_rule=rule)
                stats = serve(requests, HybridBlockManager(coord), block_size,
                              ReplayStats(name, (num_blocks - 1) * block_size))
                rows.append({"model": name, "pool_gib": gib, "num_blocks": num_blocks, "rule": rule,
                             "hit_rate": stats.hit_rate, "computed": stats.computed_tokens,
                             "preemptions": stats.preemptions, "steps": stats.steps})
    return rows
