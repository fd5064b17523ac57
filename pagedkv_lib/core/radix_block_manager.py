"""RadixBlockManager: nano-vllm's BlockManager interface with SGLang's radix tree as its prefix cache.

The same five calls as `BlockManager` (block_manager.py): `can_allocate`, `allocate`, `deallocate`,
`can_append`, `may_append`, so that the engine's `schedule` drives either (the comparison of
pagedkv_lib/studies/prefix_cache_comparison.py). Underneath, a `RadixCache` (radix_cache.py) over a
`BlockPool`, used the way SGLang's scheduler uses its tree (`python/sglang/srt/mem_cache/radix_cache.py`,
`cache_unfinished_req` and `cache_finished_req`):
- admission matches at most num_tokens - 1 tokens (the last token is always computed; SGLang's
  `Req.adjust_max_prefix_ids` in `python/sglang/srt/managers/schedule_batch.py` caps it the same way), locks
  the matched node, evicts if the pool is short, allocates the rest, and at once inserts the prompt's full
  blocks (as `BlockManager` registers their hashes at allocation) and moves its lock to the inserted node;
- decode takes a block when a token starts one, evicting one node if none is free;
- `deallocate` (a finish, or a preemption) inserts the full blocks whose K/V exists, the first
  num_tokens - 1 tokens (the last token was sampled but never run), frees what the tree did not take
  (a partial last block, duplicates of blocks the tree already held) and unlocks.
A request owns only its blocks outside the tree ("private"); the tree owns the rest, and a lock keeps them.
Capacity is free blocks plus evictable ones, as the hash manager's free queue also holds cached blocks.
"""
from __future__ import annotations

from .block_pool import BlockPool
from .radix_cache import RadixCache, TreeNode
from .sequence import Sequence
from .validation import check_positive_int


class RadixBlockManager:
    def __init__(self, num_blocks: int, block_size: int, cache_cls: type[RadixCache] = RadixCache):
        check_positive_int("num_blocks", num_blocks)
        check_positive_int("block_size", block_size)
        self.block_size = block_size
        self.pool = BlockPool(num_blocks)
        self.cache = cache_cls(self.pool, block_size)
        self.locked: dict[int, TreeNode] = {}         # seq_id -> the node its cached prefix ends at
        self.private: dict[int, list[int]] = {}       # seq_id -> its blocks the tree does not own

    @property
    def num_free_blocks(self) -> int:
        """Blocks a request could get: free, or held by the tree and unlocked."""
        return self.pool.num_free() + self.cache.evictable_size()

    def _cached(self, seq: Sequence) -> tuple[list[int], TreeNode]:
        return self.cache.match_prefix(seq.token_ids[: seq.num_tokens - 1])

    def _take(self, n: int) -> list[int]:
        """n blocks from the pool, evicting unlocked tree nodes first if fewer are free."""
        if self.pool.num_free() < n:
            self.cache.evict(n - self.pool.num_free())
        blocks = self.pool.allocate(n)
        if blocks is None:
            raise RuntimeError(f"out of blocks: {n} needed, {self.pool.num_free()} free after eviction")
        return blocks

    def _relock(self, seq: Sequence, node: TreeNode) -> None:
        self.cache.inc_lock_ref(node)
        old = self.locked.pop(seq.seq_id, None)
        if old is not None:
            self.cache.dec_lock_ref(old)
        self.locked[seq.seq_id] = node

    def can_allocate(self, seq: Sequence) -> bool:
        """Enough free or evictable blocks for the uncached part (the matched path locked meanwhile)."""
        hits, node = self._cached(seq)
        self.cache.inc_lock_ref(node)
        ok = self.num_free_blocks >= seq.num_blocks - len(hits)
        self.cache.dec_lock_ref(node)
        return ok

    def allocate(self, seq: Sequence) -> None:
        if seq.block_table:
            raise ValueError(f"seq {seq.seq_id} already has a block table {seq.block_table}")
        hits, node = self._cached(seq)
        self._relock(seq, node)
        fresh = self._take(seq.num_blocks - len(hits))
        seq.block_table.extend(hits + fresh)
        seq.num_cached_tokens = len(hits) * self.block_size
        self.private[seq.seq_id] = fresh
        self._insert(seq, seq.num_tokens)                # this step computes every prompt token

    def _insert(self, seq: Sequence, num_computed: int) -> None:
        """Give the tree the full blocks of the first num_computed tokens; lock where they end."""
        num_full = num_computed // self.block_size
        tokens = seq.token_ids[: num_full * self.block_size]
        cached = self.cache.insert(tokens, seq.block_table[:num_full])
        adopted = set(seq.block_table[cached // self.block_size : num_full])
        self.private[seq.seq_id] = [b for b in self.private[seq.seq_id] if b not in adopted]
        self._relock(seq, self.cache.match_prefix(tokens)[1])

    def deallocate(self, seq: Sequence) -> None:
        """Cache what the sequence computed, free what the tree did not take, unlock."""
        self._insert(seq, seq.num_tokens - 1)
        self.pool.free(list(reversed(self.private.pop(seq.seq_id))))
        self.cache.dec_lock_ref(self.locked.pop(seq.seq_id))
        seq.num_cached_tokens = 0
        seq.block_table.clear()

    def can_append(self, seq: Sequence, num_lookahead_tokens: int = 0) -> bool:
        """BlockManager's interface; lookahead slots (speculative decoding) are the hash chain's only."""
        _no_lookahead(num_lookahead_tokens)
        return self.num_free_blocks >= ((len(seq) - 1) % self.block_size == 0)

    def may_append(self, seq: Sequence, num_lookahead_tokens: int = 0) -> None:
        _no_lookahead(num_lookahead_tokens)
        if (len(seq) - 1) % self.block_size == 0:
            (block,) = self._take(1)
            seq.block_table.append(block)
            self.private[seq.seq_id].append(block)


def _no_lookahead(num_lookahead_tokens: int) -> None:
    if num_lookahead_tokens != 0:
        raise ValueError(f"num_lookahead_tokens: expected 0 (speculative decoding runs on the hash-chain "
                         f"BlockManager, whose rollback.truncate releases draft blocks), "
                         f"got {num_lookahead_tokens!r}")
