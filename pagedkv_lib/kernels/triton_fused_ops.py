"""The decoder layer's small operations between its matmuls, each fused into one Triton kernel.

Shapes: docs/conventions.md (T tokens, E hidden size, I intermediate size, D head dim, P positions).
Written in PyTorch, RMSNorm is about eight kernels (upcast, square, mean, add, rsqrt, two multiplies,
downcast), rotary ten, SiLU-and-mul two: about 70 launches per layer, 2,000 per decode step of a 28-layer
model, each a few microseconds of mostly idle GPU. Fused, a layer runs ten kernels around its four matmuls.
The same fusions are nano-vllm's (`nanovllm/layers/layernorm.py`, `rotary_embedding.py`, `activation.py`,
there through `torch.compile`) and vLLM's CUDA ops (`fused_add_rms_norm`, `rotary_embedding`,
`silu_and_mul` in `csrc/layernorm_kernels.cu`, `csrc/pos_encoding_kernels.cu`, `csrc/activation_kernels.cu`).

    add_rms_norm    h = x + residual (rounded to x's dtype), out = h / rms(h) * weight; one program per
                    token (vLLM's fused_add_rms_norm). Without a residual: the plain RMSNorm.
    qk_norm_rope    Qwen3's per-head RMSNorm of q and k, then RoPE (half-split), read straight from the fused
                    qkv projection; writes q [T, H, D] and k [T, H_kv, D] contiguous. One program per token.
                    Versions (the STORE constexpr selects):
                      v1  q and k only; the attention layer then launches store_kvcache.
                      v2  also writes the rotated k and the v rows of qkv into the paged cache at each token's
                          slot (-1: nothing), quantized for an fp8 cache exactly as store_kvcache's v2 does
                          (triton_store_kvcache._quantize_fp8): one launch per layer fewer, and k and v are
                          not read back from memory. AMD's aiter has the same pair as one Triton
                          kernel (ROCm/aiter@50eca12 `aiter/ops/triton/fused_kv_cache.py`,
                          `fused_qk_rope_reshape_and_cache`).
    silu_and_mul    silu(gate) * up of the fused gate_up projection [T, 2I] -> [T, I].

Every kernel computes in float32 and rounds once at the end; the PyTorch references
(`pagedkv_lib.engine.layers`: `rms_norm`, `RotaryEmbedding`, `silu_and_mul`) round after each operation, so
the two agree to about one unit in the last place of the model's dtype
(tests/kernels/test_kernels_fused_ops.py).

Memory traffic per token: add_rms_norm reads 2E and writes 2E elements; qk_norm_rope reads and writes
(H + H_kv) * D; silu_and_mul reads 2I and writes I. No launcher reads a device value: CUDA graphs capture
them as they are.
"""
import torch

from pagedkv_lib.core.kv_quant import FP8_MAX, is_fp8

from .backend import MISSING_TRITON

try:
    import triton
    import triton.language as tl
except ImportError as exc:  # triton is optional off Linux
    raise ImportError(MISSING_TRITON) from exc

from pagedkv_lib.core.store_kvcache import check_store_args  # noqa: E402

from .triton_store_kvcache import _quantize_fp8, check_row_layout, scale_tensor  # noqa: E402

__all__ = ["add_rms_norm_triton", "qk_norm_rope_triton", "silu_and_mul_triton"]


# ----------------------------------------------------------------------------------------------------------
# kernels

