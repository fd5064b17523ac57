"""Exercise 129 (hard): a prefix-caching block manager. Notebook 07, "Prefix caching".
Grade: python practice/judge.py 129

nano-vllm's `BlockManager` (nanovllm/engine/block_manager.py), with two fixes real engines needed: a hit is
capped so that at least one token is left to compute, and at block_size 1 `may_append` still works.
A FULL block is identified by a chained hash over the previous block's hash and its own token ids, so the
same tokens after a different prefix get a different hash. A later request whose prompt starts with the same
full blocks shares them (ref_count + 1) instead of recomputing them. The judge reads the attributes below
after every call, and overrides `compute_hash` in a subclass to force hash collisions: hash blocks only
through `self.compute_hash`. The judge calls only the public methods; `_cached_blocks` and `_allocate_block`
are suggested helpers.

    blocks: list[Block]              Block (given below, nano-vllm's) has block_id, ref_count, hash
                                     (-1 unless the block is full and hashed), token_ids
    hash_to_block_id: dict[int, int] hash of a full block -> the block that holds it
    free_block_ids: deque[int]       the free queue: allocate from the front, freed blocks to the back
    used_block_ids: set[int]         blocks with ref_count > 0
"""
from __future__ import annotations

from pagedkv_lib.core.sequence import Sequence


class Block:
    """nano-vllm's Block, given: ref_count 0, hash -1, no tokens until allocated."""

    def __init__(self, block_id: int):
        self.block_id = block_id
        self.ref_count = 0
        self.hash = -1
        self.token_ids: list[int] = []

    def update(self, hash: int, token_ids: list[int]) -> None:
        self.hash = hash
        self.token_ids = list(token_ids)

    def reset(self) -> None:
        self.ref_count = 1
        self.hash = -1
        self.token_ids = []


class BlockManager:
    """Blocks 0..num_blocks-1 of block_size tokens; all free at first, queue order 0..num_blocks-1.

    Example (block_size 4): A = Sequence(list(range(10)), 4); allocate(A) gives A.block_table [0, 1, 2] and
    hashes blocks 0 and 1 (full); B = Sequence(list(range(8)) + [70, 71, 72], 4) then hits blocks 0 and 1:
    allocate(B) gives [0, 1, 3], B.num_cached_tokens == 8, blocks 0 and 1 have ref_count 2.
    """

    def __init__(self, num_blocks: int, block_size: int):
        raise NotImplementedError("BlockManager.__init__: your code here (exercise 129)")

    @classmethod
    def compute_hash(cls, token_ids: list[int], prefix: int = -1) -> int:
        """xxhash.xxh64, updated with prefix.to_bytes(8, "little") unless prefix == -1, then with
        np.array(token_ids, dtype=np.int64).tobytes(); returns its intdigest() (an int in [0, 2**64))."""
        raise NotImplementedError("BlockManager.compute_hash: your code here (exercise 129)")

    def _cached_blocks(self, seq: Sequence) -> list[int]:
        """Ids of the longest run of leading FULL blocks found in the cache, hash AND token ids equal,
        looking at blocks 0 .. (num_tokens - 1) // block_size - 1 only (so at most num_tokens - 1 tokens
        come from the cache: the last token is always computed)."""
        raise NotImplementedError("BlockManager._cached_blocks: your code here (exercise 129)")

    def _allocate_block(self, block_id: int) -> Block:
        """Take free block `block_id` out of the free queue: ref_count 1, hash -1, token_ids [], and drop
        its old entry from hash_to_block_id if that entry still points at it (a stale hash)."""
        raise NotImplementedError("BlockManager._allocate_block: your code here (exercise 129)")

    def can_allocate(self, seq: Sequence) -> bool:
        """True if the free queue holds enough blocks for seq's misses plus its hits that are free
        (ref_count 0: they must be taken out of the queue). Changes nothing."""
        raise NotImplementedError("BlockManager.can_allocate: your code here (exercise 129)")

    def allocate(self, seq: Sequence) -> None:
        """Give seq (empty block_table, can_allocate true) one block per logical block, in order:
        - a hit in use: ref_count + 1; a hit that is free: _allocate_block(it), then hash it again;
        - a miss: _allocate_block(free_block_ids[0]); if the block is full, set its hash (chained on the
          previous block's hash) and token_ids and map hash_to_block_id[hash] to it.
        seq.num_cached_tokens grows by block_size per hit; seq.block_table gets the ids.
        """
        raise NotImplementedError("BlockManager.allocate: your code here (exercise 129)")

    def deallocate(self, seq: Sequence) -> None:
        """Drop one reference to each of seq's blocks, LAST block first; a block reaching 0 goes to the end
        of free_block_ids, keeping its hash and token_ids (it can still be hit until reused). Then
        seq.num_cached_tokens = 0 and seq.block_table is emptied (in place)."""
        raise NotImplementedError("BlockManager.deallocate: your code here (exercise 129)")

    def can_append(self, seq: Sequence) -> bool:
        """Before a decode step (its new token already appended to seq): True if a free block exists or
        none is needed. A block is needed when the token at position len(seq) - 1 starts one,
        (len(seq) - 1) % block_size == 0."""
        raise NotImplementedError("BlockManager.can_append: your code here (exercise 129)")

    def may_append(self, seq: Sequence) -> None:
        """Before a decode step writes position len(seq) - 1 (can_append was true):
        - if that position starts a block ((len(seq) - 1) % block_size == 0): _allocate_block of
          free_block_ids[0], appended to seq.block_table;
        - if it fills the last block (len(seq) % block_size == 0): hash that block, chained on the hash of
          the block before it (-1 for the first), set its hash and token_ids, map hash_to_block_id to it.
        At block_size 1 both happen (nano-vllm's `len(seq) % block_size == 1` never holds there).
        """
        raise NotImplementedError("BlockManager.may_append: your code here (exercise 129)")
