"""Exercise 126 (medium): varlen paged attention. Notebook 05, "Varlen attention and cu_seqlens".
Grade: python practice/judge.py 126

One step of a batch that mixes decodes, full prefills and chunks of prefills. Sequence b owns the query
rows cu_seqlens_q[b]:cu_seqlens_q[b+1] (q_len of them); they are the LAST q_len tokens of its
seq_lens[b]-token context, whose keys and values are all in the paged cache already. So query i of b sits
at position seq_lens[b] - q_len + i and attends causally to positions 0..seq_lens[b] - q_len + i.
Shapes: docs/conventions.md.
"""
from __future__ import annotations

import torch


def paged_attention_varlen(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                           block_tables: torch.Tensor, seq_lens: torch.Tensor, cu_seqlens_q: torch.Tensor,
                           scale: float) -> torch.Tensor:
    """Causal attention of a batch of query chunks over their paged contexts.

    Args:
        q: [T, H, D] float (fp32, fp16 or bf16); T = cu_seqlens_q[-1]. Read-only.
        k_cache, v_cache: [N, S, H_kv, D], q's dtype, H a multiple of H_kv. Rows outside every context
            hold garbage, possibly NaN or huge: they must not reach the output. Read-only.
        block_tables: [B, M] int32, physical blocks of each sequence then -1 padding. Read-only.
        seq_lens: [B] int32, context length of each sequence (its new tokens included), each >= 1.
        cu_seqlens_q: [B + 1] int32, 0 = c_0 < c_1 < ... < c_B = T; 1 <= c_{b+1} - c_b <= seq_lens[b].
            Read-only, like seq_lens.
        scale: float multiplying q . k.
    Returns: a new [T, H, D] tensor of q's dtype; row c_b + i is the attention of query i of sequence b
        at position seq_lens[b] - q_len + i over keys 0..that position, query head h reading KV head
        h // (H // H_kv). Compute in fp32 (or better); tolerances as in exercise 125.
    Mutates nothing. Errors: inconsistent shapes may raise (the judge passes consistent ones).
    Example: seq_lens = [20], cu_seqlens_q = [0, 8]: the second half of a chunked prefill; query 0 is at
        position 12 and sees keys 0..12, query 7 at position 19 sees all 20.
    """
    # BEGIN SOLUTION
    T, H, D = q.shape
    S, H_kv = k_cache.shape[1], k_cache.shape[2]
    group = H // H_kv
    cu = cu_seqlens_q.tolist()
    out = torch.empty_like(q)                                         # [T, H, D]
    for b in range(block_tables.shape[0]):
        n, q_len = int(seq_lens[b]), cu[b + 1] - cu[b]
        blocks = block_tables[b, : -(-n // S)].long()                 # [ceil(n / S)]
        k = k_cache[blocks].reshape(-1, H_kv, D)[:n].float()          # [n, H_kv, D]
        v = v_cache[blocks].reshape(-1, H_kv, D)[:n].float()          # [n, H_kv, D]
        k = k.repeat_interleave(group, dim=1)                         # [n, H, D]
        v = v.repeat_interleave(group, dim=1)                         # [n, H, D]
        qb = q[cu[b] : cu[b + 1]].float()                             # [q_len, H, D]
        scores = torch.einsum("thd,nhd->htn", qb, k) * scale          # [H, q_len, n]
        pos = torch.arange(n - q_len, n)                              # [q_len] positions of the queries
        mask = torch.arange(n)[None, :] <= pos[:, None]               # [q_len, n] causal
        scores = scores.masked_fill(~mask, float("-inf"))
        out[cu[b] : cu[b + 1]] = torch.einsum("htn,nhd->thd", scores.softmax(-1), v).to(q.dtype)
    return out
    # END SOLUTION
