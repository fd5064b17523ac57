"""RadixBlockManager: nano-vllm's BlockManager interface with SGLang's radix tree as its prefix cache.

The same five calls as `BlockManager` (block_manager.py): `can_allocate`, `allocate`, `deallocate`,
`can_append`, `may_append`, so that the engine's `schedule` drives either (the comparison of
pagedkv_lib/studies/prefix_cache_comparison.py). Underneath, a `RadixCache` (radix_cache.py) over a
`BlockPool`, used the way SGLang's scheduler uses its tree (sgl-project/sglang@006b0e3d317f:
`python/sglang/srt/mem_cache/radix_cache.py`, `cache_unfinished_req` at line 502 and `cache_finished_req`
at 455; `python/sglang/srt/managers/schedule_batch.py`, `ScheduleBatch.retract_decode` and `release_req`):
- admission matches at most num_tokens - 1 tokens (the last token is always computed; SGLang's
  `Req.adjust_max_prefix_ids` caps it the same way), locks the matched node, evicts if the pool is short,
  allocates the rest, inserts the prompt's full blocks and moves its lock to the inserted node;
- a prompt the tree already holds, ending on a block boundary (always, at block size 1), gets its own copy
  of its last full block, which the cap leaves unmatched: the prefill must write the last token somewhere.
  That DUPLICATE goes back to the pool at the first call after the prefill step (the sequence then holds a
  token more), and the block table points at the tree's block instead. SGLang's `cache_unfinished_req` does
  this right after the prefill forward: it frees `kv_indices[cache_protected_len:new_prefix_len]` (line 529)
  and writes the tree's slots into the request's row of `req_to_token` (line 541);
- decode takes a block when a token starts one, evicting one node if none is free;
- `deallocate` of a FINISHED sequence inserts the full blocks whose K/V exists, the first num_tokens - 1
  tokens (the last token was sampled but never run), frees what the tree did not take (a partial last block,
  duplicates of blocks the tree already held) and unlocks, as `cache_finished_req` does;
- `deallocate` of any other sequence (a preemption: the engine's scheduler frees it while it is still
  RUNNING) inserts nothing: its prompt stays in the tree from admission, unlocked, and the blocks of its
  generated tokens go back to the pool. SGLang's retract calls `release_kv_cache(req, tree_cache,
  is_insert=False)`, because the memory is needed at once (its comment; a TODO says inserting may come).
A request owns only its blocks outside the tree ("private"); the tree owns the rest, and a lock keeps them.
Capacity is free blocks plus evictable ones, as the hash manager's free queue also holds cached blocks.
What still differs from SGLang, and why (docs/engines.md, "SGLang"): the prompt enters the tree at
admission, not after the prefill forward, since nano-vllm's five calls have none in between (`BlockManager`
registers its hashes at allocation the same way); and the tree's split timestamps (radix_cache.py).
"""
from __future__ import annotations

from .block_manager import num_new_blocks
from .block_pool import BlockPool
from .radix_cache import RadixCache, TreeNode
from .sequence import Sequence, SequenceStatus
from .validation import check_no_lookahead, check_positive_int


class RadixBlockManager:
    def __init__(self, num_blocks: int, block_size: int, cache_cls: type[RadixCache] = RadixCache):
        check_positive_int("num_blocks", num_blocks)
        check_positive_int("block_size", block_size)
        self.block_size = block_size
        self.pool = BlockPool(num_blocks)
        self.cache = cache_cls(self.pool, block_size)
        self.locked: dict[int, TreeNode] = {}         # seq_id -> the node its cached prefix ends at
        self.private: dict[int, list[int]] = {}       # seq_id -> its blocks the tree does not own
        # seq_id -> (the sequence, its num_tokens at admission, {table index: the tree's copy of that block})
        self.duplicates: dict[int, tuple[Sequence, int, dict[int, int]]] = {}

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

    def _release_duplicates(self) -> None:
        """For every sequence whose prefill has run since admission (it holds a token more): free its blocks
        that duplicate the tree's and point its block table at the tree's copies. Every call starts here."""
        for seq_id, (seq, num_tokens, copies) in list(self.duplicates.items()):
            if seq.num_tokens == num_tokens:
                continue                                 # its prefill has not run: it writes them now
            del self.duplicates[seq_id]
            own = [seq.block_table[i] for i in copies]
            self.private[seq_id] = [b for b in self.private[seq_id] if b not in own]
            self.pool.free(own)
            for i, tree_block in copies.items():
                seq.block_table[i] = tree_block

    def can_allocate(self, seq: Sequence) -> bool:
        """Enough free or evictable blocks for the uncached part (the matched path locked meanwhile)."""
        self._release_duplicates()
        hits, node = self._cached(seq)
        self.cache.inc_lock_ref(node)
        ok = self.num_free_blocks >= seq.num_blocks - len(hits)
        self.cache.dec_lock_ref(node)
        return ok

    def allocate(self, seq: Sequence) -> None:
        if seq.block_table:
            raise ValueError(f"seq {seq.seq_id} already has a block table {seq.block_table}")
        self._release_duplicates()
        hits, node = self._cached(seq)
        self._relock(seq, node)
        fresh = self._take(seq.num_blocks - len(hits))
        seq.block_table.extend(hits + fresh)
        seq.num_cached_tokens = len(hits) * self.block_size
        self.private[seq.seq_id] = fresh
        copies = self._insert(seq, seq.num_tokens)       # this step computes every prompt token
        if copies:
            self.duplicates[seq.seq_id] = (seq, seq.num_tokens, copies)

    def _insert(self, seq: Sequence, num_computed: int) -> dict[int, int]:
        """Give the tree the full blocks of the first num_computed tokens and lock where they end. Returns
        {table index: the tree's block} for each of them the tree already held in another block (the
        sequence's copy stays private)."""
        num_full = num_computed // self.block_size
        tokens = seq.token_ids[: num_full * self.block_size]
        self.cache.insert(tokens, seq.block_table[:num_full])
        tree_blocks, node = self.cache.match_prefix(tokens)
        adopted = {b for b, t in zip(seq.block_table, tree_blocks) if b == t}
        self.private[seq.seq_id] = [b for b in self.private[seq.seq_id] if b not in adopted]
        self._relock(seq, node)
        return {i: t for i, (b, t) in enumerate(zip(seq.block_table, tree_blocks)) if b != t}

    def deallocate(self, seq: Sequence) -> None:
        """Cache what a finished sequence computed (a preempted one adds nothing), free what the tree does
        not hold, unlock."""
        self._release_duplicates()
        self.duplicates.pop(seq.seq_id, None)            # never prefilled: its copies are freed below
        if seq.status is SequenceStatus.FINISHED:
            self._insert(seq, seq.num_tokens - 1)
        self.pool.free(list(reversed(self.private.pop(seq.seq_id))))
        self.cache.dec_lock_ref(self.locked.pop(seq.seq_id))
        seq.num_cached_tokens = 0
        seq.block_table.clear()

    def can_append(self, seq: Sequence, num_lookahead_tokens: int = 0) -> bool:
        """BlockManager's interface; lookahead slots (speculative decoding) are the hash chain's only."""
        check_no_lookahead(num_lookahead_tokens)
        self._release_duplicates()
        return self.num_free_blocks >= num_new_blocks(len(seq), self.block_size)

    def may_append(self, seq: Sequence, num_lookahead_tokens: int = 0) -> None:
        check_no_lookahead(num_lookahead_tokens)
        self._release_duplicates()
        if num_new_blocks(len(seq), self.block_size):
            (block,) = self._take(1)
            seq.block_table.append(block)
            self.private[seq.seq_id].append(block)
