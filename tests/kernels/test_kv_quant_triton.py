"""The Triton store kernel's fp8 path (quantize on write) against the PyTorch reference, byte for byte.

On a GPU the kernel runs natively. Triton 3.9's interpreter converts fp32 to e4m3 wrongly, so on the CPU the
byte comparisons skip, saying why, whenever `interpreter_fp8_trouble()` finds the conversion still broken:
  - a round-up that carries into the next power of two loses the carry: 31.66 -> 16 instead of 32;
  - a tie does not go to the even mantissa: 0.0068359375, halfway between 3 and 4 x 2**-9, becomes
    0.005859375 instead of 0.0078125;
  - nothing saturates: 464 .. 480 become NaN, 1e4 becomes 320 (the kernel clamps to +-448 first, so this
    one never reaches the cache).
(Its fp8 LOADS are exact for every finite byte, which the decode kernel relies on.) The argument checks
run before any launch and are tested everywhere.
"""
from __future__ import annotations

import pytest
import torch

from pagedkv_lib.core.kv_quant import FP8_DTYPE
from pagedkv_lib.core.store_kvcache import store_kvcache
from pagedkv_lib.kernels import backend, store_kvcache_triton

DEVICE = backend.device()
PROBES = [31.66, 0.0068359375, 464.0, 1e4]       # one value per mistake (see the docstring)


def interpreter_fp8_trouble() -> str | None:
    """None when the kernel's fp32 -> e4m3 store is exact here, else what goes wrong, in one line."""
    if not backend.is_interpreted():
        return None
    x = torch.tensor(PROBES).view(1, 1, len(PROBES))                       # [T=1, H_kv=1, D]
    caches = [torch.zeros(1, 1, 1, len(PROBES), dtype=FP8_DTYPE) for _ in range(4)]
    slots = torch.zeros(1, dtype=torch.int32)
    store_kvcache_triton(x, x, caches[0], caches[1], slots, k_scale=1.0, v_scale=1.0)
    store_kvcache(x, x, caches[2], caches[3], slots, k_scale=1.0, v_scale=1.0)
    got, want = caches[0].float().flatten().tolist(), caches[2].float().flatten().tolist()
    if got == want:
        return None
    pairs = ", ".join(f"{p:g} -> {g:g} (not {w:g})"
                      for p, g, w in zip(PROBES, got, want, strict=True) if g != w)
    return f"Triton's interpreter converts fp32 to e4m3 wrongly ({pairs}); run these tests on a GPU"


TROUBLE = interpreter_fp8_trouble()
needs_exact_fp8 = pytest.mark.skipif(TROUBLE is not None, reason=TROUBLE or "")
CASES = [  # (T, H_kv, D, block_size, dtype, k_scale, v_scale)
    (1, 1, 16, 1, torch.float32, 1.0, 1.0),
    (7, 2, 24, 4, torch.float16, 0.05, 0.2),           # row of 48 elements
    (13, 3, 40, 16, torch.bfloat16, 0.011, 3.0),       # row of 120 elements
    (9, 8, 128, 256, torch.bfloat16, 0.37, 0.0123),
]


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.uint8).cpu()


def _garbage(num_blocks, block_size, H_kv, D, seed):
    g = torch.Generator().manual_seed(seed)
    raw = torch.randint(0, 256, (num_blocks, block_size, H_kv, D), generator=g, dtype=torch.uint8)
    return raw.view(FP8_DTYPE).to(DEVICE)                                   # [N, S, H_kv, D], NaN bytes too