@triton.jit
def _add_rms_norm_kernel(
    x_ptr,                  # [T, E] rows x_stride apart
    x_stride,
    residual_ptr,           # [T, E] contiguous, or x_ptr when HAS_RESIDUAL is False (never read)
    weight_ptr,             # [E]
    out_ptr,                # [T, E] contiguous, x's dtype
    residual_out_ptr,       # [T, E] contiguous: x + residual (HAS_RESIDUAL only)
    eps,
    E: tl.constexpr,              # hidden size
    BLOCK_E: tl.constexpr,        # next power of two >= E
    HAS_RESIDUAL: tl.constexpr,
):
    t = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_E)                                      # [BLOCK_E]
    mask = offs < E
    x = tl.load(x_ptr + t * x_stride + offs, mask=mask, other=0.0)    # read E
    if HAS_RESIDUAL:
        r = tl.load(residual_ptr + t * E + offs, mask=mask, other=0.0)  # read E
        x = (x.to(tl.float32) + r.to(tl.float32)).to(out_ptr.dtype.element_ty)  # rounded like x + residual
        tl.store(residual_out_ptr + t * E + offs, x, mask=mask)      # write E
    h = x.to(tl.float32)                                              # [BLOCK_E]
    inv_rms = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / E + eps)
    w = tl.load(weight_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + t * E + offs, (h * inv_rms * w).to(out_ptr.dtype.element_ty), mask=mask)  # write E


