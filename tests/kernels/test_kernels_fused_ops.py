"""The fused layer kernels (add_rms_norm, qk_norm_rope, silu_and_mul) against the PyTorch code of
`pagedkv_lib.engine.layers`, in Triton's interpreter on CPU and natively on a GPU.

Cases are data (rows, sizes, dtype), with sizes that are not powers of two (masked tails). The kernels round
once where PyTorch rounds after every operation: in float32 they agree to float32 rounding, in 16-bit to
about one unit in the last place (Triton's interpreter truncates float32 to bfloat16 instead of rounding it:
one unit more there).
"""
from __future__ import annotations

import pytest
import torch

from pagedkv_lib.core.kv_quant import FP8_DTYPE
from pagedkv_lib.engine.layers import RotaryEmbedding, rms_norm, silu_and_mul
from pagedkv_lib.kernels import backend
from pagedkv_lib.kernels.triton_fused_ops import add_rms_norm_triton, qk_norm_rope_triton, silu_and_mul_triton
from pagedkv_lib.kernels.triton_store_kvcache import store_kvcache_triton

DEVICE = backend.device()
TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 2e-3}   # max error / max |value|
EPS = 1e-6


def _randn(*shape, dtype, seed, scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=gen) * scale).to(dtype).to(DEVICE)


def _close(got, want, dtype):
    assert got.dtype == want.dtype and got.shape == want.shape
    err = ((got.double() - want.double()).abs().max() / want.double().abs().max()).item()
    assert err < TOL[dtype], f"max error over max |value|: {err:.2e} >= {TOL[dtype]:.0e}"


@pytest.mark.parametrize("T,E,dtype", [(1, 16, torch.float32), (5, 96, torch.float32),
                                       (3, 100, torch.bfloat16), (4, 64, torch.float16)])
def test_add_rms_norm_matches_pytorch_with_and_without_residual(T, E, dtype):
    x, r = _randn(T, E, dtype=dtype, seed=1, scale=3.0), _randn(T, E, dtype=dtype, seed=2)
    w = _randn(E, dtype=dtype, seed=3)
    _close(add_rms_norm_triton(x, w, EPS), rms_norm(x, w, EPS), dtype)
    out, h = add_rms_norm_triton(x, w, EPS, r)
    if dtype != torch.bfloat16 or not backend.is_interpreted():      # the interpreter truncates to bf16
        assert torch.equal(h, x + r), "the new residual is x + residual rounded once, as PyTorch's add"
    _close(h, x + r, dtype)
    _close(out, rms_norm(x + r, w, EPS), dtype)


def test_add_rms_norm_reads_a_strided_row_view():
    wide = _randn(3, 40, dtype=torch.float32, seed=4)
    x = wide[:, :24]                                                  # rows 40 apart
    w = _randn(24, dtype=torch.float32, seed=5)
    _close(add_rms_norm_triton(x, w, EPS), rms_norm(x, w, EPS), torch.float32)


def _qk_reference(qkv, positions, qw, kw, rotary, H, H_kv, D):
    T = qkv.shape[0]
    q, k, _ = qkv.split([H * D, H_kv * D, H_kv * D], dim=-1)
    q = rotary(positions, rms_norm(q.reshape(T, H, D), qw, EPS))     # [T, H, D]
    k = rotary(positions, rms_norm(k.reshape(T, H_kv, D), kw, EPS))  # [T, H_kv, D]
    return q, k


@pytest.mark.parametrize("T,H,H_kv,D,dtype", [(1, 2, 1, 16, torch.float32), (6, 6, 2, 24, torch.float32),
                                              (4, 4, 2, 32, torch.bfloat16), (3, 3, 3, 20, torch.float16)])
def test_qk_norm_rope_matches_rmsnorm_then_rotary(T, H, H_kv, D, dtype):
    qkv = _randn(T, (H + 2 * H_kv) * D, dtype=dtype, seed=T, scale=2.0)
    qw, kw = _randn(D, dtype=dtype, seed=7), _randn(D, dtype=dtype, seed=8)
    rotary = RotaryEmbedding(D, 64, 10_000.0).to(device=DEVICE, dtype=dtype)
    positions = torch.tensor([63, 0, 17, 5, 40, 2][:T], device=DEVICE)
    q, k = qk_norm_rope_triton(qkv, positions, qw, kw, rotary.cos, rotary.sin, H, H_kv, EPS)
    q_ref, k_ref = _qk_reference(qkv, positions, qw, kw, rotary, H, H_kv, D)
    assert q.is_contiguous() and k.is_contiguous()
    _close(q, q_ref, dtype)
    _close(k, k_ref, dtype)


@pytest.mark.parametrize("T,I,dtype", [(1, 8, torch.float32), (7, 100, torch.float32),
                                       (3, 1500, torch.bfloat16)])