@needs_exact_fp8
@pytest.mark.parametrize("T,H_kv,D,block_size,dtype,k_scale,v_scale", CASES)
def test_fp8_store_kernel_matches_the_reference_byte_for_byte(T, H_kv, D, block_size, dtype, k_scale,
                                                              v_scale):
    g = torch.Generator().manual_seed(T)
    key = (torch.randn(T, H_kv, D, generator=g) * 200 * k_scale).to(dtype).to(DEVICE)   # some past 448
    value = (torch.randn(T, H_kv, D, generator=g) * 50 * v_scale).to(dtype).to(DEVICE)
    key.view(-1)[:4] = torch.tensor([448.0, -465.0, 1e4, 2.0**-10], device=DEVICE).to(dtype) * k_scale
    num_blocks = -(-T // block_size) + 2
    slots = torch.randperm(num_blocks * block_size, generator=g)[:T].to(torch.int32)
    slots[1::4] = -1
    slots = slots.to(DEVICE)
    k_ref, v_ref = _garbage(num_blocks, block_size, H_kv, D, 1), _garbage(num_blocks, block_size, H_kv, D, 2)
    k_tri, v_tri = k_ref.clone(), v_ref.clone()
    store_kvcache(key, value, k_ref, v_ref, slots, k_scale=k_scale, v_scale=v_scale)
    scales = {"k_scale": torch.tensor([k_scale], device=DEVICE), "v_scale": v_scale}   # tensor or float
    store_kvcache_triton(key, value, k_tri, v_tri, slots, **scales)
    assert torch.equal(_bytes(k_tri), _bytes(k_ref)) and torch.equal(_bytes(v_tri), _bytes(v_ref))


def test_fp8_store_kernel_saturates_and_keeps_nan_like_the_reference():
    """Values past +-448 * scale, and NaN: saturation is checked in the interpreter too (the clamp happens
    before its faulty conversion, and +-448 converts exactly); NaN only where the conversion is exact."""
    key = torch.tensor([1e4, -1e4, 449.0, float("nan"), float("inf"), -float("inf"), 448.0, 0.0],
                       device=DEVICE).view(1, 1, 8)                       # [T=1, H_kv=1, D=8]
    caches = [torch.zeros(1, 1, 1, 8, dtype=FP8_DTYPE, device=DEVICE) for _ in range(2)]
    store_kvcache_triton(key, key, *caches, torch.zeros(1, dtype=torch.int32, device=DEVICE), k_scale=1.0,
                         v_scale=0.5)
    k, v = (c.float().flatten().cpu() for c in caches)
    assert k[[0, 1, 2, 4, 5, 6]].tolist() == [448.0, -448.0, 448.0, 448.0, -448.0, 448.0]
    assert v[[0, 1, 2, 4, 5, 6]].tolist() == [448.0, -448.0, 448.0, 448.0, -448.0, 448.0]
    assert k[7] == 0 and v[7] == 0
    if TROUBLE is None:                        # the interpreter stores a NaN as 384 whatever the kernel does
        assert torch.isnan(k[3]) and torch.isnan(v[3])


@needs_exact_fp8
def test_fp8_store_kernel_reads_key_and_value_as_views_of_a_fused_qkv():
    g = torch.Generator().manual_seed(5)
    T, H, H_kv, D = 6, 8, 2, 16
    qkv = (torch.randn(T, (H + 2 * H_kv) * D, generator=g) * 30).bfloat16().to(DEVICE)
    key = qkv[:, H * D : (H + H_kv) * D].view(T, H_kv, D)                   # [T, H_kv, D], row stride 192
    value = qkv[:, (H + H_kv) * D :].view(T, H_kv, D)
    slots = torch.tensor([3, -1, 0, 9, 4, 7], dtype=torch.int32, device=DEVICE)
    k_ref, v_ref = _garbage(3, 4, H_kv, D, 3), _garbage(3, 4, H_kv, D, 4)
    k_tri, v_tri = k_ref.clone(), v_ref.clone()
    store_kvcache(key, value, k_ref, v_ref, slots, k_scale=0.1, v_scale=0.07)
    store_kvcache_triton(key, value, k_tri, v_tri, slots, k_scale=0.1, v_scale=0.07)
    assert torch.equal(_bytes(k_tri), _bytes(k_ref)) and torch.equal(_bytes(v_tri), _bytes(v_ref))


def test_fp8_store_kernel_refuses_a_missing_or_bad_scale_before_launching():
    key = torch.randn(2, 1, 4, device=DEVICE)
    caches = [torch.zeros(2, 2, 1, 4, dtype=FP8_DTYPE, device=DEVICE) for _ in range(2)]
    slots = torch.tensor([0, 3], dtype=torch.int32, device=DEVICE)
    with pytest.raises(ValueError, match="v_scale: a float8_e4m3fn cache needs its scale"):
        store_kvcache_triton(key, key, *caches, slots, k_scale=1.0)
    with pytest.raises(ValueError, match="k_scale: expected a finite scale > 0, got -1.0"):
        store_kvcache_triton(key, key, *caches, slots, k_scale=-1.0, v_scale=1.0)
    with pytest.raises(TypeError, match=r"expected dtype in \(.*float8_e4m3fn\), got float8_e5m2"):
        store_kvcache_triton(key, key, *(c.to(torch.float8_e5m2) for c in caches), slots, k_scale=1.0,
                             v_scale=1.0)
    assert not any(_bytes(c).any() for c in caches)


@pytest.mark.skipif(not backend.is_interpreted(), reason="documents Triton's interpreter, not the GPU")
def test_the_interpreter_check_names_each_wrong_conversion_it_finds():
    if TROUBLE is None:
        pytest.skip("this Triton's interpreter converts fp32 to e4m3 exactly: the kernel tests above run")
    assert TROUBLE.startswith("Triton's interpreter converts fp32 to e4m3 wrongly (")
    assert "31.66 -> 16 (not 32)" in TROUBLE