@triton.jit
def _qk_norm_rope_kernel(
    qkv_ptr,                # [T, (H + 2 H_kv) * D]: q heads, k heads, v heads; rows qkv_stride apart
    qkv_stride,
    positions_ptr,          # [T] int64
    q_weight_ptr,           # [D] q_norm's weight
    k_weight_ptr,           # [D] k_norm's weight
    cos_ptr,                # [P, D / 2] rows D / 2 apart
    sin_ptr,                # [P, D / 2]
    q_out_ptr,              # [T, H, D] contiguous
    k_out_ptr,              # [T, H_kv, D] contiguous
    slot_mapping_ptr,       # v2: [T] int32/int64, -1 = do not write (v1: unused)
    k_cache_ptr,            # v2: [N, S, H_kv, D] contiguous: slot s starts at s * H_kv * D
    v_cache_ptr,            # v2: [N, S, H_kv, D] contiguous
    k_scale_ptr,            # v2, fp8 caches: [1] float32, stored key = key / k_scale
    v_scale_ptr,            # v2, fp8 caches: [1] float32
    eps,
    NUM_HEADS: tl.constexpr,      # H
    NUM_KV_HEADS: tl.constexpr,   # H_kv
    HEAD_DIM: tl.constexpr,       # D
    HALF: tl.constexpr,           # D / 2
    BLOCK_H: tl.constexpr,        # next power of two >= H + H_kv
    BLOCK_HALF: tl.constexpr,     # next power of two >= D / 2
    STORE: tl.constexpr,          # False: v1, True: v2 (k and v into the cache)
    QUANT: tl.constexpr,          # v2: the cache is fp8 e4m3
    BLOCK_ROW: tl.constexpr,      # v2: next power of two >= H_kv * D (one token's v row)
    FP8_MAX: tl.constexpr,        # 448.0, the largest e4m3fn value
):
    t = tl.program_id(0).to(tl.int64)
    pos = tl.load(positions_ptr + t)                                  # read 1
    offs_h = tl.arange(0, BLOCK_H)                                    # [BLOCK_H] q heads, then k heads
    offs_i = tl.arange(0, BLOCK_HALF)                                 # [BLOCK_HALF] pair index
    h_mask = offs_h < NUM_HEADS + NUM_KV_HEADS
    i_mask = offs_i < HALF
    mask = h_mask[:, None] & i_mask[None, :]                          # [BLOCK_H, BLOCK_HALF]
    first = qkv_ptr + t * qkv_stride + offs_h[:, None] * HEAD_DIM + offs_i[None, :]
    x1 = tl.load(first, mask=mask, other=0.0).to(tl.float32)          # [BLOCK_H, BLOCK_HALF] first halves
    x2 = tl.load(first + HALF, mask=mask, other=0.0).to(tl.float32)   # second halves
    inv_rms = 1.0 / tl.sqrt((tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / HEAD_DIM + eps)  # [BLOCK_H]
    is_q = (offs_h < NUM_HEADS)[:, None]                              # [BLOCK_H, 1]
    is_k = (offs_h >= NUM_HEADS)[:, None]                             # [BLOCK_H, 1] (no ~: triton 3.0)
    wq1 = tl.load(q_weight_ptr + offs_i, mask=i_mask, other=0.0).to(tl.float32)   # [BLOCK_HALF]
    wq2 = tl.load(q_weight_ptr + HALF + offs_i, mask=i_mask, other=0.0).to(tl.float32)
    wk1 = tl.load(k_weight_ptr + offs_i, mask=i_mask, other=0.0).to(tl.float32)
    wk2 = tl.load(k_weight_ptr + HALF + offs_i, mask=i_mask, other=0.0).to(tl.float32)
    w1 = tl.where(is_q, wq1[None, :], wk1[None, :])                   # [BLOCK_H, BLOCK_HALF]
    w2 = tl.where(is_q, wq2[None, :], wk2[None, :])
    dtype = q_out_ptr.dtype.element_ty
    y1 = (x1 * inv_rms[:, None] * w1).to(dtype).to(tl.float32)       # the norm's output, rounded as RMSNorm's
    y2 = (x2 * inv_rms[:, None] * w2).to(dtype).to(tl.float32)
    cos = tl.load(cos_ptr + pos * HALF + offs_i, mask=i_mask, other=0.0).to(tl.float32)[None, :]
    sin = tl.load(sin_ptr + pos * HALF + offs_i, mask=i_mask, other=0.0).to(tl.float32)[None, :]
    o1 = (y1 * cos - y2 * sin).to(dtype)                              # [BLOCK_H, BLOCK_HALF]
    o2 = (y2 * cos + y1 * sin).to(dtype)
    q_rows = (t * NUM_HEADS + offs_h) * HEAD_DIM                      # [BLOCK_H] rows of q_out
    k_rows = (t * NUM_KV_HEADS + offs_h - NUM_HEADS) * HEAD_DIM       # [BLOCK_H] rows of k_out
    q_mask = mask & is_q
    k_mask = mask & is_k
    tl.store(q_out_ptr + q_rows[:, None] + offs_i[None, :], o1, mask=q_mask)           # write H*D
    tl.store(q_out_ptr + q_rows[:, None] + HALF + offs_i[None, :], o2, mask=q_mask)
    tl.store(k_out_ptr + k_rows[:, None] + offs_i[None, :], o1, mask=k_mask)           # write H_kv*D
    tl.store(k_out_ptr + k_rows[:, None] + HALF + offs_i[None, :], o2, mask=k_mask)
    if STORE:
        slot = tl.load(slot_mapping_ptr + t).to(tl.int64)            # read 1 index
        offs_v = tl.arange(0, BLOCK_ROW)                              # [BLOCK_ROW]
        v_mask = (offs_v < NUM_KV_HEADS * HEAD_DIM) & ((offs_v * 0 + slot) >= 0)    # [BLOCK_ROW]
        v = tl.load(qkv_ptr + t * qkv_stride + (NUM_HEADS + NUM_KV_HEADS) * HEAD_DIM + offs_v,
                    mask=v_mask, other=0.0)                           # read H_kv*D
        if QUANT:
            kc1 = _quantize_fp8(o1, tl.load(k_scale_ptr), FP8_MAX)   # [BLOCK_H, BLOCK_HALF] fp32
            kc2 = _quantize_fp8(o2, tl.load(k_scale_ptr), FP8_MAX)
            v = _quantize_fp8(v, tl.load(v_scale_ptr), FP8_MAX)      # [BLOCK_ROW] fp32
        else:
            kc1 = o1
            kc2 = o2
        row = NUM_KV_HEADS * HEAD_DIM                                 # elements of one slot
        cache_rows = slot * row + (offs_h - NUM_HEADS) * HEAD_DIM     # [BLOCK_H] rows of k_cache
        c_mask = k_mask & ((k_rows[:, None] * 0 + slot) >= 0)        # [BLOCK_H, BLOCK_HALF]
        k_at = k_cache_ptr + cache_rows[:, None] + offs_i[None, :]    # [BLOCK_H, BLOCK_HALF] first halves
        tl.store(k_at, kc1.to(k_cache_ptr.dtype.element_ty), mask=c_mask)
        tl.store(k_at + HALF, kc2.to(k_cache_ptr.dtype.element_ty), mask=c_mask)    # write H_kv*D
        tl.store(v_cache_ptr + slot * row + offs_v, v.to(v_cache_ptr.dtype.element_ty), mask=v_mask)


@triton.jit
def _silu_and_mul_kernel(
    x_ptr,                  # [T, 2I] contiguous: gate, then up
    out_ptr,                # [T, I] contiguous
    I: tl.constexpr,              # intermediate size
    BLOCK: tl.constexpr,          # columns per program
):
    t = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)             # [BLOCK]
    mask = offs < I
    gate = tl.load(x_ptr + t * 2 * I + offs, mask=mask, other=0.0).to(tl.float32)      # read BLOCK
    up = tl.load(x_ptr + t * 2 * I + I + offs, mask=mask, other=0.0).to(tl.float32)    # read BLOCK
    out = gate / (1.0 + tl.exp(-gate)) * up                           # silu(gate) * up
    tl.store(out_ptr + t * I + offs, out.to(out_ptr.dtype.element_ty), mask=mask)      # write BLOCK


