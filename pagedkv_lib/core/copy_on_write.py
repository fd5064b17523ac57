"""Fork and copy-on-write for parallel sampling (n > 1), on a `BlockPool`.

`BlockPool.fork` gives a child sequence the parent's blocks (one more reference each). Before a sequence
writes a token into a block it shares, it takes a private copy: allocate a block, copy the old block's K and
V for every layer, swap it into the table, drop one reference to the old block. The idea is the
PagedAttention paper's (section 4.4); vLLM V0 did it in `BlockSpaceManager`, V1 shares only full blocks.
Shapes: docs/conventions.md.
"""
from __future__ import annotations

import torch

from .block_pool import BlockPool
from .validation import check_positive_int, check_tensor


def copy_block(kv_cache: torch.Tensor, src: int, dst: int) -> None:
    """kv_cache [2, L, N, S, H_kv, D]: block dst <- block src, K and V, every layer."""
    kv_cache[:, :, dst] = kv_cache[:, :, src]                     # [2, L, S, H_kv, D]


def append_slot(pool: BlockPool, kv_cache: torch.Tensor, block_table: list[int], num_tokens: int,
                block_size: int) -> int | None:
    """Make room for position `num_tokens` of a sequence holding `num_tokens` tokens; return its slot.

    A position that starts a block gets a new block; a position inside a shared block (ref > 1) gets a
    private copy of it. Mutates `block_table` and `kv_cache`; returns None, changing nothing, when no
    block is free.
    """
    check_positive_int("block_size", block_size)
    check_tensor("kv_cache", kv_cache, ndim=6)
    if kv_cache.shape[3] != block_size:
        raise ValueError(f"kv_cache: expected block_size {block_size} at dim 3, got {tuple(kv_cache.shape)}")
    if len(block_table) != -(-num_tokens // block_size):
        raise ValueError(f"block_table: {num_tokens} tokens need {-(-num_tokens // block_size)} blocks, "
                         f"got {len(block_table)}")
    if num_tokens % block_size == 0:                               # the new token opens a block
        new = pool.allocate(1)
        if new is None:
            return None
        block_table.append(new[0])
    elif pool.ref_count(block_table[-1]) > 1:                      # shared: copy before writing
        new = pool.allocate(1)
        if new is None:
            return None
        copy_block(kv_cache, block_table[-1], new[0])
        pool.free([block_table[-1]])
        block_table[-1] = new[0]
    return block_table[-1] * block_size + num_tokens % block_size
