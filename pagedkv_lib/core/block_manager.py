"""BlockManager with prefix caching, in nano-vllm's interface (`nanovllm/engine/block_manager.py`), over one
`BlockPool` (block_pool.py), as vLLM v1 layers its KV cache manager over one `BlockPool`.

The pool holds the free queue and the reference counts; the manager holds what prefix caching adds: each
block's hash and tokens, `hash_to_block_id`, and the sequences' block tables. A FULL block is identified by
a chained hash: xxh64 over the previous block's hash (8 bytes, little endian; none for the first block)
and this block's token ids. A later request whose prompt starts with the same tokens finds those blocks
through `hash_to_block_id` and shares them (one more reference) instead of recomputing them. Rules, each
one a bug some engine shipped (docs/engines.md, "Known pitfalls"):
- only full blocks are hashed; a hit needs the hash AND the token ids to match;
- at most num_tokens - 1 tokens come from the cache, so a step always has a token to compute (vLLM's cap);
- freed blocks keep hash and tokens (they can still be hit) until reused; reuse drops the stale entry;
- `deallocate` frees in reverse, so a sequence's last blocks are reused first and its prefix survives longest.

Speculative decoding (notebook 20) asks `can_append` / `may_append` for `num_lookahead_tokens` more slots:
the blocks of the draft tokens are allocated with the step, but only the block filled by the VERIFIED token
at len - 1 is hashed here; what the verification accepts is hashed, and what it rejects released, by
`rollback.truncate` (vLLM V1's `allocate_slots(..., num_lookahead_tokens)` caches only up to
`request.num_tokens`, which counts no draft token: `vllm/v1/core/kv_cache_manager.py`).
"""
from __future__ import annotations

import numpy as np
import xxhash

from .block_pool import BlockPool
from .sequence import Sequence
from .validation import check_positive_int


def num_new_blocks(num_tokens: int, block_size: int, num_lookahead_tokens: int = 0) -> int:
    """How many of the positions a decode step writes, p = num_tokens - 1 .. num_tokens - 1 + lookahead,
    start a block (p % block_size == 0): without lookahead, 1 when the new token at num_tokens - 1 opens a
    block, else 0. The one test every block manager and the serving instance use for "does this token start
    a new block" (nano-vllm writes it `len(seq) % block_size == 1`, which never holds at block_size 1)."""
    if isinstance(num_lookahead_tokens, bool) or not isinstance(num_lookahead_tokens, int) \
            or num_lookahead_tokens < 0:
        raise ValueError(f"num_lookahead_tokens: expected an int >= 0, got {num_lookahead_tokens!r}")
    first = num_tokens - 1
    last = num_tokens - 1 + num_lookahead_tokens
    return last // block_size - (first - 1) // block_size


