"""store_kvcache in Triton: one program per token copies its K and V rows into the paged cache.

Shapes: docs/conventions.md.
The kernel is nano-vllm's `store_kvcache_kernel` (`nanovllm/layers/attention.py`) with two additions: a row
of H_kv * D elements need not be a power of two (the tile is padded and masked), and any float dtype works.
A slot of -1 (a padded token, e.g. a CUDA-graph bucket filler) is skipped, as in vLLM's
`reshape_and_cache_flash`. `key` and `value` may be row views into a fused qkv tensor
(`qkv[:, H*D:(H+H_kv)*D].view(T, H_kv, D)`): the heads of one row are contiguous, rows are `stride(0)` apart.

Versions (one kernel; the `QUANT` constexpr selects):
    v1  caches in the key's dtype: copy the row.
    v2  fp8 caches (float8_e4m3fn): quantize on write, `key.float() / k_scale` (a correctly rounded division,
        `tl.div_rn`: Triton's `/` is `div.full.f32` on NVIDIA, up to 2 ulp off, which could flip an fp8
        rounding), clamped to +-448, rounded to nearest even by the conversion (pagedkv_lib.core.kv_quant).
        The scales are read from 1-element float32 tensors, so a CUDA graph can capture the launch.

    reference:  pagedkv_lib.core.store_kvcache.store_kvcache (PyTorch, same signature)
    kernel:     _store_kvcache_kernel, grid (T,)
    launcher:   store_kvcache_triton (checked); launch_store_kvcache (unchecked, for timing)

Memory traffic per stored token: read 2 * H_kv * D elements (key, value) + 1 slot; write 2 * H_kv * D elements
of the cache's dtype (v2: 2 * H_kv * D bytes, half of bf16's).
"""

import torch

from pagedkv_lib.core.kv_quant import FP8_MAX, is_fp8
from pagedkv_lib.core.store_kvcache import check_store_args, store_kvcache  # noqa: F401  (the reference, re-exported)

from .backend import MISSING_TRITON

try:
    import triton
    import triton.language as tl
except ImportError as exc:  # triton is optional off Linux
    raise ImportError(MISSING_TRITON) from exc


# ----------------------------------------------------------------------------------------------------------
# kernel

