"""The independent reference: PyTorch SDPA on CONTIGUOUS K/V, in float64.

No block table is involved: each sequence's keys and values are passed as they were before paging.
Shapes: docs/conventions.md.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def sdpa_contiguous(q, keys, values, cu_seqlens_q, scale: float) -> torch.Tensor:
    """q [T, H, D]; keys[b], values[b] [n_b, H_kv, D]; b's queries are its LAST tokens -> [T, H, D] f64."""
    cu = [int(c) for c in cu_seqlens_q]
    out = torch.empty(q.shape, dtype=torch.float64, device=q.device)  # [T, H, D]
    for b, (k, v) in enumerate(zip(keys, values)):
        qb = q[cu[b] : cu[b + 1]].double().transpose(0, 1)           # [H, t, D]
        t, n = qb.shape[1], k.shape[0]
        if t == 0:
            continue
        group = q.shape[1] // k.shape[1]
        kb = k.double().transpose(0, 1).repeat_interleave(group, 0)  # [H, n, D]
        vb = v.double().transpose(0, 1).repeat_interleave(group, 0)  # [H, n, D]
        mask = torch.ones(t, n, dtype=torch.bool, device=q.device).tril(diagonal=n - t)  # [t, n]
        o = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask, scale=scale)     # [H, t, D]
        out[cu[b] : cu[b + 1]] = o.transpose(0, 1)
    return out


def sdpa_batch(batch) -> torch.Tensor:
    """sdpa_contiguous over a `PagedBatch`, with scale 1/sqrt(D)."""
    scale = batch.q.shape[-1] ** -0.5
    return sdpa_contiguous(batch.q, batch.keys, batch.values, batch.cu_seqlens_q.tolist(), scale)
