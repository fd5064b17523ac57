"""The FP8 (e4m3) KV cache in PyTorch: quantize on store, dequantize on read, scales checked, against
independent references (the e4m3 grid built from its bit layout, per-token loops, fp64 SDPA)."""
from __future__ import annotations

import pytest
import torch

from pagedkv_lib.core.kv_quant import (
    FP8_DTYPE,
    FP8_MAX,
    calibrate_kv_scales,
    compute_scale,
    dequantize_fp8,
    gather_kv_dequant,
    quantize_fp8,
)
from pagedkv_lib.core.paged_attention import paged_attention_decode, paged_attention_varlen
from pagedkv_lib.core.store_kvcache import store_kvcache
from pagedkv_lib.testing.paged_batch import make_paged_batch
from pagedkv_lib.testing.sdpa_reference import sdpa_contiguous


def e4m3_grid() -> tuple[torch.Tensor, torch.Tensor]:
    """Every finite e4m3fn value (float64, sorted) and its byte, from the format's definition: sign,
    4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is subnormal; S.1111.111 is NaN."""
    values, codes = [], []
    for byte in range(256):
        sign, exp, mant = byte >> 7, (byte >> 3) & 0xF, byte & 0x7
        if exp == 15 and mant == 7:
            continue
        mag = mant / 8 * 2.0**-6 if exp == 0 else (1 + mant / 8) * 2.0 ** (exp - 7)
        values.append(-mag if sign else mag)
        codes.append(byte)
    order = sorted(range(len(values)), key=lambda i: (values[i], codes[i]))
    return (torch.tensor([values[i] for i in order], dtype=torch.float64),
            torch.tensor([codes[i] for i in order]))


def reference_quantize(x: torch.Tensor, scale: float) -> torch.Tensor:
    """Bytes of x / scale (fp32 division) saturated to +-448, rounded to the nearest grid value, ties to the
    even mantissa, with no torch fp8 cast involved."""
    grid, codes = e4m3_grid()
    y = (x.float() / torch.tensor(scale, dtype=torch.float32)).double().clamp(-FP8_MAX, FP8_MAX).flatten()
    hi = torch.searchsorted(grid, y).clamp(1, len(grid) - 1)
    lo = hi - 1
    d_lo, d_hi = y - grid[lo], grid[hi] - y
    pick = torch.where(d_lo < d_hi, lo, torch.where(d_hi < d_lo, hi, torch.where(codes[lo] % 2 == 0, lo, hi)))
    out = codes[pick]
    zero = grid[pick] == 0                                            # the sign of zero follows y's
    out[zero] = torch.where(torch.signbit(y[zero]), 0x80, 0x00)
    return out.to(torch.uint8).view(x.shape)


def probe_values(seed: int = 0) -> torch.Tensor:
    """Every grid value, every midpoint between neighbours, +-464 and beyond, random values of every scale."""
    grid, _ = e4m3_grid()
    mids = (grid[:-1] + grid[1:]) / 2
    g = torch.Generator().manual_seed(seed)
    spread = torch.logspace(-4, 3, 4000, dtype=torch.float64)
    rand = torch.randn(4000, generator=g, dtype=torch.float64) * spread
    edges = torch.tensor([447.0, 449.0, 463.9, 464.0, 464.1, 479.0, 480.0, 1e6, 2.0**-10, 2.0**-9 * 1.5])
    return torch.cat([grid, mids, rand, edges, -edges]).float()


@pytest.mark.parametrize("scale", [1.0, 0.37, 2.5e-3, 17.0])
def test_quantize_is_division_saturation_and_nearest_even_rounding_on_the_e4m3_grid(scale):
    x = probe_values() * scale
    got = quantize_fp8(x, scale).view(torch.uint8)
    assert torch.equal(got, reference_quantize(x, scale))


def test_values_past_448_times_scale_saturate_and_nan_stays_nan():
    x = torch.tensor([448.0, 449.0, 465.0, 1e30, float("inf"), -500.0, -float("inf"), float("nan")]) * 0.5
    got = quantize_fp8(x, 0.5).float()
    assert got[:7].tolist() == [448.0] * 5 + [-448.0] * 2
    assert torch.isnan(got[7])


def test_dequantize_is_byte_times_scale_rounded_once():
    every_byte = torch.arange(256, dtype=torch.uint8).view(FP8_DTYPE)
    finite = ~torch.isnan(every_byte.float())
    grid, codes = e4m3_grid()
    by_code = dict(zip(codes.tolist(), grid.tolist(), strict=True))
    scale = float(torch.tensor(0.37, dtype=torch.float32))              # the scale as the cache uses it
    exact = torch.tensor([by_code[int(b)] for b in torch.arange(256)[finite]], dtype=torch.float64) * scale
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        got = dequantize_fp8(every_byte[finite], 0.37, dtype)
        assert got.dtype == dtype
        assert torch.equal(got, (exact.float()).to(dtype))   # one rounding of an exact fp32 product