def test_silu_and_mul_matches_pytorch(T, I, dtype):
    x = _randn(T, 2 * I, dtype=dtype, seed=I, scale=4.0)
    _close(silu_and_mul_triton(x), silu_and_mul(x), dtype)


@pytest.mark.parametrize("call,match", [
    (lambda: add_rms_norm_triton(torch.zeros(2, 8, device=DEVICE), torch.ones(4, device=DEVICE), EPS),
     "weight"),
    (lambda: silu_and_mul_triton(torch.zeros(2, 7, device=DEVICE)), r"\[T, 2I\]"),
    (lambda: qk_norm_rope_triton(torch.zeros(2, 50, device=DEVICE), torch.zeros(2, dtype=torch.int64,
                                 device=DEVICE), torch.ones(8, device=DEVICE), torch.ones(8, device=DEVICE),
                                 torch.ones(4, 4, device=DEVICE), torch.ones(4, 4, device=DEVICE), 2, 1, EPS),
     r"\(H \+ 2 H_kv\) \* D"),
])
def test_fused_launchers_reject_bad_shapes(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def _caches(N, S, H_kv, D, dtype):
    """NaN-filled caches (fp8: NaN is representable in e4m3fn): every slot not written stays NaN."""
    return [torch.full((N, S, H_kv, D), float("nan"), dtype=dtype, device=DEVICE) for _ in range(2)]


@pytest.mark.parametrize("T,H,H_kv,D,dtype,cache_dtype", [
    (5, 4, 2, 16, torch.float32, torch.float32), (3, 6, 3, 24, torch.bfloat16, torch.bfloat16),
    (4, 4, 1, 32, torch.float16, torch.float16), (6, 8, 2, 16, torch.bfloat16, FP8_DTYPE)])
def test_qk_norm_rope_with_the_store_writes_the_cache_as_store_kvcache_does(T, H, H_kv, D, dtype,
                                                                             cache_dtype):
    """v2 against v1 + store_kvcache_triton: the same q and k, the same cache bytes, padding slots (-1) and
    every slot not in slot_mapping untouched; fp8 caches quantized with the same scales."""
    qkv = _randn(T, (H + 2 * H_kv) * D, dtype=dtype, seed=11, scale=2.0)
    positions = torch.tensor([7, 0, 31, 2, 19, 5][:T], device=DEVICE)
    qw, kw = _randn(D, dtype=dtype, seed=12), _randn(D, dtype=dtype, seed=13)
    rotary = RotaryEmbedding(D, 64, 10_000.0).to(DEVICE)
    args = (qkv, positions, qw, kw, rotary.cos, rotary.sin, H, H_kv, EPS)
    slots = torch.tensor([9, -1, 0, 14, 3, -1][:T], dtype=torch.int32, device=DEVICE)
    scales = {}
    if cache_dtype == FP8_DTYPE:
        scales = {"k_scale": torch.tensor([0.5], device=DEVICE),
                  "v_scale": torch.tensor([0.25], device=DEVICE)}
    q1, k1 = qk_norm_rope_triton(*args)
    got = _caches(4, 4, H_kv, D, cache_dtype)
    q2, k2 = qk_norm_rope_triton(*args, k_cache=got[0], v_cache=got[1], slot_mapping=slots, **scales)
    if backend.is_interpreted():
        assert torch.equal(q1, q2) and torch.equal(k1, k2)
    _close(q2, q1, dtype)                    # compiled apart on a GPU: the same math, maybe other rounding
    _close(k2, k1, dtype)
    want = _caches(4, 4, H_kv, D, cache_dtype)
    v = qkv[:, (H + H_kv) * D:].view(T, H_kv, D)                      # [T, H_kv, D] a view of qkv
    store_kvcache_triton(k2, v, *want, slots, **scales)              # the unfused store of the same k
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g.float().isnan(), w.float().isnan()), "other slots than the mapped ones written"
        assert torch.equal(g.float().nan_to_num(), w.float().nan_to_num())


def test_qk_norm_rope_with_the_store_rejects_a_cache_of_the_wrong_shape():
    qkv = _randn(2, (4 + 2 * 2) * 16, dtype=torch.float32, seed=14)
    rotary = RotaryEmbedding(16, 8, 10_000.0).to(DEVICE)
    w = _randn(16, dtype=torch.float32, seed=15)
    bad = torch.zeros(4, 4, 3, 16, device=DEVICE)                    # H_kv 3, not 2
    with pytest.raises(ValueError, match="k_cache"):
        qk_norm_rope_triton(qkv, torch.zeros(2, dtype=torch.int64, device=DEVICE), w, w, rotary.cos,
                            rotary.sin, 4, 2, EPS, k_cache=bad, v_cache=bad,
                            slot_mapping=torch.zeros(2, dtype=torch.int32, device=DEVICE))
