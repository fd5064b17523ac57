"""Exercise 125 (medium): paged decode attention. Notebook 04, "Paged decode attention".
Grade: python practice/judge.py 125

One decode step: each sequence has one new query, at the last position of its context, and attends to
all context_lens[b] tokens of its context, which sit in the paged cache: gather them through the block
table (drop the -1 padding, cut the unused tail of the last block), then softmax(q . k * scale) . v.
GQA: query head h reads KV head h // (H // H_kv).
Shapes: docs/conventions.md.
"""
from __future__ import annotations

import torch


def paged_attention_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                           block_tables: torch.Tensor, context_lens: torch.Tensor,
                           scale: float) -> torch.Tensor:
    """Attention of one query per sequence over its paged context.

    Args:
        q: [B, H, D] float (fp32, fp16 or bf16). Read-only.
        k_cache, v_cache: [N, S, H_kv, D], q's dtype, H a multiple of H_kv. Rows that are not part of a
            context hold garbage, possibly NaN or huge: they must not reach the output. Read-only.
        block_tables: [B, M] int32; row b lists the physical blocks of sequence b, then -1 padding.
            Read-only.
        context_lens: [B] int32, each >= 1: the tokens of sequence b are positions 0..context_lens[b]-1,
            position p at block block_tables[b, p // S], offset p % S. Read-only.
        scale: float multiplying q . k (usually D ** -0.5, but any value may come).
    Returns: a new [B, H, D] tensor of q's dtype: out[b, h] = softmax_j(q[b, h] . k_j * scale) . v_j over
        the context of b, with k_j, v_j of KV head h // (H // H_kv). Compute in fp32 (or better); the
        judge allows atol = rtol = 1e-4 in fp32, 3e-3 in fp16, 2e-2 in bf16.
    Mutates nothing. Errors: inconsistent shapes may raise (the judge passes consistent ones).
    Example: B = 1, context_lens = [6], block_tables = [[7, 2, -1]], S = 4: the keys are rows 0..3 of
        block 7 then rows 0..1 of block 2.
    """
    raise NotImplementedError("paged_attention_decode: your code here (exercise 125)")
