"""Build a batch of sequences stored in a paged cache, with their contiguous K/V kept for checking.

Shapes: docs/conventions.md. Used by the tests, the judge, the notebooks and the benchmarks, so that every
check starts from the same construction: random K/V per sequence, scattered into blocks of a cache whose other
rows hold garbage (NaN by default, so reading an unused row shows up).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, replace

import torch

from pagedkv_lib.core.kv_quant import dequantize_fp8, quantize_fp8
from pagedkv_lib.core.model_inputs import pad_block_tables
from pagedkv_lib.core.validation import check_gqa, check_positive_int

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0              # the largest finite e4m3 value


@dataclass
class PagedBatch:
    q: torch.Tensor              # [T, H, D]; for decode T = B
    k_cache: torch.Tensor        # [N, S, H_kv, D]
    v_cache: torch.Tensor        # [N, S, H_kv, D]
    block_tables: torch.Tensor   # [B, M] int32, padded with -1
    seq_lens: torch.Tensor       # [B] int32: context length, new tokens included
    cu_seqlens_q: torch.Tensor   # [B + 1] int32
    keys: list                   # B tensors [seq_len, H_kv, D], contiguous
    values: list                 # B tensors [seq_len, H_kv, D]
    block_size: int

    @property
    def context_lens(self) -> torch.Tensor:
        return self.seq_lens


def round_robin_tables(seq_lens: list[int], block_size: int) -> list[list[int]]:
    """Hand out blocks one at a time, round-robin over the sequences that still need one."""
    need = [-(-n // block_size) for n in seq_lens]
    tables: list[list[int]] = [[] for _ in seq_lens]
    next_id = 0
    while any(len(t) < k for t, k in zip(tables, need)):
        for t, k in zip(tables, need):
            if len(t) < k:
                t.append(next_id)
                next_id += 1
    return tables


def shuffled_tables(need: list[int], num_blocks: int, seed: int) -> list[list[int]]:
    """Block tables of need[b] blocks each, taken in order from a seeded random permutation of the pool."""
    if num_blocks < sum(need):
        raise ValueError(f"num_blocks: {sum(need)} blocks needed, got {num_blocks}")
    ids = list(range(num_blocks))
    random.Random(seed).shuffle(ids)
    tables, at = [], 0
    for k in need:
        tables.append(ids[at : at + k])
        at += k
    return tables


def write_tokens(k_cache, v_cache, table: list[int], k: torch.Tensor, v: torch.Tensor) -> None:
    """Store one sequence's contiguous k, v [n, H_kv, D] into the caches through its block table."""
    block_size = k_cache.shape[1]
    for p in range(k.shape[0]):
        blk, off = table[p // block_size], p % block_size
        k_cache[blk, off], v_cache[blk, off] = k[p], v[p]


def make_paged_batch(seq_lens: list[int], block_size: int, num_heads: int, num_kv_heads: int,
                     head_dim: int, q_lens: list[int] | None = None, *, seed: int = 0,
                     dtype=torch.float32, device="cpu", num_blocks: int | None = None,
                     block_tables: list[list[int]] | None = None, garbage: float = float("nan"),
                     extra_padding: int = 0) -> PagedBatch:
    """A batch whose sequence b has seq_lens[b] tokens in the cache and q_lens[b] (default 1) queries.

    Blocks are a random permutation of the pool unless `block_tables` is given; `extra_padding` adds that
    many -1 columns to every table row.
    """
    check_positive_int("block_size", block_size)
    check_gqa(num_heads, num_kv_heads)
    q_lens = [1] * len(seq_lens) if q_lens is None else list(q_lens)
    if len(q_lens) != len(seq_lens) or any(not 0 <= ql <= n for ql, n in zip(q_lens, seq_lens)):
        raise ValueError(f"q_lens: expected 0 <= q_lens[b] <= seq_lens[b], got {q_lens} for {seq_lens}")
    need = [-(-n // block_size) for n in seq_lens]
    if num_blocks is None:
        highest = max((b for t in block_tables or [] for b in t), default=-1)
        num_blocks = max(sum(need), highest + 1) + 3
    if block_tables is None:
        block_tables = shuffled_tables(need, num_blocks, seed)
    gen = torch.Generator().manual_seed(seed)
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k_cache = torch.full(shape, garbage, dtype=dtype)                 # [N, S, H_kv, D]
    v_cache = torch.full(shape, garbage, dtype=dtype)                 # [N, S, H_kv, D]
    keys, values = [], []
    for n, table in zip(seq_lens, block_tables):
        k = torch.randn(n, num_kv_heads, head_dim, generator=gen).to(dtype)   # [n, H_kv, D]
        v = torch.randn(n, num_kv_heads, head_dim, generator=gen).to(dtype)   # [n, H_kv, D]
        write_tokens(k_cache, v_cache, table, k, v)
        keys.append(k.to(device))
        values.append(v.to(device))
    T = sum(q_lens)
    q = torch.randn(T, num_heads, head_dim, generator=gen).to(dtype)  # [T, H, D]
    cu = [0]
    for ql in q_lens:
        cu.append(cu[-1] + ql)
    tables = pad_block_tables([list(t) + [-1] * extra_padding for t in block_tables], device)
    return PagedBatch(
        q=q.to(device), k_cache=k_cache.to(device), v_cache=v_cache.to(device), block_tables=tables,
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=device),
        cu_seqlens_q=torch.tensor(cu, dtype=torch.int32, device=device),
        keys=keys, values=values, block_size=block_size,
    )


def quantize_batch(batch: PagedBatch, k_scale: float, v_scale: float) -> PagedBatch:
    """The batch with FP8 caches (per-tensor scales), and its contiguous keys / values replaced by the
    dequantized FP8 values (what a kernel sees), so that SDPA on them stays the exact reference."""
    def seen(t, s):
        return dequantize_fp8(quantize_fp8(t, s), s)                  # [n, H_kv, D] fp32
    return replace(
        batch,
        k_cache=quantize_fp8(batch.k_cache, k_scale),                     # [N, S, H_kv, D] fp8
        v_cache=quantize_fp8(batch.v_cache, v_scale),                     # [N, S, H_kv, D] fp8
        keys=[seen(k, k_scale) for k in batch.keys],
        values=[seen(v, v_scale) for v in batch.values],
    )
