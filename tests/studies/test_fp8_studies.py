"""The FP8 accuracy studies of notebook 13: attention error against fp64, the scale's role, per-head scales,
and greedy agreement of the mini engine with bf16 and fp8 caches against an exact one."""
from __future__ import annotations

import pytest
import torch

from pagedkv_lib.studies import fp8_attention_error as fe
from pagedkv_lib.studies import fp8_greedy_agreement as ga


@pytest.fixture(scope="module")
def by_magnitude():
    rows = fe.error_vs_magnitude(magnitudes=(1e-4, 1.0, 1e4))
    return {(r["magnitude"], r["cache"]): r["rel_mean_err"] for r in rows}


def test_bf16_cache_error_is_small_and_fp8_is_about_16_times_larger(by_magnitude):
    bf16, fp8 = by_magnitude[(1.0, fe.CACHES[0])], by_magnitude[(1.0, fe.CACHES[1])]
    assert bf16 < 0.01
    assert 5 < fp8 / bf16 < 40                    # 3 mantissa bits vs 7: steps 16x coarser


def test_a_calibrated_scale_keeps_fp8_error_flat_while_scale_1_fails_at_both_ends(by_magnitude):
    calibrated = [by_magnitude[(m, fe.CACHES[1])] for m in (1e-4, 1.0, 1e4)]
    assert max(calibrated) < 2 * min(calibrated) and max(calibrated) < 0.08
    assert by_magnitude[(1e-4, fe.CACHES[2])] > 0.5      # below e4m3's smallest step: zeros
    assert by_magnitude[(1e4, fe.CACHES[2])] > 0.5       # past 448: saturated


def test_outlier_key_channels_raise_the_error_of_both_caches():
    rows = {(r["values"], r["cache"]): r["mean_abs_err"] / r["mean_abs_out"] for r in fe.error_table()}
    assert len(rows) == 2 * len(fe.CACHES)
    for cache in fe.CACHES[:2]:
        assert rows[("outliers", cache)] > rows[("plain", cache)]


def test_per_head_scales_only_pay_once_heads_differ_by_about_ten_thousand():
    rows = {r["ratio"]: r for r in fe.per_head_scale_gain(ratios=(1, 1e3, 1e5))}
    for r in (1, 1e3):
        assert rows[r]["per_tensor_rel_err"] < 1.2 * rows[r]["per_head_rel_err"]
    assert rows[1e5]["per_tensor_rel_err"] > 5 * rows[1e5]["per_head_rel_err"]


def test_greedy_agreement_reports_consistent_counts_and_the_reference_reproduces_its_own_tokens():
    prompts = ga.prompt_set(num_prompts=4, seed=1)
    result = ga.greedy_agreement(prompts, max_tokens=8)
    assert result.teacher_forced["float64"] == 1.0        # one prefill reproduces the decode steps' tokens
    assert result.flips["float64"] == []
    for cache in ga.CACHES[1:]:
        assert 0.0 < result.teacher_forced[cache] <= 1.0
        assert result.identical[cache] == sum(d is None for d in result.first_divergence[cache])
        assert all(0 <= f.step < 8 and f.reference_token != f.token for f in result.flips[cache])
        assert len(result.flips[cache]) == round((1 - result.teacher_forced[cache]) * 32)
    assert len(result.margins) == 4 * 8 and min(result.margins) >= 0


def test_the_bf16_store_rounds_what_the_cache_holds_and_nothing_else():
    runner = ga.model_runner("bf16")
    H_kv, D = runner.config.model.num_key_value_heads, runner.config.model.head_dim
    k = torch.full((2, H_kv, D), 1.0 + 2.0**-12, dtype=torch.float64)                # [T, H_kv, D]
    k_cache, v_cache = runner.kv_cache[0, 0], runner.kv_cache[1, 0]                   # [N, S, H_kv, D] f64
    layer = runner.attention_layers[0]
    layer.kernels.store_kvcache(k, 3 * k, k_cache, v_cache, torch.tensor([0, 5], dtype=torch.int32))
    assert k_cache.dtype == torch.float64
    assert k_cache[0, 0].eq(1.0).all() and v_cache[0, 5].eq(3.0).all()              # bf16 has 8 bits
