"""The manager of one KV cache group: block tables, allocation and prefix hits for one kind of layer.

vLLM v1 splits the hybrid KV cache manager in three (vllm/v1/core/,
vllm-project/vllm@1153c0c:docs/design/hybrid_kv_cache_manager.md): a coordinator over the groups
(kv_cache_coordinator.py here), one `SingleTypeKVCacheManager` per group
(single_type_kv_cache_manager.py@002f349), and ONE block pool shared by all. This module holds the base,
`SingleTypeManager`, and the full-attention group, `FullAttentionManager`; sliding_window_manager.py and
state_manager.py hold the other kinds. Each group keeps its own block table per request (`block_tables`, keyed
by request id), takes blocks from the shared `BlockPool` (block_pool.py) and registers its full blocks in a
shared `BlockHashIndex` (block_hash_index.py) under its `group_id`. The pool's `on_evict` hook is the index's
`drop` (a manager wires it when the pool has none), so a block taken from the pool leaves the index there,
whichever group takes it, as vLLM's pool evicts a cached block when it hands it out.

`null_block` is a block the coordinator takes from the pool once and never frees, as vLLM's block 0: it
stands in a block table for a block the group does not need (a sliding window's skipped blocks). It is
never touched, freed or registered.

A request's step, in the order the coordinator calls them (vLLM's `KVCacheManager.allocate_slots`):
find_longest_cache_hit (a new request), allocate_slots (add_computed_blocks: the hit's blocks touched, in
every group, then allocate_new_blocks: fresh ones), the model runs,
cache_blocks (register the full blocks), remove_skipped_blocks (blocks no later token reads), and at the
end free. Block hashes are the chained hashes of the request's full blocks (`BlockManager.compute_hash`).
"""
from __future__ import annotations

from .block_hash_index import BlockHashIndex
from .block_pool import BlockPool
from .validation import check_positive_int


class SingleTypeManager:
    """One KV cache group over a shared pool; the base keeps every block (full attention's rule)."""

    def __init__(self, pool: BlockPool, block_size: int, null_block: int, index: BlockHashIndex | None = None,
                 group_id: int = 0):
        check_positive_int("block_size", block_size)
        if pool.ref_count(null_block) == 0:
            raise ValueError(f"null_block: expected a block taken from the pool, got free block {null_block}")
        self.pool = pool
        self.block_size = block_size
        self.null_block = null_block
        self.index = BlockHashIndex() if index is None else index
        if pool.on_evict is None:
            pool.on_evict = self.index.drop     # a block the pool hands out leaves the index (block_pool.py)
        elif pool.on_evict != self.index.drop:
            raise ValueError(f"pool: expected a pool whose on_evict drops from this group's index (or none), "
                             f"got on_evict={pool.on_evict!r}")
        self.group_id = group_id
        self.block_tables: dict[str, list[int]] = {}
        self.num_cached_blocks: dict[str, int] = {}     # leading blocks of a request already in the index

    def num_required_blocks(self, num_tokens: int) -> int:
        """Table entries that `num_tokens` tokens need (null entries included)."""
        return -(-num_tokens // self.block_size)

    def num_blocks_to_allocate(self, request_id: str, num_tokens: int, computed_blocks=()) -> int:
        """Blocks the pool must give for `allocate_slots(request_id, num_tokens, computed_blocks)`: fresh
        blocks, plus the hit's blocks that sit in the free queue (vLLM counts those too)."""
        have = len(self.block_tables.get(request_id, ())) + len(computed_blocks)
        fresh = max(0, self.num_required_blocks(num_tokens) - have)
        if not computed_blocks:
            return fresh
        return fresh + sum(1 for b in computed_blocks if b != self.null_block and self.pool.ref_count(b) == 0)

    def allocate_slots(self, request_id: str, num_tokens: int, computed_blocks=()) -> list[int] | None:
        """Give `request_id` table entries for `num_tokens` tokens; returns the fresh blocks.

        One group on its own: add_computed_blocks, then allocate_new_blocks. Returns None, and changes
        nothing, when the pool has fewer free blocks than num_blocks_to_allocate. Several groups over one
        pool call the two halves through KVCacheCoordinator.allocate_slots instead.
        """
        computed_blocks = list(computed_blocks)
        if self.pool.num_free() < self.num_blocks_to_allocate(request_id, num_tokens, computed_blocks):
            return None
        self.add_computed_blocks(request_id, computed_blocks)
        return self.allocate_new_blocks(request_id, num_tokens)

    def add_computed_blocks(self, request_id: str, computed_blocks=()) -> None:
        """Start a new request's table with its prefix hit (find_longest_cache_hit); each block but the null
        block gains a reference (`BlockPool.touch`), which takes a freed one out of the free queue. A
        running request brings none (vLLM's `add_local_computed_blocks`)."""
        computed_blocks = list(computed_blocks)
        if request_id in self.block_tables:
            if computed_blocks:
                raise ValueError(f"computed_blocks: expected none for running request {request_id!r}, "
                                 f"got {computed_blocks}")
            return
        self.pool.touch([b for b in computed_blocks if b != self.null_block])
        self.block_tables[request_id] = computed_blocks
        self.num_cached_blocks[request_id] = len(computed_blocks)

    def allocate_new_blocks(self, request_id: str, num_tokens: int) -> list[int]:
        """Extend the request's table with fresh blocks from the front of the free queue up to
        num_required_blocks(num_tokens) entries; returns them. The caller checked that they are free."""
        table = self.block_tables[request_id]
        fresh = self.pool.allocate(max(0, self.num_required_blocks(num_tokens) - len(table)))
        table.extend(fresh)                     # (the pool dropped their old hashes from the index)
        return fresh

    def cache_blocks(self, request_id: str, block_hashes: list[int], num_tokens: int) -> None:
        """Register the request's full blocks among its first `num_tokens` computed tokens in the index."""
        table = self.block_tables[request_id]
        num_full = min(num_tokens // self.block_size, len(block_hashes), len(table))
        for i in range(self.num_cached_blocks[request_id], num_full):
            if table[i] != self.null_block:
                self.index.insert(self.group_id, block_hashes[i], table[i])
        self.num_cached_blocks[request_id] = max(self.num_cached_blocks[request_id], num_full)

    def remove_skipped_blocks(self, request_id: str, num_computed_tokens: int) -> list[int]:
        """Free the blocks no token after the first `num_computed_tokens` reads; full attention: none."""
        return []

    def free(self, request_id: str) -> None:
        """Drop the request's references, last block first (its prefix stays cached longest)."""
        table = self.block_tables.pop(request_id)
        self.num_cached_blocks.pop(request_id)
        self.pool.free([b for b in reversed(table) if b != self.null_block])

    def find_longest_cache_hit(self, block_hashes: list[int], max_length: int) -> list[int]:
        """The cached blocks of the longest prefix of at most `max_length` tokens this group can reuse."""
        raise NotImplementedError(f"{type(self).__name__} does not say what a prefix hit needs")


class FullAttentionManager(SingleTypeManager):
    """Full attention: every token is read by every later one, so a hit needs every block of the prefix;
    search from the left and stop at the first miss (vLLM's `FullAttentionManager`)."""

    def find_longest_cache_hit(self, block_hashes: list[int], max_length: int) -> list[int]:
        hits = []
        for block_hash in block_hashes[: max_length // self.block_size]:
            block = self.index.get(self.group_id, block_hash)
            if block is None:
                break
            hits.append(block)
        return hits
