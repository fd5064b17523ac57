"""Exercise 127 (medium): block pool, fork and copy-on-write. Notebook 08, "Fork and copy-on-write".
Grade: python practice/judge.py 127

A pool of physical blocks with a free queue and a reference count per block (vLLM's `BlockPool`, without
the prefix cache). Parallel sampling forks a sequence: the child shares the parent's blocks, one reference
more each. Before a sequence writes into a block it shares, it takes a private copy (copy-on-write, the
PagedAttention paper, section 4.4). The judge holds you to every line of these contracts.
Shapes: docs/conventions.md.
"""
from __future__ import annotations

# BEGIN SOLUTION
from collections import deque

# END SOLUTION
import torch


class BlockPool:
    """`num_blocks` physical blocks with ids 0..num_blocks-1, all free at the start, in that queue order.

    Example: pool = BlockPool(8); pool.allocate(3) == [0, 1, 2]; pool.allocate(2) == [3, 4];
        pool.free([0, 1, 2]); pool.allocate(4) == [5, 6, 7, 0]; pool.num_free() == 2.
    """

    def __init__(self, num_blocks: int):
        """num_blocks: int >= 1. Every block starts free with 0 references; the free queue is 0..N-1."""
        # BEGIN SOLUTION
        self.free_block_ids = deque(range(num_blocks))
        self.ref_counts = [0] * num_blocks
        # END SOLUTION

    def num_free(self) -> int:
        """How many blocks are in the free queue (an int)."""
        # BEGIN SOLUTION
        return len(self.free_block_ids)
        # END SOLUTION

    def ref_count(self, block: int) -> int:
        """The references to `block` (an int, 0 for a free block). block is a valid id."""
        # BEGIN SOLUTION
        return self.ref_counts[block]
        # END SOLUTION

    def allocate(self, n: int) -> list[int] | None:
        """Take n blocks (n >= 0) from the FRONT of the free queue, in queue order, each with 1 reference.

        Returns: a new list of n block ids; or None, changing nothing at all, if fewer than n are free.
        """
        # BEGIN SOLUTION
        if n > len(self.free_block_ids):
            return None
        blocks = [self.free_block_ids.popleft() for _ in range(n)]
        for b in blocks:
            self.ref_counts[b] = 1
        return blocks
        # END SOLUTION

    def free(self, blocks: list[int]) -> None:
        """Drop one reference to each block of `blocks` (a list of valid ids, read-only; repeats count).

        A block whose count reaches 0 is appended to the END of the free queue, in the order of `blocks`.
        Errors: ValueError if some block would drop below 0 references (a double free, e.g. freeing a free
        block, or [5, 5] when block 5 has one reference); then nothing changes at all.
        """
        # BEGIN SOLUTION
        for b in set(blocks):
            if blocks.count(b) > self.ref_counts[b]:
                raise ValueError(f"free: block {b} has {self.ref_counts[b]} reference(s), "
                                 f"asked to drop {blocks.count(b)} (double free?)")
        for b in blocks:
            self.ref_counts[b] -= 1
            if self.ref_counts[b] == 0:
                self.free_block_ids.append(b)
        # END SOLUTION

    def fork(self, block_table: list[int]) -> list[int]:
        """A NEW list with the same blocks (a child sequence's table); each block gains one reference.

        block_table lists allocated blocks and is read-only: the child's table must not alias it.
        """
        # BEGIN SOLUTION
        for b in block_table:
            self.ref_counts[b] += 1
        return list(block_table)
        # END SOLUTION


def append_slot(pool: BlockPool, kv_cache: torch.Tensor, block_table: list[int], num_tokens: int,
                block_size: int) -> int | None:
    """Make room for the token at position `num_tokens` of a sequence that holds num_tokens tokens.

    Args:
        pool: the BlockPool that owns every block of block_table.
        kv_cache: [2, L, N, S, H_kv, D] (K = kv_cache[0], V = kv_cache[1]), S == block_size.
        block_table: the sequence's blocks, len(block_table) == ceil(num_tokens / block_size).
        num_tokens: int >= 0; block_size: int >= 1.
    Does:
        - if position num_tokens starts a new block (num_tokens % block_size == 0): allocate one block and
          append it to block_table;
        - else, if the last block is shared (pool.ref_count > 1): copy-on-write: allocate a block, copy the
          old block's K AND V for EVERY layer into it (kv_cache[:, :, new] = kv_cache[:, :, old]), put it in
          the table's last place, and drop one reference to the old block (pool.free([old]));
        - else nothing needs to change.
    Mutates: block_table (in place), kv_cache (only the new block, on copy-on-write), the pool.
    Returns: the slot of position num_tokens, block_table[-1] * block_size + num_tokens % block_size;
        or None, changing nothing at all, when a block is needed and none is free.
    Example: S = 4, table [3, 5] holding 6 tokens, block 5 shared: append_slot(pool, kv, table, 6, 4)
        allocates block 0, copies block 5 into it, table becomes [3, 0], returns 2.
    """
    # BEGIN SOLUTION
    if num_tokens % block_size == 0:                               # the new token opens a block
        new = pool.allocate(1)
        if new is None:
            return None
        block_table.append(new[0])
    elif pool.ref_count(block_table[-1]) > 1:                      # shared: copy before writing
        new = pool.allocate(1)
        if new is None:
            return None
        kv_cache[:, :, new[0]] = kv_cache[:, :, block_table[-1]]   # [2, L, S, H_kv, D]
        pool.free([block_table[-1]])
        block_table[-1] = new[0]
    return block_table[-1] * block_size + num_tokens % block_size
    # END SOLUTION
