"""Exercise 124 (easy): store_kvcache. Notebook 03, "Slot mapping and store_kvcache".
Grade: python practice/judge.py 124

The model computes this step's keys and values for T tokens; store_kvcache writes each token's row into
the paged cache at its slot, the PyTorch twin of nano-vllm's Triton `store_kvcache_kernel` and of vLLM's
`reshape_and_cache_flash`. A slot of -1 marks a padded token: it is skipped, nothing is written.
Shapes: docs/conventions.md.
"""
from __future__ import annotations

import torch


def store_kvcache(key: torch.Tensor, value: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  slot_mapping: torch.Tensor) -> None:
    """k_cache/v_cache[slot] = key/value[t] for every token t whose slot is not -1, in place.

    Args:
        key, value: [T, H_kv, D] float tensors (fp32, fp16 or bf16, the caches' dtype); they may be
            non-contiguous views (e.g. slices of a fused qkv projection). Read-only.
        k_cache, v_cache: [N, S, H_kv, D] contiguous, same dtype. Slot s is block s // S, offset s % S.
            Written in place: exactly the rows of the slots in slot_mapping, every other row untouched.
        slot_mapping: [T] int32, slot_mapping[t] in [-1, N * S); distinct apart from -1. Read-only.
    Returns: None. Errors: inconsistent shapes may raise (the judge passes consistent ones).
    Example: slot_mapping = tensor([5, -1, 0]) writes key[0] to k_cache[1, 1] (S = 4) and key[2] to
        k_cache[0, 0]; key[1] is dropped, and likewise for value into v_cache.
    """
    raise NotImplementedError("store_kvcache: your code here (exercise 124)")
