"""How much an FP8 KV cache changes attention, measured against an fp64 reference (notebook 13).

Shapes: docs/conventions.md.
One decode batch, built once in float32 (the "true" K/V), is written three ways into a paged cache with the
library's own `store_kvcache` (bf16; fp8 with a calibrated per-tensor scale, amax / 448; fp8 with vLLM's
default scale 1.0) and read back by the reference `paged_attention_decode`. The read computes in float64
(query, scores, softmax, output), so the error measured is the cache's rounding alone, not the arithmetic's:
an engine computes in fp32 and rounds its output to bf16, which would add one bf16 step to every row, and
fp32 sums round differently on different CPUs (the printed figures would change in their last digit). The
bf16 cache is a float64 cache holding bf16-rounded values: the same numbers a bf16 cache gives back. Each
output [B, H, D] is compared with fp64 SDPA on the float32 K/V. Two value ranges:
  - "plain":    K ~ N(0, 1), V ~ N(0, 0.5);
  - "outliers": the same, but a few key channels per head 20x larger, as real LLM keys have (the reason
                KIVI quantizes keys per channel and values per token).
`error_vs_magnitude` scales both K and V by 1e-4 .. 1e4 to show why the scale matters: with scale 1.0 large
values saturate at 448 and tiny ones sink below e4m3's smallest step (2**-9); a calibrated scale moves the
values to where e4m3 is precise. `per_head_scale_gain` asks whether a scale per KV head would help.
"""
from __future__ import annotations

import torch

from pagedkv_lib.core.kv_quant import FP8_DTYPE, compute_scale, dequantize_fp8, quantize_fp8
from pagedkv_lib.core.paged_attention import paged_attention_decode
from pagedkv_lib.core.slot_mapping import compute_slot_mapping
from pagedkv_lib.core.store_kvcache import store_kvcache
from pagedkv_lib.testing.paged_batch import round_robin_tables
from pagedkv_lib.testing.sdpa_reference import sdpa_contiguous

CACHES = ("bf16 cache", "fp8, scale amax/448", "fp8, scale 1.0")
OUTLIER_GAIN = 20.0
OUTLIER_CHANNELS = 4                  # per KV head, the same channels for every token (as in real keys)


def randn(*shape: int, generator: torch.Generator) -> torch.Tensor:
    """Standard normal float32 samples, the same on every CPU: torch draws float32 with a vectorized sampler
    on x86 CPUs with AVX2 and a scalar one elsewhere, and the two differ in the last bit (enough to round a
    few values to another bf16 or e4m3 neighbour); float64 draws, rounded to float32, agree."""
    return torch.randn(*shape, generator=generator, dtype=torch.float64).float()


def kv_sample(context_lens: list[int], H_kv: int, D: int, *, outliers: bool, magnitude: float = 1.0,
              seed: int = 0) -> tuple[list, list]:
    """Per sequence float32 keys and values [n, H_kv, D]; keys get outlier channels if asked."""
    g = torch.Generator().manual_seed(seed)
    channels = torch.randperm(D, generator=g)[:OUTLIER_CHANNELS]
    keys, values = [], []
    for n in context_lens:
        k = randn(n, H_kv, D, generator=g) * magnitude                          # [n, H_kv, D]
        if outliers:
            k[:, :, channels] *= OUTLIER_GAIN
        keys.append(k)
        values.append(randn(n, H_kv, D, generator=g) * 0.5 * magnitude)        # [n, H_kv, D]
    return keys, values


