"""Exercise 140 (medium): roll the block table back after a speculative step. Notebook 20, "Speculative
decoding and the cache".
Grade: python practice/judge.py 140

Speculative decoding verifies k guessed (draft) tokens in one forward. Before that step the scheduler gave
the sequence lookahead slots for them, `block_manager.may_append(seq, k)`: blocks for positions
len(seq) - 1 .. len(seq) - 1 + k, where only the last verified token (position len(seq) - 1) is real.
The target model then accepts some drafts and samples a bonus token; the engine appends them to seq.
Now the sequence holds `num_computed_tokens` tokens whose K/V is written and verified (its length before
the step plus the accepted drafts) and one more, the bonus, whose K/V the next step writes. What the
block manager must now hold is what plain decoding, one token at a time, would have left:

    the first ceil(num_computed_tokens / block_size) blocks of the table, the block of the last computed
    token included even when it is partial; the others (rejected drafts only) released;
    a chained hash on every kept block that is FULL of computed tokens, and on no other block.

One rule says which blocks carry a hash, here and in may_append (nano-vllm's, and vLLM's allocate_slots): a
block is hashed once it is full of verified tokens whose K/V is in the cache, written already or by the
step being scheduled (its forward runs before any other request can look the block up). A block holding a
rejected draft, or the bonus token (whose K/V the next step writes, and whose block that step hashes),
must never be found by a prefix hit.

The pieces of `pagedkv_lib.core.block_manager.BlockManager` you need (read-only unless said):
    block_manager.block_size                   tokens per block
    block_manager.blocks[block_id]             a Block: .hash (-1: none), .token_ids, .ref_count,
                                               .update(hash, token_ids) sets both
    block_manager.pool.free([block_id])        drops one reference; at 0 the block joins the END of the
                                               free queue (block_manager.free_block_ids)
    block_manager.compute_hash(ids, prefix)    the chained hash of the token ids `ids` (prefix: the
                                               previous block's hash, -1 for the first block)
    block_manager.hash_to_block_id             hash -> block id, the prefix cache; mutate it
    seq.block_table (mutate it), seq.block(i) (the token ids of logical block i), len(seq)
"""
from __future__ import annotations

from pagedkv_lib.core.block_manager import BlockManager
from pagedkv_lib.core.sequence import Sequence


def truncate(block_manager: BlockManager, seq: Sequence, num_computed_tokens: int) -> None:
    """Cut seq's blocks back to its first `num_computed_tokens` tokens after a verification step.

    Args:
        block_manager: the prefix-caching BlockManager holding seq's blocks. Mutated: pool, blocks' hashes
            and token ids, hash_to_block_id.
        seq: a Sequence whose block_table holds at least ceil(num_computed_tokens / block_size) blocks
            (it may hold more: lookahead blocks of rejected drafts). Mutated: block_table only.
        num_computed_tokens: int, the tokens of seq whose K/V is verified.
    Returns: None.
    Contract:
        - keep = ceil(num_computed_tokens / block_size); the blocks block_table[keep:] are released LAST
          FIRST (the last block of the table first), one reference each, with block_manager.pool.free,
          and removed from block_table; block_table[:keep] stays as it is, in order;
        - for i in range(num_computed_tokens // block_size) (the full blocks of computed tokens): if
          block i has no hash (-1), give it compute_hash(seq.block(i), prefix = block i-1's hash, -1 for
          i = 0), store hash and token ids with Block.update and map hash_to_block_id[hash] to its id
          (replacing an entry that is there, even one of another sequence's block); blocks that already
          have a hash are left alone, and so is their hash_to_block_id entry, wherever it points;
        - no other block gets a hash; reference counts change only through pool.free: a released block
          that another sequence shares (a fork's table) keeps that sequence's reference.
    Errors: ValueError, with nothing changed, unless num_computed_tokens is an int (not a bool) with
        max(1, hashed * block_size) <= num_computed_tokens <= min(len(seq), len(block_table) * block_size),
        where hashed is the number of blocks of block_table whose hash is not -1 (verified blocks are never
        cut back).
    Example (block_size 2, 8 blocks): prompt [1, 2, 3] gets table [0, 1]; the prefill samples 4 (len 4).
        may_append(seq, 3) for drafts [5, 6, 7] adds blocks 2 and 3 and hashes block 1 ([3, 4]: 4 is
        verified, and the step being scheduled writes its K/V). The target accepts 5 and 6 and samples
        the bonus 8; the engine appends 5, 6, 8 (len 7). truncate(bm, seq, 6) releases block 3 (free queue
        [4, 5, 6, 7, 3]), keeps [0, 1, 2] and hashes block 2 ([5, 6]); the bonus 8 sits in no block yet.
    """
    raise NotImplementedError("truncate: your code here (exercise 140)")
