"""Build a batch of sequences whose MLA latents sit in a paged cache of several layers, for the tests, the
judge (exercise 138), the notebook and the benchmark.

Every layer of one model shares the block tables and the slot mapping (one allocation per token, as in every
engine); each layer has its own cache, weights and queries. Rows outside every context hold garbage (NaN by
default). Shapes: core/mla_attention.py (L = num_layers).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from pagedkv_lib.core.model_inputs import pad_block_tables
from pagedkv_lib.core.rotary import apply_rope_interleaved, rope_angles
from pagedkv_lib.core.slot_mapping import slot_mapping_for
from pagedkv_lib.core.validation import check_positive_int

from .paged_batch import shuffled_tables


@dataclass
class MLABatch:
    q: torch.Tensor              # [L, B, H, Dn + R]: nope part, then the RoPE part not yet rotated
    kv_cache: torch.Tensor       # [L, N, S, C + R]: latent c_KV, then the rotated RoPE key
    w_uk: torch.Tensor           # [L, H, Dn, C]
    w_uv: torch.Tensor           # [L, H, Dv, C]
    cos: torch.Tensor            # [B, R / 2]: the angles of each query's position (context_len - 1)
    sin: torch.Tensor            # [B, R / 2]
    block_tables: torch.Tensor   # [B, M] int32, padded with -1
    context_lens: torch.Tensor   # [B] int32
    block_size: int


def make_mla_batch(context_lens: list[int], block_size: int, num_heads: int, kv_lora_rank: int,
                   rope_dim: int, nope_dim: int, v_dim: int, *, num_layers: int = 1, seed: int = 0,
                   dtype=torch.float64, num_blocks: int | None = None, garbage: float = float("nan"),
                   extra_padding: int = 0) -> MLABatch:
    """Random latents and RoPE keys for context_lens[b] tokens of sequence b in every layer, written through
    the slots of shuffled block tables; weights scaled by 1 / sqrt(fan-in) so that scores stay near 1."""
    for name, value in (("block_size", block_size), ("num_heads", num_heads), ("kv_lora_rank", kv_lora_rank),
                        ("nope_dim", nope_dim), ("v_dim", v_dim), ("num_layers", num_layers)):
        check_positive_int(name, value)
    need = [-(-n // block_size) for n in context_lens]
    num_blocks = sum(need) + 3 if num_blocks is None else num_blocks
    tables = shuffled_tables(need, num_blocks, seed)
    gen = torch.Generator().manual_seed(seed)
    L, C, R, H = num_layers, kv_lora_rank, rope_dim, num_heads
    kv_cache = torch.full((L, num_blocks * block_size, C + R), garbage, dtype=torch.float64)   # [L, N * S, W]
    for n, table in zip(context_lens, tables):
        slots = torch.tensor(slot_mapping_for(table, list(range(n)), block_size))   # [n]
        cos, sin = rope_angles(torch.arange(n), R)                                  # [n, R / 2] each
        latents = torch.randn(L, n, C, generator=gen, dtype=torch.float64)          # [L, n, C]
        k_pe = apply_rope_interleaved(torch.randn(L, n, R, generator=gen, dtype=torch.float64), cos, sin)
        kv_cache[:, slots] = torch.cat((latents, k_pe), dim=-1)                     # [L, n, W]
    lens = torch.tensor(context_lens, dtype=torch.int32)
    cos, sin = rope_angles(lens - 1, R)                                             # [B, R / 2] each
    B = len(context_lens)
    q = torch.randn(L, B, H, nope_dim + R, generator=gen, dtype=torch.float64)      # [L, B, H, Dn + R]
    w_uk = torch.randn(L, H, nope_dim, C, generator=gen, dtype=torch.float64) * C**-0.5   # [L, H, Dn, C]
    w_uv = torch.randn(L, H, v_dim, C, generator=gen, dtype=torch.float64) * C**-0.5      # [L, H, Dv, C]
    return MLABatch(
        q=q.to(dtype), kv_cache=kv_cache.reshape(L, num_blocks, block_size, C + R).to(dtype),
        w_uk=w_uk.to(dtype), w_uv=w_uv.to(dtype), cos=cos, sin=sin,
        block_tables=pad_block_tables([t + [-1] * extra_padding for t in tables], "cpu"),
        context_lens=lens, block_size=block_size,
    )
