"""Exercise 134 (medium): FP8 KV cache. Notebook 13, "FP8 KV cache".
Grade: python practice/judge.py 134

An fp8 cache keeps each K/V element in one byte, float8 e4m3 (`torch.float8_e4m3fn`: 1 sign bit, 4 exponent
bits, 3 mantissa bits, largest value 448, no infinity), plus ONE float32 scale per tensor: `k_scale` for the
keys, `v_scale` for the values. The convention is vLLM's:

    store:  byte = e4m3( clamp(x.float() / scale, -448, 448) )      (the cast rounds to nearest, ties to even)
    read:   x   ~= byte.float() * scale

You write both halves in PyTorch: `store_kvcache_fp8` (exercise 124's store_kvcache, quantizing) and
`gather_kv_dequant` (one sequence's rows read back through its block table, dequantized).
Shapes: docs/conventions.md.
"""
from __future__ import annotations

import torch

FP8_MAX = 448.0                          # torch.finfo(torch.float8_e4m3fn).max


def store_kvcache_fp8(key: torch.Tensor, value: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                      slot_mapping: torch.Tensor, k_scale: float, v_scale: float) -> None:
    """Quantize this step's keys and values and write them into the fp8 cache by slot, in place.

    Args:
        key, value: [T, H_kv, D], both float32, or both float16, or both bfloat16; they may be
            non-contiguous views (slices of a fused qkv projection). Read-only.
        k_cache, v_cache: [N, S, H_kv, D] torch.float8_e4m3fn, contiguous. Slot s is block s // S, offset
            s % S. Written in place: exactly the rows of the slots in slot_mapping; every other byte stays.
        slot_mapping: [T] int32, each in [-1, N * S), distinct apart from -1. -1 marks a padded token: it
            is skipped, nothing is written. Read-only.
        k_scale, v_scale: Python floats, the scales of the keys and of the values.
    Each written element is, exactly,
        (key[t].float() / k_scale).clamp(-448, 448).to(torch.float8_e4m3fn)      (value[t] with v_scale)
    Divide in float32, not in the key's dtype (bf16 would round twice) and not by multiplying by 1 / k_scale
    (one ulp off in float32, which can move a value across an fp8 rounding boundary); saturate AFTER dividing
    (x / scale is what must fit); 448 is e4m3fn's maximum (240 is e4m3fnuz's, another format). The clamp
    makes saturation explicit: a plain cast of a value past 448 gives +-448 since torch 2.12 but NaN in older
    torch, and one NaN key would poison every softmax that reads it.
    Returns: None.
    Errors: ValueError, before anything is written, if k_scale or v_scale is not a finite number > 0.
    Judge: the caches' bytes are compared exactly (the rounding is deterministic, so the recipe above has
        one answer): every byte of both caches, written or not; inputs must be unchanged.
    Example: k_scale = 0.5 and key[t, 0] = [1.0, -300.0, 0.3] are stored as [2.0, -448.0, 0.625]
        (-600 saturates; 0.6 rounds to 0.625, the nearest of 0.5625 and 0.625).
    """
    # BEGIN SOLUTION
    for name, scale in (("k_scale", k_scale), ("v_scale", v_scale)):
        if not 0 < scale < float("inf"):
            raise ValueError(f"{name}: expected a finite scale > 0, got {scale}")
    H_kv, D = key.shape[1:]
    keep = slot_mapping >= 0                                              # [T]
    slots = slot_mapping[keep].long()                                     # [T']
    for x, cache, scale in ((key, k_cache, k_scale), (value, v_cache, v_scale)):
        q = (x[keep].float() / scale).clamp(-FP8_MAX, FP8_MAX)            # [T', H_kv, D] fp32
        cache.view(-1, H_kv, D)[slots] = q.to(torch.float8_e4m3fn)        # rows of [N * S, H_kv, D]
    # END SOLUTION


def gather_kv_dequant(cache: torch.Tensor, block_table: torch.Tensor, context_len: int, scale: float,
                      dtype: torch.dtype) -> torch.Tensor:
    """One sequence's first `context_len` cached rows, read through its block table and dequantized.

    Args:
        cache: [N, S, H_kv, D] torch.float8_e4m3fn (a k_cache or a v_cache). Rows outside the sequence's
            context hold garbage bytes, NaN encodings included: they must not reach the result. Read-only.
        block_table: [M] int32: the sequence's physical blocks in order, then -1 padding
            (M >= ceil(context_len / S)). Read-only.
        context_len: int >= 1; position p lives in block block_table[p // S], offset p % S.
        scale: Python float, the cache's scale.
        dtype: torch.float32, torch.float16 or torch.bfloat16, the dtype of the result.
    Returns: a new [context_len, H_kv, D] tensor of `dtype`: row p = cache[block_table[p // S], p % S].float()
        * scale, rounded to dtype.
    Errors: ValueError if scale is not a finite number > 0.
    Judge: compared at atol = 0, rtol = torch.finfo(dtype).eps (1.2e-7 fp32, 9.8e-4 fp16, 7.8e-3 bf16): the
        exact answer is one rounding of byte * scale to dtype; multiplying in float32 or float64 and then
        rounding, or in dtype itself, lands within that, while dividing by the scale, applying it twice or
        not at all does not. The shape and dtype must match exactly; the cache and table must be unchanged.
    Example: S = 4, block_table = [7, 2, -1], context_len = 6: rows 0..3 of block 7, then rows 0..1 of
        block 2, each byte times scale.
    """
    # BEGIN SOLUTION
    if not 0 < scale < float("inf"):
        raise ValueError(f"scale: expected a finite scale > 0, got {scale}")
    S = cache.shape[1]
    blocks = block_table[: -(-context_len // S)].long()                   # [ceil(context_len / S)]
    rows = cache[blocks].reshape(-1, *cache.shape[2:])[:context_len]      # [context_len, H_kv, D] fp8
    return (rows.float() * scale).to(dtype)                               # [context_len, H_kv, D]
    # END SOLUTION
