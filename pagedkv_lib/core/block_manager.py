"""BlockManager with prefix caching, in nano-vllm's interface (`nanovllm/engine/block_manager.py`).

A FULL block is identified by a chained hash: xxh64 over the previous block's hash (8 bytes, little
endian; none for the first block) and this block's token ids. A later request whose prompt starts with the
same tokens finds those blocks through `hash_to_block_id` and shares them (ref_count + 1) instead of
recomputing them. Rules, each one a bug some engine shipped (see ENGINES.md, "Known pitfalls"):
- only full blocks are hashed; a hit needs the hash AND the token ids to match;
- at most num_tokens - 1 tokens come from the cache, so a step always has a token to compute (vLLM's cap);
- freed blocks keep hash and tokens (they can still be hit) until reused; reuse drops the stale entry;
- `deallocate` frees in reverse, so a sequence's last blocks are reused first and its prefix survives longest.
"""
from __future__ import annotations

from collections import deque

import numpy as np
import xxhash

from .sequence import Sequence
from .validation import check_positive_int


class Block:
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

    def __repr__(self) -> str:
        shown = "-1" if self.hash == -1 else f"{self.hash:#x}"
        return f"Block(id={self.block_id}, ref={self.ref_count}, hash={shown})"


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int):
        check_positive_int("num_blocks", num_blocks)
        check_positive_int("block_size", block_size)
        self.block_size = block_size
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.hash_to_block_id: dict[int, int] = {}
        self.free_block_ids: deque[int] = deque(range(num_blocks))
        self.used_block_ids: set[int] = set()

    @classmethod
    def compute_hash(cls, token_ids: list[int], prefix: int = -1) -> int:
        """xxh64 of the parent block's hash (if any) followed by the token ids as int64."""
        h = xxhash.xxh64()
        if prefix != -1:
            h.update(prefix.to_bytes(8, "little"))
        h.update(np.array(token_ids, dtype=np.int64).tobytes())
        return h.intdigest()

    def _allocate_block(self, block_id: int) -> Block:
        block = self.blocks[block_id]
        assert block.ref_count == 0, f"block {block_id} is in use"
        if block.hash != -1 and self.hash_to_block_id.get(block.hash) == block_id:
            del self.hash_to_block_id[block.hash]     # stale: the block is about to hold other tokens
        block.reset()
        self.free_block_ids.remove(block_id)
        self.used_block_ids.add(block_id)
        return block

    def _deallocate_block(self, block_id: int) -> None:
        assert self.blocks[block_id].ref_count == 0
        self.used_block_ids.remove(block_id)
        self.free_block_ids.append(block_id)

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
        return len(self.free_block_ids) >= seq.num_blocks - len(hits) + reused_free

    def allocate(self, seq: Sequence) -> None:
        """Give `seq` a block table: cached blocks for its prefix, fresh blocks for the rest."""
        if seq.block_table:
            raise ValueError(f"seq {seq.seq_id} already has a block table {seq.block_table}")
        hits = self._cached_blocks(seq)
        h = -1
        for i in range(seq.num_blocks):
            token_ids = seq.block(i)
            h = self.compute_hash(token_ids, h) if len(token_ids) == self.block_size else -1
            if i < len(hits) and hits[i] in self.used_block_ids:
                block = self.blocks[hits[i]]                      # shared with a running sequence
                block.ref_count += 1
            else:                                                 # a freed hit is taken back from the queue
                block = self._allocate_block(hits[i] if i < len(hits) else self.free_block_ids[0])
                if h != -1:
                    block.update(h, token_ids)
                    self.hash_to_block_id[h] = block.block_id
            seq.num_cached_tokens += self.block_size if i < len(hits) else 0
            seq.block_table.append(block.block_id)

    def deallocate(self, seq: Sequence) -> None:
        for block_id in reversed(seq.block_table):
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                self._deallocate_block(block_id)
        seq.num_cached_tokens = 0
        seq.block_table.clear()

    def can_append(self, seq: Sequence) -> bool:
        """One free block is needed when the token at position len - 1 starts a new block."""
        return len(self.free_block_ids) >= ((len(seq) - 1) % self.block_size == 0)

    def may_append(self, seq: Sequence) -> None:
        """Before a decode step writes position len - 1: add a block if it starts one, hash a block it fills.

        nano-vllm writes the first test as `len(seq) % block_size == 1`, which never holds at block_size 1.
        """
        block_table = seq.block_table
        if (len(seq) - 1) % self.block_size == 0:
            block = self._allocate_block(self.free_block_ids[0])
            block_table.append(block.block_id)
        if len(seq) % self.block_size == 0:
            last = self.blocks[block_table[-1]]
            prefix = self.blocks[block_table[-2]].hash if len(block_table) > 1 else -1
            token_ids = seq.block(seq.num_blocks - 1)
            h = self.compute_hash(token_ids, prefix)
            last.update(h, token_ids)
            self.hash_to_block_id[h] = last.block_id

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_block_ids)
