"""Reference paged attention in PyTorch: decode (one query per sequence) and varlen (chunked prefill).

Shapes: docs/conventions.md. Every sequence's K/V is gathered through
its block table (-1 padding dropped, the last block's unused tail cut), query head h reads KV head
h // (H // H_kv) (GQA), and the math runs in float32 (float64 for float64 inputs); the result comes back
in the query's dtype. An fp8 cache (float8_e4m3fn) is read as `byte.float() * k_scale` (`kv_quant`) and needs
the keyword-only `k_scale`, `v_scale`; q and the output stay in the model's dtype. The Triton kernels in
`pagedkv_lib.kernels` are checked against these.
"""
from __future__ import annotations

import torch

from .kv_cache import gather_kv
from .kv_quant import CACHE_DTYPES, check_kv_scales, gather_kv_dequant, is_fp8
from .validation import FLOAT_DTYPES, INDEX_DTYPES, check_gqa, check_shape, check_tensor


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _attend(q, k, v, scale: float, q_positions) -> torch.Tensor:
    """q [t, H, D] at absolute positions `q_positions` [t]; k, v [ctx, H_kv, D]; causal on positions."""
    kv_positions = torch.arange(k.shape[0], device=q.device)          # [ctx]
    allowed = kv_positions[None, :] <= q_positions[:, None]           # [t, ctx]
    return attend_masked(q, k, v, scale, allowed)


def attend_masked(q, k, v, scale: float, allowed) -> torch.Tensor:
    """q [t, H, D], k and v [ctx, H_kv, D], allowed [t, ctx] bool (query i reads key j) -> [t, H, D]."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)                            # [ctx, H, D]
    v = v.repeat_interleave(group, dim=1)                            # [ctx, H, D]
    scores = torch.einsum("thd,chd->htc", q, k) * scale              # [H, t, ctx]
    scores = scores.masked_fill(~allowed, float("-inf"))
    probs = torch.softmax(scores, dim=-1)                             # [H, t, ctx]
    return torch.einsum("htc,chd->thd", probs, v)                     # [t, H, D]


def _gather(cache, block_table, n: int, cache_scale, dtype):
    """One sequence's first n rows in `dtype`, dequantized when the cache is fp8: [n, H_kv, D]."""
    if is_fp8(cache):
        return gather_kv_dequant(cache, block_table, n, cache_scale, dtype)
    return gather_kv(cache, block_table, n).to(dtype)


def check_attention_args(q, k_cache, v_cache, block_tables, lens, lens_name: str, *, k_scale=None,
                         v_scale=None) -> None:
    """Shapes, dtypes, scales and GQA of the arguments shared by every paged attention implementation."""
    check_tensor("q", q, ndim=3, dtypes=FLOAT_DTYPES)
    check_tensor("k_cache", k_cache, ndim=4, dtypes=CACHE_DTYPES)
    check_tensor("v_cache", v_cache, ndim=4, dtypes=CACHE_DTYPES)
    check_shape("v_cache", v_cache, tuple(k_cache.shape), "like k_cache [N, S, H_kv, D]")
    D = q.shape[2]
    if k_cache.shape[3] != D:
        raise ValueError(f"k_cache: expected head_dim {D} like q, got shape {tuple(k_cache.shape)}")
    check_kv_scales(k_cache, v_cache, k_scale, v_scale)
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if not is_fp8(t) and t.dtype != q.dtype:
            raise TypeError(f"{name}: expected dtype {q.dtype} like q (or float8_e4m3fn with scales), "
                            f"got {t.dtype}")
    check_gqa(q.shape[1], k_cache.shape[2])
    check_tensor("block_tables", block_tables, ndim=2, dtypes=INDEX_DTYPES)
    check_tensor(lens_name, lens, ndim=1, dtypes=INDEX_DTYPES)
    B = block_tables.shape[0]
    check_shape(lens_name, lens, (B,), f"[B] with B = {B} block table rows")
    if B and int(lens.min()) < 1:
        raise ValueError(f"{lens_name}: expected every length >= 1, got {lens.tolist()}")


def paged_attention_decode(q, k_cache, v_cache, block_tables, context_lens, scale: float, *, k_scale=None,
                           v_scale=None):
    """Decode attention: q [B, H, D], one query per sequence at its last position -> out [B, H, D]."""
    check_attention_args(q, k_cache, v_cache, block_tables, context_lens, "context_lens", k_scale=k_scale,
                         v_scale=v_scale)
    check_shape("q", q, (block_tables.shape[0], None, None), "[B, H, D], one row per block table")
    cdt = _compute_dtype(q.dtype)
    out = torch.empty_like(q)                                         # [B, H, D]
    for b in range(q.shape[0]):
        n = int(context_lens[b])
        k = _gather(k_cache, block_tables[b], n, k_scale, cdt)        # [n, H_kv, D]
        v = _gather(v_cache, block_tables[b], n, v_scale, cdt)        # [n, H_kv, D]
        pos = torch.tensor([n - 1], device=q.device)
        out[b] = _attend(q[b : b + 1].to(cdt), k, v, scale, pos)[0].to(q.dtype)
    return out


def paged_attention_varlen(q, k_cache, v_cache, block_tables, seq_lens, cu_seqlens_q, scale: float, *,
                           k_scale=None, v_scale=None):
    """Causal attention for a batch of query chunks: q [T, H, D] -> out [T, H, D].

    Sequence b owns query rows cu_seqlens_q[b]:cu_seqlens_q[b+1]; those are the LAST q_len tokens of its
    seq_lens[b]-token context (already in the cache), so query i sits at position seq_len - q_len + i and
    attends to positions 0..seq_len - q_len + i.
    """
    check_attention_args(q, k_cache, v_cache, block_tables, seq_lens, "seq_lens", k_scale=k_scale,
                         v_scale=v_scale)
    B = block_tables.shape[0]
    check_tensor("cu_seqlens_q", cu_seqlens_q, ndim=1, dtypes=INDEX_DTYPES)
    check_shape("cu_seqlens_q", cu_seqlens_q, (B + 1,), "[B + 1]")
    cu = cu_seqlens_q.tolist()
    q_lens = [cu[b + 1] - cu[b] for b in range(B)]
    if cu[0] != 0 or cu[-1] != q.shape[0] or min(q_lens, default=0) < 0:
        raise ValueError(f"cu_seqlens_q: expected 0 = c_0 <= ... <= c_B = {q.shape[0]}, got {cu}")
    for b in range(B):
        if q_lens[b] > int(seq_lens[b]):
            raise ValueError(f"seq {b}: {q_lens[b]} query tokens but seq_lens[{b}] = {int(seq_lens[b])}")
    cdt = _compute_dtype(q.dtype)
    out = torch.empty_like(q)                                         # [T, H, D]
    for b in range(B):
        if q_lens[b] == 0:
            continue
        n = int(seq_lens[b])
        k = _gather(k_cache, block_tables[b], n, k_scale, cdt)        # [n, H_kv, D]
        v = _gather(v_cache, block_tables[b], n, v_scale, cdt)        # [n, H_kv, D]
        pos = torch.arange(n - q_lens[b], n, device=q.device)         # [q_len]
        out[cu[b] : cu[b + 1]] = _attend(q[cu[b] : cu[b + 1]].to(cdt), k, v, scale, pos).to(q.dtype)
    return out