def decode_output(q, keys, values, cache: str, block_size: int = 16) -> torch.Tensor:
    """Store the K/V in a paged cache of kind `cache` (one of CACHES), then paged decode in float64 (q must be
    float64): [B, H, D] float64."""
    lens = [k.shape[0] for k in keys]
    tables = round_robin_tables(lens, block_size)
    slots = torch.tensor([s for t, n in zip(tables, lens) for s in compute_slot_mapping(t, 0, n, block_size)],
                         dtype=torch.int32)                                     # [sum(n)]
    k_all, v_all = torch.cat(keys), torch.cat(values)                            # [sum(n), H_kv, D] fp32
    fp8 = cache.startswith("fp8")
    shape = (sum(len(t) for t in tables), block_size, *k_all.shape[1:])
    k_cache = torch.zeros(shape, dtype=FP8_DTYPE if fp8 else torch.float64)     # [N, S, H_kv, D]
    v_cache = torch.zeros_like(k_cache)
    scales = {}
    if fp8:
        calibrated = cache == CACHES[1]
        scales = {"k_scale": compute_scale(k_all) if calibrated else 1.0,
                  "v_scale": compute_scale(v_all) if calibrated else 1.0}
        k_in, v_in = k_all.double(), v_all.double()                              # quantized on store
    else:                                                                        # bf16 values, held in f64
        k_in, v_in = k_all.bfloat16().double(), v_all.bfloat16().double()
    store_kvcache(k_in, v_in, k_cache, v_cache, slots, **scales)
    block_tables = torch.tensor(tables, dtype=torch.int32)                        # [B, M] (equal lengths)
    context_lens = torch.tensor(lens, dtype=torch.int32)
    return paged_attention_decode(q, k_cache, v_cache, block_tables, context_lens, q.shape[-1] ** -0.5,
                                  **scales)                                      # [B, H, D] float64


def attention_errors(*, outliers: bool, magnitude: float = 1.0, B: int = 4, context: int = 256, H: int = 8,
                     H_kv: int = 2, D: int = 64, seed: int = 0) -> list[dict]:
    """One row per cache kind: max and mean |out - fp64 reference|, and mean |reference| for scale.

    K and V are multiplied by `magnitude` and q divided by it: the scores, and so the softmax, stay the same,
    and the output scales with V. Only the cache's precision at that magnitude changes.
    """
    keys, values = kv_sample([context] * B, H_kv, D, outliers=outliers, magnitude=magnitude, seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    q = (randn(B, H, D, generator=g) / magnitude).double()                       # [B, H, D]
    cu = list(range(B + 1))
    ref = sdpa_contiguous(q, keys, values, cu, D**-0.5)                          # [B, H, D] fp64
    rows = []
    for cache in CACHES:
        err = (decode_output(q, keys, values, cache) - ref).abs()                # [B, H, D]
        rows.append({"values": "outliers" if outliers else "plain", "cache": cache, "magnitude": magnitude,
                     "max_abs_err": float(err.max()), "mean_abs_err": float(err.mean()),
                     "mean_abs_out": float(ref.abs().mean())})
    return rows


def error_table(seed: int = 0) -> list[dict]:
    """The notebook's table: every cache kind, plain values and values with outlier key channels."""
    return [row for outliers in (False, True) for row in attention_errors(outliers=outliers, seed=seed)]


MAGNITUDES = (1e-4, 1e-3, 1e-2, 1e-1, 1, 10, 100, 1e3, 1e4)


def error_vs_magnitude(magnitudes=MAGNITUDES, seed: int = 0) -> list[dict]:
    """attention_errors (plain values) at each magnitude of K and V; errors relative to mean |out|."""
    rows = []
    for m in magnitudes:
        for row in attention_errors(outliers=False, magnitude=m, B=2, context=128, seed=seed):
            rows.append({**row, "rel_mean_err": row["mean_abs_err"] / row["mean_abs_out"]})
    return rows


def per_head_scale_gain(ratios=(1, 10, 100, 1e3, 1e4, 1e5), D: int = 128, n: int = 256,
                        seed: int = 0) -> list[dict]:
    """Two KV heads, the second `ratio` times smaller: relative RMS error of the SMALL head's keys after an
    fp8 round trip with one per-tensor scale (set by the large head) vs its own per-head scale."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for r in ratios:
        x = randn(n, 2, D, generator=g)                                          # [n, 2, D]
        x[:, 1] /= r
        small = x[:, 1]                                                          # [n, D]
        per_tensor = dequantize_fp8(quantize_fp8(small, compute_scale(x)), compute_scale(x))
        per_head = dequantize_fp8(quantize_fp8(small, compute_scale(small)), compute_scale(small))
        rel = [float((y.double() - small.double()).norm() / small.double().norm())   # f64 sums: any CPU
               for y in (per_tensor, per_head)]
        rows.append({"ratio": r, "per_tensor_rel_err": rel[0], "per_head_rel_err": rel[1]})
    return rows
