"""The FP8 accuracy studies of notebook 13: attention error against fp64, the scale's role, per-head scales,
and greedy agreement of the mini engine with an fp8 cache vs a bf16 one."""
from __future__ import annotations

import pytest

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


def test_greedy_agreement_reports_consistent_counts_and_bf16_reproduces_its_own_tokens():
    prompts = ga.prompt_set(num_prompts=4, seed=1)
    result = ga.greedy_agreement(prompts, max_tokens=8)
    assert result.teacher_forced["bf16"] == 1.0           # one prefill reproduces the decode steps' tokens
    assert 0.0 < result.teacher_forced["fp8"] <= 1.0
    assert result.identical == sum(d is None for d in result.first_divergence)
    assert len(result.margins) == 4 * 8 and min(result.margins) >= 0
    assert all(0 <= f.step < 8 and f.bf16_token != f.fp8_token for f in result.flips)
    assert len(result.flips) == round((1 - result.teacher_forced["fp8"]) * 32)
