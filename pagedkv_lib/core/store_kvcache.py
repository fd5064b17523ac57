"""store_kvcache in PyTorch: write this step's K/V rows into the paged cache by slot.

Shapes: docs/conventions.md.
The reference for nano-vllm's Triton `store_kvcache_kernel` (`nanovllm/layers/attention.py`) and vLLM's
`reshape_and_cache_flash` (`csrc/cache_kernels.cu`): a slot of -1 (a padded token) is not written.
"""
from __future__ import annotations

import torch

from .validation import FLOAT_DTYPES, INDEX_DTYPES, check_shape, check_tensor


def check_store_args(key, value, k_cache, v_cache, slot_mapping) -> None:
    """Validate the arguments of any store_kvcache implementation (also used by the Triton launcher)."""
    check_tensor("key", key, ndim=3, dtypes=FLOAT_DTYPES)
    T, H_kv, D = key.shape
    check_tensor("value", value, ndim=3, dtypes=FLOAT_DTYPES)
    check_shape("value", value, (T, H_kv, D), "[T, H_kv, D] like key")
    check_tensor("k_cache", k_cache, ndim=4, dtypes=FLOAT_DTYPES)
    check_shape("k_cache", k_cache, (None, None, H_kv, D), "[N, S, H_kv, D]")
    check_tensor("v_cache", v_cache, ndim=4, dtypes=FLOAT_DTYPES)
    check_shape("v_cache", v_cache, tuple(k_cache.shape), "like k_cache")
    for name, t in (("value", value), ("k_cache", k_cache), ("v_cache", v_cache)):
        if t.dtype != key.dtype:
            raise TypeError(f"{name}: expected dtype {key.dtype} like key, got {t.dtype}")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if not t.is_contiguous():
            raise ValueError(f"{name}: expected a contiguous tensor (writes go through a flat view)")
    check_tensor("slot_mapping", slot_mapping, ndim=1, dtypes=INDEX_DTYPES)
    check_shape("slot_mapping", slot_mapping, (T,), "[T], one slot per token")
    num_slots = k_cache.shape[0] * k_cache.shape[1]
    if T and (slot_mapping.min() < -1 or slot_mapping.max() >= num_slots):
        raise ValueError(
            f"slot_mapping: expected slots in [-1, {num_slots}), got min {int(slot_mapping.min())}, "
            f"max {int(slot_mapping.max())}"
        )


def store_kvcache(key: torch.Tensor, value: torch.Tensor, k_cache: torch.Tensor,
                  v_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """k_cache/v_cache[slot] = key/value[t] for every token t whose slot is not -1 (in place)."""
    check_store_args(key, value, k_cache, v_cache, slot_mapping)
    H_kv, D = key.shape[1:]
    keep = slot_mapping >= 0                                          # [T]
    slots = slot_mapping[keep].long()                                 # [T']
    k_cache.view(-1, H_kv, D)[slots] = key[keep]                     # rows of [N * S, H_kv, D]
    v_cache.view(-1, H_kv, D)[slots] = value[keep]
