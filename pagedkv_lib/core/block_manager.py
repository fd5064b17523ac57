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

Each rule of the index is written once, here, and every user calls it (nano-vllm@bb823b3 likewise hashes in
one method, `hash_blocks`, and drops a stale entry in `_allocate_block`):
- `register_block` gives a full block its chained hash and index entry: `allocate`, `may_append`, rollback
  (rollback.py) and the overlap scheduler's placeholders (engine/future_tokens.py) call it;
- `_evict` drops a reused block's stale entry; the pool calls it on each block it hands out (its `on_evict`
  hook, as vLLM's pool evicts in `get_new_blocks`), so no caller can forget it; a subclass adds to it;
- `cached_prefix` looks the prompt's prefix up, through `_find`, which a tier under the GPU extends
  (tiered_block_manager.py); `block_hashes` chains the hashes of a token list for the hybrid groups.

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
        self.pool = BlockPool(num_blocks, on_evict=self._evict)
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

    def is_cached(self, block_id: int) -> bool:
        """Whether a prefix lookup can find the block: it holds a hash and the index names it for that hash
        (a later block with the same hash takes the entry over)."""
        block = self.blocks[block_id]
        return block.hash != -1 and self.hash_to_block_id.get(block.hash) == block_id

    def register_block(self, seq: Sequence, i: int) -> None:
        """Make block i of seq's table findable: its chained hash (after block i-1's hash) and token ids, and
        the entry hash -> block, which replaces any older one. The one place a block gets a hash.

        Left as it is: a block that holds a hash already (and its entry, wherever that points), a block not
        full, a block whose previous block holds no hash (its chain is not known yet), and a block holding a
        token not known yet (an id < 0, overlap scheduling's placeholder: engine/future_tokens.py registers
        the block once the token is filled in; vLLM likewise caches only up to a request's known tokens)."""
        table = seq.block_table
        block = self.blocks[table[i]]
        token_ids = seq.block(i)
        prefix = self.blocks[table[i - 1]].hash if i > 0 else -1
        if block.hash != -1 or len(token_ids) < self.block_size or (i > 0 and prefix == -1) \
                or min(token_ids) < 0:
            return
        block.update(self.compute_hash(token_ids, prefix), token_ids)
        self.hash_to_block_id[block.hash] = block.block_id

    def _evict(self, block_id: int) -> None:
        """The pool's hook (`BlockPool.on_evict`): it just handed the block out for other tokens, so its stale
        entry goes, if the index still names it, and the block forgets its hash and tokens. The one place a
        block loses its hash; a subclass adds what eviction does besides (TieredBlockManager writes out)."""
        if self.is_cached(block_id):
            del self.hash_to_block_id[self.blocks[block_id].hash]
        self.blocks[block_id].reset()

    def cached_prefix(self, seq: Sequence) -> list[tuple[str, int]]:
        """Where each block of seq's cached prefix is, ("gpu", block id), up to the first full block the cache
        does not hold (hash and token ids equal), at most num_tokens - 1 tokens (vLLM's cap). Changes
        nothing. A tier under the GPU adds its own places (TieredBlockManager's ("cpu", slot))."""
        found, h = [], -1
        for i in range((seq.num_tokens - 1) // self.block_size):   # full blocks, last token excluded
            token_ids = seq.block(i)
            h = self.compute_hash(token_ids, h)
            place = self._find(h, token_ids)
            if place is None:
                break
            found.append(place)
        return found

    def _find(self, block_hash: int, token_ids: list[int]) -> tuple[str, int] | None:
        """("gpu", the block that holds these tokens under this hash), or None."""
        block_id = self.hash_to_block_id.get(block_hash, -1)
        if block_id == -1 or self.blocks[block_id].token_ids != token_ids:
            return None
        return ("gpu", block_id)

    def can_allocate(self, seq: Sequence) -> bool:
        """Enough free blocks for every block not hit on the GPU, and for the GPU hits that sit in the free
        queue."""
        hits = [where for tier, where in self.cached_prefix(seq) if tier == "gpu"]
        reused_free = sum(1 for b in hits if self.blocks[b].ref_count == 0)
        return self.pool.num_free() >= seq.num_blocks - len(hits) + reused_free

    def allocate(self, seq: Sequence) -> None:
        """Give `seq` a block table: GPU hits shared (taken back from the free queue when free), fresh blocks
        for the rest, each full one registered (`register_block`), a hit on another tier loaded into its
        fresh block (`_load`).

        Every hit is taken BEFORE any fresh block, the last block first, so that the prompt's first block
        ends the most recently used (vLLM's `touch` walks the hashes reversed: a prefix outlives its
        continuations): a fresh block evicts from the front of the free queue, and must not take a block
        this prompt is about to use."""
        if seq.block_table:
            raise ValueError(f"seq {seq.seq_id} already has a block table {seq.block_table}")
        found = self.cached_prefix(seq)
        for tier, where in reversed(found):
            self._take_hit(tier, where)
        for i in range(seq.num_blocks):
            tier, where = found[i] if i < len(found) else ("", -1)
            if tier == "gpu":
                seq.block_table.append(where)
                continue
            seq.block_table += self.pool.allocate(1)
            self.register_block(seq, i)
            if tier:
                self._load(tier, where, seq.block_table[i])
        seq.num_cached_tokens += len(found) * self.block_size

    def _take_hit(self, tier: str, where: int) -> None:
        """A GPU hit gains a reference; a free one leaves the free queue (`BlockPool.touch`)."""
        if tier != "gpu":
            raise ValueError(f"tier: expected 'gpu' (this manager has one tier), got {tier!r}")
        self.pool.touch([where])

    def _load(self, tier: str, where: int, block_id: int) -> None:
        """A hit on a tier under the GPU is copied into the fresh block `block_id`; one tier has none."""
        raise ValueError(f"tier: expected 'gpu' (this manager has one tier), got {tier!r} (block {block_id})")

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
        add the blocks it starts (`num_new_blocks`), register a block the verified token at len - 1 fills."""
        seq.block_table += self.pool.allocate(num_new_blocks(len(seq), self.block_size, num_lookahead_tokens))
        if len(seq) % self.block_size == 0:
            self.register_block(seq, len(seq) // self.block_size - 1)   # the block position len - 1 fills


def block_hashes(token_ids: list[int], block_size: int) -> list[int]:
    """The chained hashes of the full blocks of `token_ids` (`BlockManager.compute_hash`), for the hybrid
    groups (kv_cache_coordinator.py): the same tokens hash the same in every group, the index tells the
    groups apart."""
    hashes, h = [], -1
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        h = BlockManager.compute_hash(token_ids[start:start + block_size], h)
        hashes.append(h)
    return hashes
