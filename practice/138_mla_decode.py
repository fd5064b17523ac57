"""Exercise 138 (hard): paged MLA decode with absorbed weights. Notebook 18, "MLA: a cache of latents".
Grade: python practice/judge.py 138

Multi-head latent attention (DeepSeek-V2/V3) caches per token and layer one row of W = C + R numbers: the
latent c (C = kv_lora_rank) and one RoPE key k_pe (R numbers, already rotated at the token's position), shared
by every head. Head h's key is [w_uk[h] c ; k_pe] and its value w_uv[h] c. Decode in latent space: absorb
w_uk into the query (q_c = w_uk[h]^T q_nope, so q_nope . (w_uk[h] c) = q_c . c), let every head attend to the
same latent rows, and apply w_uv to the latent output. Never up-project the cache.
Shapes: notebook 18 (B sequences, H heads, Dn = nope dim, Dv = value dim, N blocks of S tokens).
"""
from __future__ import annotations

import torch

from pagedkv_lib.core.rotary import apply_rope_interleaved  # noqa: F401  (the stub keeps it for your code)


def mla_decode_absorbed(q: torch.Tensor, kv_cache: torch.Tensor, block_tables: torch.Tensor,
                        context_lens: torch.Tensor, w_uk: torch.Tensor, w_uv: torch.Tensor,
                        cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """One decode step of one MLA layer: one new query per sequence over its paged latent context.

    Args:
        q: [B, H, Dn + R] float (float64 or float32): per head the nope part q[..., :Dn], then the RoPE part
            q[..., Dn:], NOT yet rotated. Read-only.
        kv_cache: [N, S, C + R], q's dtype: row = [latent c (C numbers) ; RoPE key k_pe (R numbers, rotated)].
            Rows that are not part of a context hold garbage, possibly NaN or huge. Read-only.
        block_tables: [B, M] int32; row b lists the blocks of sequence b, then -1 padding. Read-only.
        context_lens: [B] int32, each >= 1: the tokens of sequence b are positions 0..context_lens[b]-1,
            position p at block block_tables[b, p // S], offset p % S. Read-only.
        w_uk: [H, Dn, C], w_uv: [H, Dv, C], q's dtype: head h's key is [w_uk[h] @ c ; k_pe], its value
            w_uv[h] @ c (C = w_uk.shape[2], R = kv_cache.shape[2] - C). Read-only.
        cos, sin: [B, R / 2] float64: the RoPE angles of each query's position. Rotate q's RoPE part with
            apply_rope_interleaved(x, cos[:, None], sin[:, None]), imported above (pairs (2i, 2i + 1)).
    Returns: a new [B, H, Dv] tensor of q's dtype: out[b, h] = softmax_j(q_h . k_j * scale) . v_j over the
        context of b, with q_h = [q_nope ; RoPE(q_pe)] and scale = 1 / sqrt(Dn + R) (the head dim of q_h).
        Compute in q's dtype; the judge compares with the multi-head form (every key and value up-projected)
        in float64 at atol = rtol = 1e-9 (1e-4 for float32).
    Mutates nothing and keeps nothing between calls: each layer of a model calls it with its own cache and
    weights (one block table for all layers). Errors: inconsistent shapes may raise.
    Example: S = 4, context_lens = [6], block_tables = [[7, 2, -1]]: the rows are 0..3 of block 7, then 0..1
        of block 2; each of the H heads scores q_c[h] . c_j + RoPE(q_pe)[h] . k_pe_j with the same row j.
    """
    raise NotImplementedError("mla_decode_absorbed: your code here (exercise 138)")
