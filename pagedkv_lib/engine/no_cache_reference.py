"""The no-cache reference: recompute the WHOLE sequence at every step, with dense causal attention.

Shapes: docs/conventions.md. Nothing here touches a
block table, a slot or a cache: attention is PyTorch SDPA on the contiguous K/V of one sequence. The engine's
greedy outputs must equal `greedy_reference`'s token for token (tests/engine/test_engine_equivalence.py).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def dense_causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """q [T, H, D], k and v [T, H_kv, D] of ONE sequence -> out [T, H, D], causal, GQA by repeating K/V."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)                            # [T, H, D]
    v = v.repeat_interleave(group, dim=1)                            # [T, H, D]
    o = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                       is_causal=True, scale=scale)  # [H, T, D]
    return o.transpose(0, 1)                                         # [T, H, D]


@torch.inference_mode()
def greedy_reference(model, prompt: list[int], max_tokens: int, eos_token_id: int | None = None) -> list[int]:
    """Generate up to `max_tokens` tokens greedily, running the model on prompt + generated every step."""
    device = model.embed_tokens.weight.device
    token_ids = list(prompt)
    out: list[int] = []
    for _ in range(max_tokens):
        ids = torch.tensor(token_ids, dtype=torch.int64, device=device)                # [T]
        positions = torch.arange(len(token_ids), device=device)                         # [T]
        hidden = model(ids, positions)                                                  # [T, E]
        token = int(model.compute_logits(hidden[-1:]).argmax(dim=-1))
        token_ids.append(token)
        out.append(token)
        if token == eos_token_id:
            break
    return out