def test_round_trip_error_is_at_most_half_a_step_of_the_e4m3_grid():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(10_000, generator=g) * 3
    scale = compute_scale(x)
    back = dequantize_fp8(quantize_fp8(x, scale), scale).double()
    rel = ((back - x.double()).abs() / x.double().abs().clamp(min=2.0**-6 * scale))
    assert float(rel.max()) <= 2.0**-4 + 1e-6        # 3 mantissa bits: half a step is 2**-4 of the value


def test_compute_scale_maps_amax_onto_448_and_calibrates_k_and_v_apart():
    x = torch.tensor([[0.5, -7.0], [3.0, 1.0]])
    assert compute_scale(x) == 7.0 / 448
    assert quantize_fp8(x, compute_scale(x)).float().abs().max() == FP8_MAX
    assert compute_scale(torch.zeros(3)) == 1.0
    assert calibrate_kv_scales(x, 2 * x, 200.0, 100.0) == (7.0 / 200, 14.0 / 100)
    with pytest.raises(ValueError, match="finite"):
        compute_scale(torch.tensor([1.0, float("nan")]))


def loop_store_fp8(key, value, k_cache, v_cache, slots, k_scale, v_scale):
    """Per-token reference: one row at a time, quantized with the independent grid rounding."""
    S = k_cache.shape[1]
    for t, s in enumerate(slots):
        if s != -1:
            k_cache.view(torch.uint8)[s // S, s % S] = reference_quantize(key[t], k_scale)
            v_cache.view(torch.uint8)[s // S, s % S] = reference_quantize(value[t], v_scale)


@pytest.mark.parametrize("block_size", [1, 4, 16, 256])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_store_fp8_matches_a_per_token_loop_skips_padding_and_leaves_other_bytes(block_size, dtype):
    g = torch.Generator().manual_seed(block_size)
    N, H_kv, D, T = 16, 2, 8, 13
    garbage = torch.randint(0, 256, (2, N, block_size, H_kv, D), generator=g, dtype=torch.uint8)
    k_cache, v_cache = (c.clone().view(FP8_DTYPE) for c in garbage)
    key = (torch.randn(T, H_kv, D, generator=g) * 60).to(dtype)        # some |key / 0.3| past 448
    value = torch.randn(T, H_kv, D, generator=g).to(dtype)
    slots = torch.randperm(N * block_size, generator=g)[:T].to(torch.int32)
    slots[::3] = -1
    k_ref, v_ref = k_cache.clone(), v_cache.clone()
    loop_store_fp8(key, value, k_ref, v_ref, slots.tolist(), 0.3, 0.01)
    store_kvcache(key, value, k_cache, v_cache, slots, k_scale=0.3, v_scale=torch.tensor([0.01]))
    assert torch.equal(k_cache.view(torch.uint8), k_ref.view(torch.uint8))
    assert torch.equal(v_cache.view(torch.uint8), v_ref.view(torch.uint8))


def test_gather_kv_dequant_reads_the_table_in_order_and_cuts_the_tail():
    cache = torch.arange(5 * 4 * 8, dtype=torch.float32).remainder(200).view(5, 4, 1, 8).to(FP8_DTYPE)
    got = gather_kv_dequant(cache, torch.tensor([3, 1, -1], dtype=torch.int32), 6, 0.5, torch.float32)
    want = torch.cat([cache[3], cache[1, :2]]).float() * 0.5               # [6, 1, 8]
    assert torch.equal(got, want)


def fp8_batch(seq_lens, q_lens=None, seed=0, dtype=torch.bfloat16):
    """A paged batch whose caches are quantized copies (garbage rows become random bytes), with the
    dequantized contiguous K/V for the reference."""
    b = make_paged_batch(seq_lens, 4, 8, 2, 16, q_lens, seed=seed, dtype=torch.float32, extra_padding=2)
    k_scale, v_scale = compute_scale(torch.cat(b.keys)), compute_scale(torch.cat(b.values))
    caches = []
    for cache, scale in ((b.k_cache, k_scale), (b.v_cache, v_scale)):
        nan = torch.isnan(cache)
        q8 = quantize_fp8(torch.nan_to_num(cache), scale)
        q8.view(torch.uint8)[nan] = 0x7F                                   # garbage: the NaN byte
        caches.append(q8)
    keys = [dequantize_fp8(quantize_fp8(k, k_scale), k_scale) for k in b.keys]
    values = [dequantize_fp8(quantize_fp8(v, v_scale), v_scale) for v in b.values]
    return b, caches, keys, values, k_scale, v_scale


def test_decode_on_an_fp8_cache_equals_sdpa_on_the_dequantized_contiguous_kv():
    b, (k8, v8), keys, values, ks, vs = fp8_batch([1, 7, 33, 64])
    q = b.q.bfloat16()
    out = paged_attention_decode(q, k8, v8, b.block_tables, b.seq_lens, 0.25, k_scale=ks, v_scale=vs)
    ref = sdpa_contiguous(q, keys, values, b.cu_seqlens_q.tolist(), 0.25)
    assert out.dtype == torch.bfloat16
    assert torch.allclose(out.double(), ref, atol=2e-2, rtol=2e-2)         # bf16 output rounding


def test_varlen_on_an_fp8_cache_equals_sdpa_on_the_dequantized_contiguous_kv():
    b, (k8, v8), keys, values, ks, vs = fp8_batch([5, 20, 9], [5, 8, 1], seed=3)
    q = b.q.float()
    out = paged_attention_varlen(q, k8, v8, b.block_tables, b.seq_lens, b.cu_seqlens_q, 0.25,
                                 k_scale=torch.tensor([ks]), v_scale=vs)
    ref = sdpa_contiguous(q, keys, values, b.cu_seqlens_q.tolist(), 0.25)
    assert torch.allclose(out.double(), ref, atol=1e-5, rtol=1e-5)


def _fp8_args():
    key, value = torch.randn(2, 1, 4), torch.randn(2, 1, 4)
    caches = [torch.zeros(2, 2, 1, 4, dtype=FP8_DTYPE) for _ in range(2)]
    return key, value, *caches, torch.tensor([0, 3], dtype=torch.int32)


@pytest.mark.parametrize("scales, error, match", [
    ({}, ValueError, "k_scale: a float8_e4m3fn cache needs its scale"),
    ({"k_scale": 1.0}, ValueError, "v_scale: a float8_e4m3fn cache needs its scale"),
    ({"k_scale": 0.0, "v_scale": 1.0}, ValueError, "k_scale: expected a finite scale > 0, got 0.0"),
    ({"k_scale": 1.0, "v_scale": -2.0}, ValueError, "v_scale: expected a finite scale > 0, got -2.0"),
    ({"k_scale": float("nan"), "v_scale": 1.0}, ValueError, "finite scale > 0, got nan"),
    ({"k_scale": float("inf"), "v_scale": 1.0}, ValueError, "finite scale > 0, got inf"),
    ({"k_scale": torch.tensor([1.0, 2.0]), "v_scale": 1.0}, TypeError, "1-element float32 tensor"),
    ({"k_scale": torch.tensor([1.0], dtype=torch.float64), "v_scale": 1.0}, TypeError, "float64"),
    ({"k_scale": True, "v_scale": 1.0}, TypeError, "got bool"),
    ({"k_scale": "1.0", "v_scale": 1.0}, TypeError, "got str"),
])
def test_store_on_an_fp8_cache_rejects_a_missing_or_bad_scale_and_writes_nothing(scales, error, match):
    key, value, k_cache, v_cache, slots = _fp8_args()
    with pytest.raises(error, match=match):
        store_kvcache(key, value, k_cache, v_cache, slots, **scales)
    assert not k_cache.view(torch.uint8).any() and not v_cache.view(torch.uint8).any()


def test_scales_for_a_16_bit_cache_and_unsupported_fp8_formats_are_errors():
    key, value = torch.randn(2, 1, 4), torch.randn(2, 1, 4)
    slots = torch.tensor([0, 3], dtype=torch.int32)
    caches = [torch.zeros(2, 2, 1, 4) for _ in range(2)]
    with pytest.raises(ValueError, match="k_scale: scales apply only to a float8_e4m3fn cache"):
        store_kvcache(key, value, *caches, slots, k_scale=1.0)
    e5m2 = [c.to(torch.float8_e5m2) for c in caches]
    with pytest.raises(TypeError, match=r"k_cache: expected dtype in \(.*float8_e4m3fn\), got float8_e5m2"):
        store_kvcache(key, value, *e5m2, slots, k_scale=1.0, v_scale=1.0)
    mixed = [caches[0].to(FP8_DTYPE), caches[1]]
    with pytest.raises(TypeError, match="both float8_e4m3fn or neither"):
        store_kvcache(key, value, *mixed, slots, k_scale=1.0, v_scale=1.0)


def test_attention_on_an_fp8_cache_needs_its_scales():
    b, (k8, v8), *_ = fp8_batch([3, 4])
    args = (b.q.float(), k8, v8, b.block_tables, b.seq_lens)
    with pytest.raises(ValueError, match="k_scale: a float8_e4m3fn cache needs its scale"):
        paged_attention_decode(*args, 0.25)
    with pytest.raises(ValueError, match="v_scale: expected a finite scale > 0"):
        paged_attention_varlen(*args, b.cu_seqlens_q, 0.25, k_scale=1.0, v_scale=0.0)
    with pytest.raises(ValueError, match="scales apply only to a float8_e4m3fn cache"):
        paged_attention_decode(b.q, b.k_cache, b.v_cache, b.block_tables, b.seq_lens, 0.25, k_scale=1.0,
                               v_scale=1.0)
