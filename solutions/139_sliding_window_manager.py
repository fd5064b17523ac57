# ruff: noqa: E501  (the stub's generated raise line in find_longest_cache_hit is 111 columns)
"""Exercise 139 (hard): the sliding-window group of a hybrid KV cache. Notebook 19, "Hybrid models".
Grade: python practice/judge.py 139

vLLM's `SlidingWindowManager` (vllm/v1/core/single_type_kv_cache_manager.py@002f349) over the course's
BlockPool (notebook 02). A sliding-window layer's query at position p reads positions p - W + 1 .. p only
(W = sliding_window, its own token included). The manager keeps one block table per request (table entry i
holds tokens i * block_size .. (i + 1) * block_size - 1) and, once `num_computed_tokens` tokens are
computed, frees the blocks that no later query reads: those wholly below position
num_computed_tokens - W + 1. `null_block` (a block the caller took from the pool, never freed, never
touched) takes their place in the table. A prefix hit of L tokens needs only what the query at position L
reads: the last ceil((W - 1) / block_size) blocks before L, all cached; search from the RIGHT (a run of
cached blocks that reaches the first block is a hit too, however short).

Prefix cache: `cache_blocks` registers full blocks under their hash (block_hashes[i] is the chained hash of
block i, given by the caller), every one, a duplicate too: a request whose prompt is already cached gets a
fresh block for its last tokens (block tables only grow, so it is not swapped for the cached one), and that
block is registered beside the first, as vLLM's BlockPool does (block_pool.py@002f349). A hit takes the
block registered FIRST among those a hash still names. A freed block stays registered (it can be hit, and a
hit takes it back from the free queue with pool.touch) until it is taken from the pool again for other
tokens: then its hash no longer names it, and the next block registered under that hash serves the hits.

What the judge reads after every call: what each method returns, `block_tables` (request id -> list of
block ids, null_block included), the pool's free queue (in order) and reference counts.
"""
from __future__ import annotations

from pagedkv_lib.core.block_pool import BlockPool


class SlidingWindowManager:
    """The KV cache group of sliding-window layers: `pool` is shared with other groups.

    Example (block_size 4, sliding_window 5, a fresh BlockPool(10) whose block 0 the caller took as the
    null block): allocate_slots("a", 12) returns [1, 2, 3]; cache_blocks("a", hashes, 12) registers them
    under hashes[0], hashes[1], hashes[2]; remove_skipped_blocks("a", 12) returns [2, 1]: the next query, at
    position 12, reads positions 8 .. 12, so the entries of positions 0 .. 7 go and block_tables["a"] is
    [0, 0, 3]. For a request with the same tokens, find_longest_cache_hit(hashes, 11) returns [0, 2]: a hit
    of 8 tokens, whose next query (position 8) reads positions 4 .. 7, held by block 2, freed but cached.
    """

    def __init__(self, pool: BlockPool, block_size: int, sliding_window: int, null_block: int):
        # BEGIN SOLUTION
        self.pool = pool
        self.block_size = block_size
        self.sliding_window = sliding_window
        self.null_block = null_block
        self.block_tables: dict[str, list[int]] = {}
        self.hash_to_blocks: dict[int, list[int]] = {}    # hash -> its blocks, the first registered first
        self.block_to_hash: dict[int, int] = {}
        self.num_cached_blocks: dict[str, int] = {}
        self.num_window_blocks = -(-(sliding_window - 1) // block_size)
        # END SOLUTION

    def allocate_slots(self, request_id: str, num_tokens: int, computed_blocks=()) -> list[int] | None:
        """Extend the request's table to ceil(num_tokens / block_size) entries; return the fresh blocks.

        A new request may bring `computed_blocks` (a hit from find_longest_cache_hit): they start its
        table, and each one that is not the null block gains a reference (pool.touch). Fresh blocks come
        from pool.allocate. Returns None, and changes nothing, when the pool has fewer free blocks than the
        fresh blocks plus the hit's blocks that are free (ref count 0).
        """
        # BEGIN SOLUTION
        computed_blocks = list(computed_blocks)
        table = self.block_tables.get(request_id, computed_blocks)
        num_fresh = max(0, -(-num_tokens // self.block_size) - len(table))
        reused_free = 0
        if request_id not in self.block_tables:
            reused_free = sum(1 for b in computed_blocks
                              if b != self.null_block and self.pool.ref_count(b) == 0)
        if self.pool.num_free() < num_fresh + reused_free:
            return None
        if request_id not in self.block_tables:
            self.pool.touch([b for b in computed_blocks if b != self.null_block])
            self.block_tables[request_id] = table
            self.num_cached_blocks[request_id] = len(computed_blocks)
        fresh = self.pool.allocate(num_fresh)
        for b in fresh:
            old = self.block_to_hash.pop(b, None)      # reused for other tokens: its hash is stale
            if old is not None:
                self.hash_to_blocks[old].remove(b)
        table.extend(fresh)
        return fresh
        # END SOLUTION

    def cache_blocks(self, request_id: str, block_hashes: list[int], num_tokens: int) -> None:
        """Register the request's full blocks among its first `num_tokens` tokens (null entries skipped)."""
        # BEGIN SOLUTION
        table = self.block_tables[request_id]
        num_full = min(num_tokens // self.block_size, len(block_hashes), len(table))
        for i in range(self.num_cached_blocks[request_id], num_full):
            b, h = table[i], block_hashes[i]
            if b != self.null_block:
                self.hash_to_blocks.setdefault(h, []).append(b)
                self.block_to_hash[b] = h
        self.num_cached_blocks[request_id] = max(self.num_cached_blocks[request_id], num_full)
        # END SOLUTION

    def remove_skipped_blocks(self, request_id: str, num_computed_tokens: int) -> list[int]:
        """Free the blocks wholly below position num_computed_tokens - sliding_window + 1, the newest first
        (pool.free: one reference each), the null block in their place; return them. A block is never
        freed twice: stop at the first null entry, everything left of it went before."""
        # BEGIN SOLUTION
        table = self.block_tables[request_id]
        num_skipped = max(0, num_computed_tokens - self.sliding_window + 1) // self.block_size
        removed = []
        for i in range(min(num_skipped, len(table)) - 1, -1, -1):
            if table[i] == self.null_block:
                break
            removed.append(table[i])
            table[i] = self.null_block
        self.pool.free(removed)
        return removed
        # END SOLUTION

    def free(self, request_id: str) -> None:
        """Drop the request's references, last block first, never the null block; forget its table."""
        # BEGIN SOLUTION
        table = self.block_tables.pop(request_id)
        self.num_cached_blocks.pop(request_id)
        self.pool.free([b for b in reversed(table) if b != self.null_block])
        # END SOLUTION

    def find_longest_cache_hit(self, block_hashes: list[int], max_length: int) -> list[int]:
        """The hit's table: the cached blocks of the longest prefix of at most `max_length` tokens (a
        multiple of block_size) whose window is cached, null_block left of the window. Changes nothing."""
        # BEGIN SOLUTION
        num_blocks = min(max_length // self.block_size, len(block_hashes))
        hits = [self.null_block] * num_blocks
        if self.num_window_blocks == 0:
            return hits
        run = 0
        for i in range(num_blocks - 1, -1, -1):
            blocks = self.hash_to_blocks.get(block_hashes[i])
            if not blocks:
                run = 0
                continue
            hits[i] = blocks[0]
            run += 1
            if run >= self.num_window_blocks:
                return hits[: i + run]
        return hits[:run]
        # END SOLUTION
