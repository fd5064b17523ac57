"""Rollback: a sequence's blocks cut back to the tokens whose K/V a verification step accepted.

Speculative decoding (notebook 20) writes the K/V of k draft tokens in the step that verifies them; the
blocks of those slots were allocated as lookahead (`BlockManager.may_append(seq, k)`). Once the target
model has accepted `a` of them, the sequence holds num_computed_tokens = (its length before the step) + a
tokens with valid K/V, plus the bonus token the step sampled (its K/V is written by the next step). Then:
- the table keeps ceil(num_computed_tokens / block_size) blocks: the block of the last computed token stays,
  even when partial, and the next step's may_append finds the table exactly as after a plain decode;
- the blocks after them held only rejected drafts: released last first (the pool puts a block whose last
  reference goes at the END of the free queue), never hashed;
- every kept block FULL of computed tokens gets its chained hash now (`BlockManager.register_block`, the
  rule may_append follows): a block that held an unverified token was never registered, so no prefix hit
  can read a rejected draft's K/V.
This is the rule vLLM V1 writes as "cache only up to request.num_tokens" in `KVCacheManager.allocate_slots`
(`vllm/v1/core/kv_cache_manager.py` at 003df29); rejected tokens' slots are simply overwritten later.

Exercise 140 grades `truncate`; the judge compares a learner's version with this one.
"""
from __future__ import annotations

from .block_manager import BlockManager
from .sequence import Sequence


def truncate(block_manager: BlockManager, seq: Sequence, num_computed_tokens: int) -> None:
    """Keep the K/V of seq's first `num_computed_tokens` tokens and the blocks that hold them; release the
    rest (last first) and hash every kept block that is full of computed tokens and has no hash yet.

    Raises ValueError, changing nothing, unless hashed_tokens <= num_computed_tokens <= min(len(seq),
    len(block_table) * block_size) and num_computed_tokens >= 1, where hashed_tokens counts the tokens
    of the table's hashed blocks (a verified block is never cut back).
    """
    bs, table = block_manager.block_size, seq.block_table
    num_hashed = sum(1 for b in table if block_manager.blocks[b].hash != -1)
    limit = min(len(seq), len(table) * bs)
    if isinstance(num_computed_tokens, bool) or not isinstance(num_computed_tokens, int) \
            or not max(1, num_hashed * bs) <= num_computed_tokens <= limit:
        raise ValueError(f"num_computed_tokens: expected an int in [{max(1, num_hashed * bs)}, {limit}] "
                         f"({num_hashed} hashed blocks of {bs}, {len(seq)} tokens, {len(table)} blocks), "
                         f"got {num_computed_tokens!r}")
    num_kept = -(-num_computed_tokens // bs)
    for block_id in reversed(table[num_kept:]):
        block_manager.pool.free([block_id])
    del table[num_kept:]
    for i in range(num_computed_tokens // bs):                 # full blocks of computed tokens, in order
        block_manager.register_block(seq, i)                   # (one already hashed is left as it is)