@triton.jit
def _quantize_fp8(x, scale, FP8_MAX: tl.constexpr):
    """x / scale in fp32, correctly rounded, saturated to +-FP8_MAX (the store then rounds to e4m3); a NaN
    stays NaN, as in torch.clamp (PTX's max/min would return the other operand)."""
    y = tl.div_rn(x.to(tl.float32), scale)
    y = tl.maximum(y, -FP8_MAX, propagate_nan=tl.PropagateNan.ALL)
    return tl.minimum(y, FP8_MAX, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _store_kvcache_kernel(
    key_ptr,            # [T, H_kv, D] rows `key_stride` apart, heads contiguous within a row
    key_stride,         # elements between two tokens' key rows (H_kv * D, or more for a qkv view)
    value_ptr,          # [T, H_kv, D] like key
    value_stride,       # elements between two tokens' value rows
    k_cache_ptr,        # [N, S, H_kv, D] contiguous: slot s starts at s * ROW
    v_cache_ptr,        # [N, S, H_kv, D] contiguous
    slot_mapping_ptr,   # [T] int32/int64, -1 = do not write
    k_scale_ptr,        # v2: [1] float32, stored key = key / k_scale (v1: unused)
    v_scale_ptr,        # v2: [1] float32
    ROW: tl.constexpr,        # H_kv * D, elements in one token's row
    BLOCK: tl.constexpr,      # next power of two >= ROW (tl.arange needs a power of two)
    QUANT: tl.constexpr,      # False: v1 (copy), True: v2 (fp8 caches)
    FP8_MAX: tl.constexpr,    # 448.0, the largest e4m3fn value
):
    token = tl.program_id(0)
    slot = tl.load(slot_mapping_ptr + token).to(tl.int64)            # read 1 index
    if slot < 0:
        return
    offs = tl.arange(0, BLOCK)                                        # [BLOCK]
    mask = offs < ROW
    key = tl.load(key_ptr + token.to(tl.int64) * key_stride + offs, mask=mask)        # read ROW
    value = tl.load(value_ptr + token.to(tl.int64) * value_stride + offs, mask=mask)  # read ROW
    if QUANT:
        key = _quantize_fp8(key, tl.load(k_scale_ptr), FP8_MAX)                     # [BLOCK] fp32
        value = _quantize_fp8(value, tl.load(v_scale_ptr), FP8_MAX)
    tl.store(k_cache_ptr + slot * ROW + offs, key.to(k_cache_ptr.dtype.element_ty), mask=mask)    # write ROW
    tl.store(v_cache_ptr + slot * ROW + offs, value.to(v_cache_ptr.dtype.element_ty), mask=mask)  # write ROW


# ----------------------------------------------------------------------------------------------------------
# launcher

def check_row_layout(name: str, t: torch.Tensor) -> None:
    """Each row of `t` [T, H_kv, D] must hold its H_kv * D elements contiguously (any row stride)."""
    H_kv, D = t.shape[1], t.shape[2]
    if t.stride(2) != 1 or (H_kv > 1 and t.stride(1) != D):
        raise ValueError(
            f"{name}: expected each token's heads contiguous (strides (*, {D}, 1) for [T, {H_kv}, {D}]), "
            f"got strides {tuple(t.stride())}"
        )


def store_kvcache_triton(key: torch.Tensor, value: torch.Tensor, k_cache: torch.Tensor,
                         v_cache: torch.Tensor, slot_mapping: torch.Tensor, *, k_scale=None,
                         v_scale=None, check_values: bool = True) -> None:
    """k_cache/v_cache[slot] = key/value[t] for every token t whose slot is not -1 (in place); fp8 caches
    store key / k_scale and value / v_scale, saturated to +-448. `check_values=False` skips the checks that
    read device values (slot range, tensor scales): host syncs on a GPU, off on the engine's path."""
    check_store_args(key, value, k_cache, v_cache, slot_mapping, k_scale=k_scale, v_scale=v_scale,
                     check_values=check_values)
    check_row_layout("key", key)
    check_row_layout("value", value)
    tensors = [key, value, k_cache, v_cache, slot_mapping]
    tensors += [s for s in (k_scale, v_scale) if isinstance(s, torch.Tensor)]
    devices = {t.device for t in tensors}
    if len(devices) != 1:
        raise ValueError(f"store_kvcache_triton: expected all tensors on one device, got {devices}")
    launch_store_kvcache(key, value, k_cache, v_cache, slot_mapping, k_scale=k_scale, v_scale=v_scale)


def scale_tensor(scale, device) -> torch.Tensor:
    """A scale as the kernel reads it: a 1-element float32 tensor on `device` (a tensor is used as it is)."""
    if isinstance(scale, torch.Tensor):
        return scale.reshape(1)
    return torch.tensor([float(scale)], dtype=torch.float32, device=device)


def launch_store_kvcache(key, value, k_cache, v_cache, slot_mapping, *, k_scale=None, v_scale=None) -> None:
    """Launch with no checks (for timing and CUDA graphs): validate once with store_kvcache_triton.
    For graphs pass the scales as 1-element float32 tensors (a Python float is copied to the device)."""
    T, H_kv, D = key.shape
    if T == 0:
        return
    row = H_kv * D
    block = triton.next_power_of_2(row)
    num_warps = 4 if block <= 2048 else 8
    quant = is_fp8(k_cache)
    k_s = scale_tensor(k_scale, key.device) if quant else slot_mapping   # v1: any pointer, never read
    v_s = scale_tensor(v_scale, key.device) if quant else slot_mapping
    _store_kvcache_kernel[(T,)](
        key, key.stride(0), value, value.stride(0), k_cache, v_cache, slot_mapping, k_s, v_s,
        ROW=row, BLOCK=block, QUANT=quant, FP8_MAX=FP8_MAX, num_warps=num_warps,
    )
