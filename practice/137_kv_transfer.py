"""Exercise 137 (medium): KV transfer between instances. Notebook 17, "The KV cache across GPUs".
Grade: python practice/judge.py 137

Prefill/decode disaggregation: one instance computes a prompt's K/V, another decodes it. Each has its own
block pool and cache, so a sequence cannot keep its block ids when it moves: the sender gathers its blocks
through its own block table, the receiver allocates blocks from its own pool and scatters them there, and
builds a new table. A receiver that already holds the first blocks of the prompt (a prefix-cache hit) takes
only the rest (vLLM's NIXL connector reads only the blocks the decode side has not computed). Here both sides
live in one process and the "network" is a tensor; the notebook runs the same steps across two processes.
Shapes: docs/conventions.md.
"""
from __future__ import annotations

import torch

from pagedkv_lib.core.block_pool import BlockPool


def transfer_kv(src_kv_cache: torch.Tensor, src_block_table, num_tokens: int, dst_pool: BlockPool,
                dst_kv_cache: torch.Tensor, dst_prefix_table: list[int]) -> list[int] | None:
    """Move one sequence's K/V from the sender's cache into blocks of the receiver's pool; its new table.

    Args:
        src_kv_cache: the sender's cache [2, L, N_src, S, H_kv, D] (K = [0], V = [1]); read-only.
        src_block_table: the sequence's table on the sender: a list of ints or a 1-D int32/int64 tensor. Its
            first ceil(num_tokens / S) entries are block ids of src_kv_cache; any entries after them are -1
            (padding) and name no block. Read-only.
        num_tokens: int >= 1, the tokens of the sequence (S = src_kv_cache.shape[3] is the block size).
        dst_pool: the receiver's pool, a `BlockPool` (pagedkv_lib.core.block_pool): num_free(),
            allocate(n) (n ids from the front of its free queue, or None and no change), fork(blocks) (one
            more reference to each), free(blocks), ref_count(block).
        dst_kv_cache: the receiver's cache [2, L, N_dst, S, H_kv, D]: same L, S, H_kv, D and dtype, its own
            N_dst; its block ids have nothing to do with the sender's.
        dst_prefix_table: the receiver's ids of blocks that ALREADY hold the sequence's first
            k = len(dst_prefix_table) blocks (full blocks, k * S <= num_tokens; a prefix-cache hit), each
            held (ref_count >= 1). Read-only. May be empty.
    Does:
        1. The blocks to move are logical blocks k .. ceil(num_tokens / S) - 1 of src_block_table, n of them
           (the last one may be partial: it moves too; the prefix blocks do not move).
        2. If dst_pool has fewer than n free blocks: return None, and change nothing at all (no reference
           taken, no block allocated, no byte written).
        3. Else new = dst_pool.allocate(n): the receiver's own ids, in the order allocate returns them.
        4. For i in 0..n-1: block new[i] of dst_kv_cache receives logical block k + i of the sender (table
           order, NOT id order): K and V, every layer. Whole blocks may be copied; the judge ignores the
           unused tail of the sequence's last block.
        5. One more reference on each prefix block (the new sequence shares them): dst_pool.fork(prefix).
    Mutates: dst_pool, and dst_kv_cache in the n new blocks only.
    Returns: the receiver's table, a NEW list: dst_prefix_table + new (ceil(num_tokens / S) ids); or None.
    Example: S = 4, num_tokens = 10, src_block_table [5, 1, 6, -1], dst_prefix_table [3] (k = 1), the
        receiver's free queue [6, 2, 0, ...]: blocks 1 and 6 of the sender go to the receiver's blocks 6 and
        2; block 3 gains a reference; returns [3, 6, 2].
    """
    raise NotImplementedError("transfer_kv: your code here (exercise 137)")