# ----------------------------------------------------------------------------------------------------------
# launchers (shapes and dtypes are host metadata: checking them reads nothing from the device)

def _check_rows(name: str, t: torch.Tensor, ndim: int = 2) -> None:
    if not isinstance(t, torch.Tensor) or t.dim() != ndim or t.stride(-1) != 1:
        got = f"shape {tuple(t.shape)}, strides {tuple(t.stride())}" if isinstance(t, torch.Tensor) else t
        raise ValueError(f"{name}: expected a {ndim}-d tensor with unit stride in its last dimension, "
                         f"got {got}")


def add_rms_norm_triton(x: torch.Tensor, weight: torch.Tensor, eps: float,
                        residual: torch.Tensor | None = None):
    """x [T, E] -> x / rms(x) * weight; with `residual` [T, E]: h = x + residual, returns (norm(h), h)."""
    _check_rows("x", x)
    T, E = x.shape
    if tuple(weight.shape) != (E,):
        raise ValueError(f"weight: expected shape ({E},) [E], got {tuple(weight.shape)}")
    if residual is not None and (tuple(residual.shape) != (T, E) or not residual.is_contiguous()
                                 or residual.dtype != x.dtype):
        raise ValueError(f"residual: expected a contiguous {tuple(x.shape)} {x.dtype} tensor like x, got "
                         f"{tuple(residual.shape)} {residual.dtype}")
    out = torch.empty(T, E, dtype=x.dtype, device=x.device)           # [T, E]
    h = torch.empty_like(out) if residual is not None else out        # [T, E]
    if T:
        _add_rms_norm_kernel[(T,)](
            x, x.stride(0), residual if residual is not None else x, weight, out, h, eps,
            E=E, BLOCK_E=triton.next_power_of_2(E), HAS_RESIDUAL=residual is not None,
            num_warps=4 if E <= 2048 else 8,
        )
    return (out, h) if residual is not None else out


