"""BlockHashIndex: which physical blocks hold which full block of tokens, per KV cache group.

vLLM keeps one map from a block hash to its blocks in its BlockPool (`cached_block_hash_to_block`), keyed by
the hash AND the KV cache group, so that the same tokens of different groups are cached and evicted
independently (vllm-project/vllm@1153c0c:docs/design/hybrid_kv_cache_manager.md, "Prefix caching"). The
course's BlockPool holds no hashes (block_pool.py), so the groups of a hybrid model share this index instead:
a group registers a full block under (group_id, block_hash) once its tokens are computed, and the pool calls
`drop(block)` on each block it hands out (its `on_evict` hook, block_pool.py), since the block is about to
hold other tokens. A freed block stays in the index (it can still be hit) until it is reused.

Duplicates are registered too, as in vLLM (vllm/v1/core/block_pool.py@002f349, `cache_full_blocks` and
`get_cached_block`): a request whose prompt another one already cached gets a fresh block for its last
tokens (block tables only grow, so the fresh block is never swapped for the cached one), and that block
holds the same hash. A hit takes the block registered first among those still there; when it is taken from
the pool, the next one serves the hits.
"""
from __future__ import annotations


class BlockHashIndex:
    """(group_id, block_hash) -> its blocks in the order they were registered, and block id -> the
    (group_id, block_hash) it holds."""

    def __init__(self):
        self.hash_to_blocks: dict[tuple[int, int], list[int]] = {}
        self.block_to_hash: dict[int, tuple[int, int]] = {}

    def get(self, group_id: int, block_hash: int) -> int | None:
        """The first registered block that holds `block_hash` for group `group_id`, or None."""
        blocks = self.hash_to_blocks.get((group_id, block_hash))
        return blocks[0] if blocks else None

    def insert(self, group_id: int, block_hash: int, block: int) -> None:
        """Record that `block` holds `block_hash` for `group_id`, after any block that holds it already."""
        key = (group_id, block_hash)
        held = self.block_to_hash.get(block)
        if held == key:
            return
        if held is not None:
            raise ValueError(f"block {block}: expected a block that holds no hash, got one holding {held} "
                             f"(the pool drops it when it hands the block out)")
        self.hash_to_blocks.setdefault(key, []).append(block)
        self.block_to_hash[block] = key

    def drop(self, block: int) -> None:
        """Forget what `block` held: the pool just handed it out for other tokens (`BlockPool.on_evict`)."""
        key = self.block_to_hash.pop(block, None)
        if key is None:
            return
        blocks = self.hash_to_blocks[key]
        blocks.remove(block)
        if not blocks:
            del self.hash_to_blocks[key]
