"""BlockPool: the physical blocks of a paged KV cache, a free queue and a reference count per block.

What it shares with vLLM's `BlockPool` (`vllm/v1/core/block_pool.py`): the free queue, its order and the
reference counts. Blocks are handed out from the FRONT of the free queue (vLLM's `get_new_blocks`), a block
whose last reference is dropped goes to its END (`free_blocks`), so the most recently freed blocks are reused
last (they may still be worth a prefix hit), and `touch` takes a free block back out of the queue for a
prefix hit. (Newer vLLM trees return freed blocks that hold no hash to the front instead.)
What it leaves out: vLLM's pool also holds the prefix cache, the map from a block hash to its block
(`cached_block_hash_to_block`), and its block 0 is a null block, never handed out, that stands in for skipped
blocks. Here the prefix cache lives with whoever keeps one (`BlockManager`'s `hash_to_block_id`, the hybrid
groups' `BlockHashIndex`), and every block can be handed out.
What it keeps of vLLM's eviction: a free block may still be cached (it keeps its hash until it is reused), so
`allocate` passes each block it takes to `on_evict`, the hook the cache's owner gave, which drops the block's
stale entry and may do more (the CPU tier writes the block out first: tiered_block_manager.py); vLLM's pool
calls `_maybe_evict_cached_block` on each block it pops (vllm/v1/core/block_pool.py@002f349,
`get_new_block_bundles`). No hook: nothing is cached, nothing to drop.
It is the one allocator of the library: BlockManager keeps its prefix cache and block tables over a
BlockPool, and fork / copy-on-write (copy_on_write.py) work on one directly.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable


class BlockPool:
    """`num_blocks` physical blocks with ids 0..num_blocks-1, all free at the start."""

    def __init__(self, num_blocks: int, on_evict: Callable[[int], None] | None = None):
        if isinstance(num_blocks, bool) or not isinstance(num_blocks, int) or num_blocks < 0:
            raise ValueError(f"num_blocks: expected an int >= 0, got {num_blocks!r}")
        self.num_blocks = num_blocks
        self.free_block_ids: deque[int] = deque(range(num_blocks))
        self.ref_counts: list[int] = [0] * num_blocks
        self.on_evict = on_evict        # called with each block allocate hands out (module docstring)

    def num_free(self) -> int:
        return len(self.free_block_ids)

    def ref_count(self, block: int) -> int:
        self._check_id(block)
        return self.ref_counts[block]

    def allocate(self, n: int) -> list[int] | None:
        """Take n blocks from the front of the free queue, each with one reference, one after the other,
        each passed to `on_evict` (when set) as it is taken: its cached tokens are evicted.

        Returns None, and changes nothing, when fewer than n blocks are free.
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n: expected an int >= 0, got {n!r}")
        if n > len(self.free_block_ids):
            return None
        blocks = []
        for _ in range(n):
            b = self.free_block_ids.popleft()
            self.ref_counts[b] = 1
            if self.on_evict is not None:
                self.on_evict(b)
            blocks.append(b)
        return blocks

    def free(self, blocks: list[int]) -> None:
        """Drop one reference to each block; a block reaching 0 goes to the END of the free queue.

        Freeing a block that is already free raises ValueError; the check runs before anything changes,
        counting repeats in `blocks` (freeing [5, 5] needs two references to block 5).
        """
        blocks = list(blocks)
        for b in blocks:
            self._check_id(b)
        for b in set(blocks):
            if blocks.count(b) > self.ref_counts[b]:
                raise ValueError(
                    f"free: block {b} has {self.ref_counts[b]} reference(s), asked to drop {blocks.count(b)}"
                    " (double free?)"
                )
        for b in blocks:
            self.ref_counts[b] -= 1
            if self.ref_counts[b] == 0:
                self.free_block_ids.append(b)

    def touch(self, blocks: list[int]) -> None:
        """One more reference to each block; a free block leaves the free queue from wherever it sits (a
        prefix-cache hit on a freed block takes it back; vLLM's `BlockPool.touch`)."""
        for b in blocks:
            self._check_id(b)
        for b in blocks:
            if self.ref_counts[b] == 0:
                self.free_block_ids.remove(b)
            self.ref_counts[b] += 1

    def fork(self, block_table: list[int]) -> list[int]:
        """A new table with the same blocks, each gaining one reference (a child sequence shares them)."""
        for b in block_table:
            self._check_id(b)
            if self.ref_counts[b] == 0:
                raise ValueError(f"fork: block {b} is free, a table can only hold allocated blocks")
        for b in block_table:
            self.ref_counts[b] += 1
        return list(block_table)

    def _check_id(self, block: int) -> None:
        if isinstance(block, bool) or not isinstance(block, int) or not 0 <= block < self.num_blocks:
            raise ValueError(f"block id: expected an int in [0, {self.num_blocks}), got {block!r}")

    def __repr__(self) -> str:
        return f"BlockPool(num_blocks={self.num_blocks}, num_free={self.num_free()})"
