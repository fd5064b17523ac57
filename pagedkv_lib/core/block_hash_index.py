"""BlockHashIndex: which physical block holds which full block of tokens, per KV cache group.

vLLM keeps one map from a block hash to its block in its BlockPool (`cached_block_hash_to_block`), keyed by
the hash AND the KV cache group, so that the same tokens of different groups are cached and evicted
independently (vllm-project/vllm@1153c0c:docs/design/hybrid_kv_cache_manager.md, "Prefix caching"). The
course's BlockPool holds no hashes (block_pool.py), so the groups of a hybrid model share this index instead:
a group registers a full block under (group_id, block_hash) once its tokens are computed, and whoever takes a
block from the pool calls `drop(block)` first, since the block is about to hold other tokens. A freed block
stays in the index (it can still be hit) until it is reused.
"""
from __future__ import annotations


class BlockHashIndex:
    """(group_id, block_hash) -> block id, and block id -> the (group_id, block_hash) it holds."""

    def __init__(self):
        self.hash_to_block: dict[tuple[int, int], int] = {}
        self.block_to_hash: dict[int, tuple[int, int]] = {}

    def get(self, group_id: int, block_hash: int) -> int | None:
        """The block that holds `block_hash` for group `group_id`, or None."""
        return self.hash_to_block.get((group_id, block_hash))

    def insert(self, group_id: int, block_hash: int, block: int) -> None:
        """Record that `block` holds `block_hash` for `group_id` (the first block to hold it keeps it: block
        tables are append-only, so a duplicate full block is not swapped for the cached one, as in vLLM)."""
        key = (group_id, block_hash)
        if key in self.hash_to_block or block in self.block_to_hash:
            return
        self.hash_to_block[key] = block
        self.block_to_hash[block] = key

    def drop(self, block: int) -> None:
        """Forget what `block` held: it was just taken from the pool for other tokens."""
        key = self.block_to_hash.pop(block, None)
        if key is not None:
            del self.hash_to_block[key]
