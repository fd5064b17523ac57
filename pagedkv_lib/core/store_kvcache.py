"""store_kvcache in PyTorch: write this step's K/V rows into the paged cache by slot.

Shapes: docs/conventions.md.
The reference for nano-vllm's Triton `store_kvcache_kernel` (`nanovllm/layers/attention.py`) and vLLM's
`reshape_and_cache_flash` (`csrc/cache_kernels.cu`): a slot of -1 (a padded token) is not written.
An fp8 cache (float8_e4m3fn) is written quantized, `key / k_scale` clamped to +-448 (`kv_quant`), and then
needs `k_scale`, `v_scale`; a 16/32-bit cache takes the rows as they are and no scale.
"""
from __future__ import annotations

import torch

from .kv_quant import CACHE_DTYPES, check_kv_scales, is_fp8, quantize_fp8
from .validation import FLOAT_DTYPES, INDEX_DTYPES, check_shape, check_tensor


def check_store_args(key, value, k_cache, v_cache, slot_mapping, *, k_scale=None, v_scale=None,
                     check_values: bool = True) -> None:
    """Validate the arguments of any store_kvcache implementation (also used by the Triton launcher).

    `check_values=False` skips what reads device values (the slots' range, tensor scales): on a GPU each
    read is a host sync, which the engine's step must not pay (its debug switch turns them back on)."""
    check_tensor("key", key, ndim=3, dtypes=FLOAT_DTYPES)
    T, H_kv, D = key.shape
    check_tensor("value", value, ndim=3, dtypes=FLOAT_DTYPES)
    check_shape("value", value, (T, H_kv, D), "[T, H_kv, D] like key")
    if value.dtype != key.dtype:
        raise TypeError(f"value: expected dtype {key.dtype} like key, got {value.dtype}")
    check_tensor("k_cache", k_cache, ndim=4, dtypes=CACHE_DTYPES)
    check_shape("k_cache", k_cache, (None, None, H_kv, D), "[N, S, H_kv, D]")
    check_tensor("v_cache", v_cache, ndim=4, dtypes=CACHE_DTYPES)
    check_shape("v_cache", v_cache, tuple(k_cache.shape), "like k_cache")
    check_kv_scales(k_cache, v_cache, k_scale, v_scale, check_values)
    if not is_fp8(k_cache):
        for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
            if t.dtype != key.dtype:
                raise TypeError(f"{name}: expected dtype {key.dtype} like key (or float8_e4m3fn with "
                                f"scales), got {t.dtype}")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if not t.is_contiguous():
            raise ValueError(f"{name}: expected a contiguous tensor (writes go through a flat view)")
    check_tensor("slot_mapping", slot_mapping, ndim=1, dtypes=INDEX_DTYPES)
    check_shape("slot_mapping", slot_mapping, (T,), "[T], one slot per token")
    num_slots = k_cache.shape[0] * k_cache.shape[1]
    if check_values and T and (slot_mapping.min() < -1 or slot_mapping.max() >= num_slots):
        raise ValueError(
            f"slot_mapping: expected slots in [-1, {num_slots}), got min {int(slot_mapping.min())}, "
            f"max {int(slot_mapping.max())}"
        )


def store_kvcache(key: torch.Tensor, value: torch.Tensor, k_cache: torch.Tensor,
                  v_cache: torch.Tensor, slot_mapping: torch.Tensor, *, k_scale=None, v_scale=None) -> None:
    """k_cache/v_cache[slot] = key/value[t] for every token t whose slot is not -1 (in place).

    fp8 caches store quantize_fp8(key[t], k_scale) and quantize_fp8(value[t], v_scale) instead.
    """
    check_store_args(key, value, k_cache, v_cache, slot_mapping, k_scale=k_scale, v_scale=v_scale)
    H_kv, D = key.shape[1:]
    keep = slot_mapping >= 0                                          # [T]
    slots = slot_mapping[keep].long()                                 # [T']
    k_rows, v_rows = key[keep], value[keep]                           # [T', H_kv, D] each
    if is_fp8(k_cache):
        k_rows, v_rows = quantize_fp8(k_rows, k_scale), quantize_fp8(v_rows, v_scale)  # [T', H_kv, D] e4m3
    k_cache.view(-1, H_kv, D)[slots] = k_rows                        # rows of [N * S, H_kv, D]
    v_cache.view(-1, H_kv, D)[slots] = v_rows