def qk_norm_rope_triton(qkv: torch.Tensor, positions: torch.Tensor, q_weight: torch.Tensor,
                        k_weight: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, num_heads: int,
                        num_kv_heads: int, eps: float, *, k_cache: torch.Tensor | None = None,
                        v_cache: torch.Tensor | None = None, slot_mapping: torch.Tensor | None = None,
                        k_scale=None, v_scale=None) -> tuple[torch.Tensor, torch.Tensor]:
    """qkv [T, (H + 2 H_kv) * D] -> q [T, H, D], k [T, H_kv, D]: per-head RMSNorm, then RoPE at `positions`.

    cos, sin [P, D / 2]: the rotary tables (RotaryEmbedding's buffers), indexed by position.
    With k_cache, v_cache [N, S, H_kv, D] and slot_mapping [T] (v2): also k -> k_cache[slot] and qkv's v
    rows -> v_cache[slot], as store_kvcache_triton(k, v, ...) would (its shape checks; fp8 scales as 1-element
    float32 tensors or floats; no check reads a device value).
    """
    _check_rows("qkv", qkv)
    _check_rows("cos", cos)
    T = qkv.shape[0]
    D = q_weight.shape[0]
    if qkv.shape[1] != (num_heads + 2 * num_kv_heads) * D:
        raise ValueError(f"qkv: expected {(num_heads + 2 * num_kv_heads) * D} columns "
                         f"((H + 2 H_kv) * D), got {qkv.shape[1]}")
    if tuple(cos.shape) != tuple(sin.shape) or cos.shape[1] != D // 2 or not cos.is_contiguous():
        raise ValueError(f"cos, sin: expected contiguous [P, {D // 2}] tables, got {tuple(cos.shape)}, "
                         f"{tuple(sin.shape)}")
    if tuple(positions.shape) != (T,):
        raise ValueError(f"positions: expected shape ({T},) [T], got {tuple(positions.shape)}")
    q = torch.empty(T, num_heads, D, dtype=qkv.dtype, device=qkv.device)      # [T, H, D]
    k = torch.empty(T, num_kv_heads, D, dtype=qkv.dtype, device=qkv.device)   # [T, H_kv, D]
    store = k_cache is not None
    cache_args = (positions,) * 5                                     # v1: any pointers, never read
    quant = False
    if store:
        v = qkv[:, (num_heads + num_kv_heads) * D:].view(T, num_kv_heads, D)   # [T, H_kv, D] a view
        check_store_args(k, v, k_cache, v_cache, slot_mapping, k_scale=k_scale, v_scale=v_scale,
                         check_values=False)
        check_row_layout("qkv's v", v)
        quant = is_fp8(k_cache)
        scales = (slot_mapping, slot_mapping)                         # v2 without fp8: never read
        if quant:
            scales = (scale_tensor(k_scale, qkv.device), scale_tensor(v_scale, qkv.device))
        cache_args = (slot_mapping, k_cache, v_cache, *scales)
    if T:
        _qk_norm_rope_kernel[(T,)](
            qkv, qkv.stride(0), positions, q_weight, k_weight, cos, sin, q, k, *cache_args, eps,
            NUM_HEADS=num_heads, NUM_KV_HEADS=num_kv_heads, HEAD_DIM=D, HALF=D // 2,
            BLOCK_H=triton.next_power_of_2(num_heads + num_kv_heads),
            BLOCK_HALF=triton.next_power_of_2(D // 2), STORE=store, QUANT=quant,
            BLOCK_ROW=triton.next_power_of_2(num_kv_heads * D), FP8_MAX=FP8_MAX, num_warps=4,
        )
    return q, k


def silu_and_mul_triton(x: torch.Tensor) -> torch.Tensor:
    """x [T, 2I] (gate, then up) -> silu(gate) * up [T, I]."""
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] % 2 or not x.is_contiguous():
        raise ValueError(f"x: expected a contiguous [T, 2I] tensor, got "
                         f"{tuple(x.shape) if isinstance(x, torch.Tensor) else x}")
    T, I = x.shape[0], x.shape[1] // 2
    out = torch.empty(T, I, dtype=x.dtype, device=x.device)          # [T, I]
    block = min(1024, triton.next_power_of_2(I))
    if T:
        _silu_and_mul_kernel[(T, triton.cdiv(I, block))](x, out, I=I, BLOCK=block, num_warps=4)
    return out
