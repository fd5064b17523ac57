"""A decode batch whose sequences share a prefix, stored as a prefix cache stores it: the prefix's whole
blocks are the same physical blocks in every block table; a shared tail shorter than a block is copied
into each sequence's own first block (only full blocks are shared), followed by its own tokens.

Shapes: docs/conventions.md. The result is a `PagedBatch` (contiguous keys and values kept per sequence,
so `sdpa_reference.sdpa_batch` checks any kernel on it), with the cache's other rows holding garbage.
"""
from __future__ import annotations

import random

import torch

from pagedkv_lib.core.model_inputs import pad_block_tables
from pagedkv_lib.core.validation import check_gqa, check_positive_int

from .paged_batch import PagedBatch, write_tokens


def make_shared_prefix_batch(shared_len: int, suffix_lens: list[int], block_size: int, num_heads: int,
                             num_kv_heads: int, head_dim: int, *, seed: int = 0, dtype=torch.float32,
                             device="cpu", garbage: float = float("nan"),
                             extra_padding: int = 1) -> PagedBatch:
    """B = len(suffix_lens) sequences of shared_len + suffix_lens[b] tokens, one decode query each.

    The first shared_len // block_size blocks of every table are the same ids; the rest of each table is
    its own, drawn from a seeded permutation of the pool. `extra_padding` -1 columns end every row.
    """
    check_positive_int("block_size", block_size)
    check_gqa(num_heads, num_kv_heads)
    if shared_len < 0 or not suffix_lens or any(n < 0 for n in suffix_lens) \
            or any(shared_len + n < 1 for n in suffix_lens):
        raise ValueError(f"shared_len, suffix_lens: expected shared_len >= 0 and a non-empty list of "
                         f"suffix lengths >= 0 with every context >= 1, got {shared_len}, {suffix_lens}")
    num_shared = shared_len // block_size
    own = [-(-(shared_len + n) // block_size) - num_shared for n in suffix_lens]
    num_blocks = num_shared + sum(own) + 3
    ids = list(range(num_blocks))
    random.Random(seed).shuffle(ids)
    tables, at = [], num_shared
    for k in own:
        tables.append(ids[:num_shared] + ids[at : at + k])
        at += k
    gen = torch.Generator().manual_seed(seed)
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k_cache = torch.full(shape, garbage, dtype=dtype)                 # [N, S, H_kv, D]
    v_cache = torch.full(shape, garbage, dtype=dtype)                 # [N, S, H_kv, D]
    shared_k = torch.randn(shared_len, num_kv_heads, head_dim, generator=gen).to(dtype)  # [P, H_kv, D]
    shared_v = torch.randn(shared_len, num_kv_heads, head_dim, generator=gen).to(dtype)  # [P, H_kv, D]
    keys, values = [], []
    for n, table in zip(suffix_lens, tables):
        own_k = torch.randn(n, num_kv_heads, head_dim, generator=gen).to(dtype)   # [n, H_kv, D]
        own_v = torch.randn(n, num_kv_heads, head_dim, generator=gen).to(dtype)   # [n, H_kv, D]
        k = torch.cat([shared_k, own_k])                              # [P + n, H_kv, D]
        v = torch.cat([shared_v, own_v])                              # [P + n, H_kv, D]
        write_tokens(k_cache, v_cache, table, k, v)                   # shared blocks rewritten, same values
        keys.append(k.to(device))
        values.append(v.to(device))
    B = len(suffix_lens)
    q = torch.randn(B, num_heads, head_dim, generator=gen).to(dtype)  # [B, H, D]
    seq_lens = [shared_len + n for n in suffix_lens]
    return PagedBatch(
        q=q.to(device), k_cache=k_cache.to(device), v_cache=v_cache.to(device),
        block_tables=pad_block_tables([t + [-1] * extra_padding for t in tables], device),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=device),
        cu_seqlens_q=torch.arange(B + 1, dtype=torch.int32, device=device),
        keys=keys, values=values, block_size=block_size,
    )
