"""Multi-head latent attention (MLA, DeepSeek-V2 arXiv 2405.04434; DeepSeek-V3) over a paged latent cache:
the multi-head form and the absorbed form of one decode step, in PyTorch.

Symbols (DeepSeek-V3's values, from deepseek-ai/DeepSeek-V3@9b4e978 inference/configs/config_671B.json):
    B sequences, H query heads (128), C = kv_lora_rank (512), R = qk_rope_head_dim (64),
    Dn = qk_nope_head_dim (128), Dv = v_head_dim (128), W = C + R (576) numbers per cached token,
    N blocks of S = block_size tokens, M block table columns, n a context length.
The cache of one layer is `kv_cache` [N, S, W]: per token its latent c_KV (first C numbers) and its one RoPE
key k_pe (last R numbers, already rotated at the token's position), shared by every head. Block tables,
context lengths and slot mappings are the ones of the rest of the course.

Per head h the model's keys and values are up-projections of the latent (w_uk [H, Dn, C], w_uv [H, Dv, C],
the two halves of DeepSeek's wkv_b):
    k_h = [w_uk[h] c ; k_pe]        v_h = w_uv[h] c        scale = 1 / sqrt(Dn + R)
Multi-head form: up-project every cached token, then ordinary attention with head dim Dn + R (vLLM calls it
the compute-friendly path and uses it for prefill). Absorbed form: q_nope . (w_uk[h] c) = (w_uk[h]^T q_nope)
. c, so the query moves into latent space once per step, every head attends to the same [c ; k_pe] rows
(multi-query attention with head dim W and value dim C), and w_uv is applied to the latent output (vLLM's
data-movement-friendly path for decode; vllm-project/vllm@37fa5c0 vllm/v1/attention/backends/mla/common.py;
DeepSeek-V3 inference/model.py, attn_impl "absorb").
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from .rotary import apply_rope_interleaved


def mla_scale(nope_dim: int, rope_dim: int) -> float:
    """The softmax scale of MLA: 1 / sqrt(Dn + R), the query-key head dim of the multi-head form, not of the
    latent rows (W = C + R) the absorbed form reads (FlashMLA and vLLM take it as an argument for that
    reason). DeepSeek-V3 multiplies it by a YaRN factor for long contexts; the course leaves that out."""
    return (nope_dim + rope_dim) ** -0.5


def gather_latents(kv_cache: torch.Tensor, block_table: torch.Tensor, context_len: int) -> torch.Tensor:
    """The rows [n, W] of one sequence: positions 0..n-1 through its block table row (the -1 padding and the
    unused tail of the last block left out)."""
    S, W = kv_cache.shape[1], kv_cache.shape[2]
    blocks = block_table[: -(-context_len // S)].long()                  # [ceil(n / S)]
    return kv_cache[blocks].reshape(-1, W)[:context_len]                 # [n, W]


def split_query(q: torch.Tensor, w_uk: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """q [B, H, Dn + R] -> (q_nope [B, H, Dn], q_pe [B, H, R] rotated by cos, sin [B, R / 2])."""
    Dn = w_uk.shape[1]
    q_pe = apply_rope_interleaved(q[..., Dn:], cos[:, None], sin[:, None])   # [B, H, R]
    return q[..., :Dn], q_pe


def mla_decode_multihead(q: torch.Tensor, kv_cache: torch.Tensor, block_tables: torch.Tensor,
                         context_lens: torch.Tensor, w_uk: torch.Tensor, w_uv: torch.Tensor,
                         cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """One decode step in the multi-head form, in float64: every cached latent up-projected to H keys and
    values, then softmax(q_h . k_h * scale) . v_h. The independent reference: [B, H, Dv] of q's dtype.

    q [B, H, Dn + R] (nope part, then the RoPE part not yet rotated), cos / sin [B, R / 2] (the angles of each
    sequence's query position), the rest as in the module docstring."""
    C, Dn = w_uk.shape[2], w_uk.shape[1]
    R = kv_cache.shape[2] - C
    q_nope, q_pe = split_query(q.double(), w_uk.double(), cos, sin)      # [B, H, Dn], [B, H, R]
    out = q.new_empty(q.shape[0], q.shape[1], w_uv.shape[1])             # [B, H, Dv]
    for b in range(q.shape[0]):
        rows = gather_latents(kv_cache, block_tables[b], int(context_lens[b])).double()   # [n, W]
        k_nope = torch.einsum("nc,hdc->nhd", rows[:, :C], w_uk.double())  # [n, H, Dn]
        v = torch.einsum("nc,hdc->nhd", rows[:, :C], w_uv.double())       # [n, H, Dv]
        k_pe = rows[:, None, C:].expand(-1, q.shape[1], R)                # [n, H, R]: one key for all heads
        k = torch.cat((k_nope, k_pe), dim=-1)                             # [n, H, Dn + R]
        q_b = torch.cat((q_nope[b], q_pe[b]), dim=-1)                     # [H, Dn + R]
        scores = torch.einsum("hd,nhd->hn", q_b, k) * mla_scale(Dn, R)    # [H, n]
        out[b] = torch.einsum("hn,nhd->hd", scores.softmax(dim=-1), v).to(q.dtype)
    return out


def absorb_query(q: torch.Tensor, w_uk: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The latent query [B, H, W]: [w_uk[h]^T q_nope ; RoPE(q_pe)], what FlashMLA's decode kernel takes."""
    q_nope, q_pe = split_query(q, w_uk, cos, sin)                        # [B, H, Dn], [B, H, R]
    q_latent = torch.einsum("bhd,hdc->bhc", q_nope, w_uk)                # [B, H, C]
    return torch.cat((q_latent, q_pe), dim=-1)                           # [B, H, W]


def mla_latent_attention(q_latent: torch.Tensor, kv_cache: torch.Tensor, block_tables: torch.Tensor,
                         context_lens: torch.Tensor, kv_lora_rank: int, scale: float) -> torch.Tensor:
    """Multi-query attention over the latent rows: out[b, h] = softmax(q_latent[b, h] . row * scale) . c over
    the context of b, where c is a row's first C = kv_lora_rank numbers (FlashMLA's head_dim_v). [B, H, C] of
    q_latent's dtype, computed in fp32 (float64 for float64 inputs). The PyTorch reference of the Triton
    kernel (kernels/triton_mla_decode.py), same signature."""
    work = torch.float64 if q_latent.dtype == torch.float64 else torch.float32
    out = q_latent.new_empty(q_latent.shape[0], q_latent.shape[1], kv_lora_rank)   # [B, H, C]
    for b in range(q_latent.shape[0]):
        rows = gather_latents(kv_cache, block_tables[b], int(context_lens[b])).to(work)   # [n, W]
        scores = q_latent[b].to(work) @ rows.T * scale                   # [H, n]
        out[b] = (scores.softmax(dim=-1) @ rows[:, :kv_lora_rank]).to(q_latent.dtype)
    return out


LatentAttention = Callable[..., torch.Tensor]   # mla_latent_attention's signature


def mla_decode_absorbed(q: torch.Tensor, kv_cache: torch.Tensor, block_tables: torch.Tensor,
                        context_lens: torch.Tensor, w_uk: torch.Tensor, w_uv: torch.Tensor,
                        cos: torch.Tensor, sin: torch.Tensor,
                        attention: LatentAttention = mla_latent_attention) -> torch.Tensor:
    """One decode step in the absorbed form: the same arguments and answer as `mla_decode_multihead`, but the
    cache is read as latent rows, once for all heads (`attention`: this module's PyTorch loop, or the Triton
    kernel's launcher), and no key or value of any head is ever formed. [B, H, Dv] of q's dtype."""
    C, Dn = w_uk.shape[2], w_uk.shape[1]
    q_latent = absorb_query(q, w_uk, cos, sin)                           # [B, H, W]
    out_latent = attention(q_latent, kv_cache, block_tables, context_lens, C,
                           mla_scale(Dn, kv_cache.shape[2] - C))         # [B, H, C]
    return torch.einsum("bhc,hvc->bhv", out_latent, w_uv)                # [B, H, Dv]