class Block:
    """What the prefix cache knows of one physical block; its reference count lives in the pool."""

    def __init__(self, block_id: int, pool: BlockPool):
        self.block_id = block_id
        self.hash = -1
        self.token_ids: list[int] = []
        self._pool = pool

    @property
    def ref_count(self) -> int:
        return self._pool.ref_counts[self.block_id]

    def update(self, hash: int, token_ids: list[int]) -> None:
        self.hash = hash
        self.token_ids = list(token_ids)

    def reset(self) -> None:
        self.hash = -1
        self.token_ids = []

    def __repr__(self) -> str:
        shown = "-1" if self.hash == -1 else f"{self.hash:#x}"
        return f"Block(id={self.block_id}, ref={self.ref_count}, hash={shown})"


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int):
        check_positive_int("num_blocks", num_blocks)
        check_positive_int("block_size", block_size)
        self.block_size = block_size
        self.pool = BlockPool(num_blocks)
        self.blocks = [Block(i, self.pool) for i in range(num_blocks)]
        self.hash_to_block_id: dict[int, int] = {}

    @property
    def free_block_ids(self):
        """The pool's free queue (front: allocated next)."""
        return self.pool.free_block_ids

    @property
    def used_block_ids(self) -> set[int]:
        return {b for b, ref in enumerate(self.pool.ref_counts) if ref > 0}

    @property
    def num_free_blocks(self) -> int:
        return self.pool.num_free()

    @classmethod
    def compute_hash(cls, token_ids: list[int], prefix: int = -1) -> int:
        """xxh64 of the parent block's hash (if any) followed by the token ids as int64."""
        h = xxhash.xxh64()
        if prefix != -1:
            h.update(prefix.to_bytes(8, "little"))
        h.update(np.array(token_ids, dtype=np.int64).tobytes())
        return h.intdigest()

    def _new_block(self) -> Block:
        """The block at the front of the pool's free queue, its stale hash entry dropped."""
        (block_id,) = self.pool.allocate(1)
        block = self.blocks[block_id]
        if block.hash != -1 and self.hash_to_block_id.get(block.hash) == block_id:
            del self.hash_to_block_id[block.hash]     # stale: the block is about to hold other tokens
        block.reset()
        return block

    def _cached_blocks(self, seq: Sequence) -> list[int]:
        """Ids of the longest run of leading blocks found in the cache (hash and tokens equal)."""
        hits, h = [], -1
        for i in range((seq.num_tokens - 1) // self.block_size):   # full blocks, last token excluded
            token_ids = seq.block(i)
            h = self.compute_hash(token_ids, h)
            block_id = self.hash_to_block_id.get(h, -1)
            if block_id == -1 or self.blocks[block_id].token_ids != token_ids:
                break
            hits.append(block_id)
        return hits

    def can_allocate(self, seq: Sequence) -> bool:
        """Enough free blocks for the misses and for the hits that sit in the free queue."""
        hits = self._cached_blocks(seq)
        reused_free = sum(1 for b in hits if self.blocks[b].ref_count == 0)
        return self.pool.num_free() >= seq.num_blocks - len(hits) + reused_free

    def allocate(self, seq: Sequence) -> None:
        """Give `seq` a block table: cached blocks for its prefix, fresh blocks for the rest."""
        if seq.block_table:
            raise ValueError(f"seq {seq.seq_id} already has a block table {seq.block_table}")
        hits = self._cached_blocks(seq)
        h = -1
        for i in range(seq.num_blocks):
            token_ids = seq.block(i)
            h = self.compute_hash(token_ids, h) if len(token_ids) == self.block_size else -1
            if i < len(hits):                                     # shared, or taken back from the queue
                self.pool.touch([hits[i]])
                block = self.blocks[hits[i]]
                seq.num_cached_tokens += self.block_size
            else:
                block = self._new_block()
                if h != -1:
                    block.update(h, token_ids)
                    self.hash_to_block_id[h] = block.block_id
            seq.block_table.append(block.block_id)

    def deallocate(self, seq: Sequence) -> None:
        """Drop the sequence's references, last block first (blocks reaching 0 join the free queue's end)."""
        for block_id in reversed(seq.block_table):
            self.pool.free([block_id])
        seq.num_cached_tokens = 0
        seq.block_table.clear()

    def can_append(self, seq: Sequence, num_lookahead_tokens: int = 0) -> bool:
        """One free block is needed when the token at position len - 1 starts a new block (more with
        lookahead slots for draft tokens)."""
        return self.pool.num_free() >= num_new_blocks(len(seq), self.block_size, num_lookahead_tokens)

    def may_append(self, seq: Sequence, num_lookahead_tokens: int = 0) -> None:
        """Before a decode step writes position len - 1 (and, speculating, the draft positions after it):
        add the blocks it starts (`num_new_blocks`), hash a block the verified token at len - 1 fills."""
        block_table = seq.block_table
        for _ in range(num_new_blocks(len(seq), self.block_size, num_lookahead_tokens)):
            block_table.append(self._new_block().block_id)
        if len(seq) % self.block_size == 0:
            i = len(seq) // self.block_size - 1                     # the block that position len - 1 fills
            last = self.blocks[block_table[i]]
            prefix = self.blocks[block_table[i - 1]].hash if i > 0 else -1
            token_ids = seq.block(i)
            h = self.compute_hash(token_ids, prefix)
            last.update(h, token_ids)
            self.hash_to_block_id[h] = last.block_id
