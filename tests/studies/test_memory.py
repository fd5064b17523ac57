"""pagedkv_lib.studies.memory: notebook 1's figures, exactly, and a brute-force count of what fits."""
import dataclasses
import random

import pytest

from pagedkv_lib.studies.memory import (
    GB,
    MODELS,
    GiB,
    KiB,
    MiB,
    ModelShape,
    kv_bytes_per_token,
    paged_concurrency,
    paged_waste_bound,
    reserved_concurrency,
)


def test_bytes_per_token_of_the_course_models():
    assert MODELS["LLaMA-2-7B"].bytes_per_token == 524_288 == 512 * KiB
    assert MODELS["Qwen3-0.6B"].bytes_per_token == 114_688 == 112 * KiB
    assert MODELS["Qwen2.5-7B"].bytes_per_token == 57_344
    assert kv_bytes_per_token(32, 32, 128, 2) == 524_288


def test_opt_13b_is_the_papers_800_kib_per_token():
    assert MODELS["OPT-13B"].bytes_per_token == 819_200 == 800 * KiB


def test_fp8_halves_the_bytes_per_token():
    for m in MODELS.values():
        assert m.with_kv_dtype("fp8").bytes_per_token * 2 == m.with_kv_dtype("bf16").bytes_per_token
        assert m.with_kv_dtype("fp16") == m.with_kv_dtype("bf16") and m.with_kv_dtype("bf16").name == m.name
    assert MODELS["Qwen2.5-7B"].with_kv_dtype("fp8").bytes_per_token == 28_672


@pytest.mark.parametrize("block_size", [1, 16, 256])
def test_fp8_fits_twice_the_requests_of_bf16_within_block_rounding(block_size):
    """Half the bytes per token: budget // (per-request bytes / 2) is 2n or 2n + 1 when bf16 fits n."""
    rng = random.Random(block_size)
    for _ in range(300):
        budget, ctx = rng.randint(1, 80) * GiB // rng.randint(1, 7), rng.randint(1, 40_000)
        for m in MODELS.values():
            bf16, fp8 = (m.with_kv_dtype(d).bytes_per_token for d in ("bf16", "fp8"))
            n = paged_concurrency(budget, ctx, block_size, bf16)
            assert paged_concurrency(budget, ctx, block_size, fp8) in (2 * n, 2 * n + 1)
            n = reserved_concurrency(budget, ctx, bf16)
            assert reserved_concurrency(budget, ctx, fp8) in (2 * n, 2 * n + 1)


def test_80gb_gpu_qwen2_5_7b_in_fp8_gives_684_paged_vs_62_reserving():
    budget = (80 - 15 - 10) * GiB
    bpt = MODELS["Qwen2.5-7B"].with_kv_dtype("fp8").bytes_per_token
    assert paged_concurrency(budget, 3000, 16, bpt) == 684 == 2 * 342
    assert reserved_concurrency(budget, 32 * 1024, bpt) == 62 == 2 * 31


def test_paged_waste_bound_is_block_size_minus_one_slots():
    assert paged_waste_bound(16, MODELS["LLaMA-2-7B"].bytes_per_token) == 15 * 512 * KiB == 7.5 * MiB
    assert paged_waste_bound(16, MODELS["Qwen3-0.6B"].bytes_per_token) == 1680 * KiB
    assert paged_waste_bound(1, 123) == 0


def test_llama2_7b_reserving_4096_tokens_costs_2_gib():
    assert 4096 * MODELS["LLaMA-2-7B"].bytes_per_token == 2 * GiB


def test_llama2_7b_average_600_tokens_of_4096_wastes_about_85_percent():
    assert round(1 - 600 / 4096, 2) == 0.85


def test_qwen3_0_6b_block_of_256_tokens_is_28_mib():
    assert 256 * MODELS["Qwen3-0.6B"].bytes_per_token == 28 * MiB


def test_80gb_gpu_qwen2_5_7b_gives_342_paged_vs_31_reserving_32k_in_gib():
    budget = (80 - 15 - 10) * GiB
    bpt = MODELS["Qwen2.5-7B"].bytes_per_token
    assert paged_concurrency(budget, 3000, 16, bpt) == 342
    assert reserved_concurrency(budget, 32 * 1024, bpt) == 31


def test_the_same_budget_in_decimal_gb_gives_318_vs_29():
    """The course's figure is in GiB; in decimal GB the same arithmetic gives fewer requests."""
    budget = (80 - 15 - 10) * GB
    bpt = MODELS["Qwen2.5-7B"].bytes_per_token
    assert paged_concurrency(budget, 3000, 16, bpt) == 318
    assert reserved_concurrency(budget, 32 * 1024, bpt) == 29


def _fits(budget: int, per_request: int) -> int:
    k = 0
    while (k + 1) * per_request <= budget:
        k += 1
    return k


def test_concurrency_matches_a_brute_force_count():
    rng = random.Random(0)
    for _ in range(200):
        budget, ctx = rng.randint(1, 5000), rng.randint(1, 300)
        bs, bpt = rng.randint(1, 64), rng.randint(1, 9)
        blocks = -(-ctx // bs)
        assert paged_concurrency(budget, ctx, bs, bpt) == _fits(budget, blocks * bs * bpt)
        assert reserved_concurrency(budget, ctx, bpt) == _fits(budget, ctx * bpt)


@pytest.mark.parametrize("block_size", [1, 16, 256])
def test_paged_fits_at_least_as_many_as_reserving_when_context_is_shorter(block_size):
    bpt = MODELS["Qwen3-0.6B"].bytes_per_token
    for ctx in (1, 255, 256, 257, 3000, 4096):
        assert paged_concurrency(40 * GiB, ctx, block_size, bpt) >= reserved_concurrency(40 * GiB, 4096, bpt)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3", None])
def test_bad_inputs_raise_value_error_saying_expected_and_given(bad):
    for call in (lambda: kv_bytes_per_token(bad, 8, 128, 2),
                 lambda: paged_concurrency(GiB, 3000, bad, 2),
                 lambda: reserved_concurrency(GiB, bad, 2)):
        with pytest.raises(ValueError, match="expected a positive int, got") as err:
            call()
        assert repr(bad) in str(err.value)


def test_model_shape_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        MODELS["Qwen3-0.6B"].num_layers = 1
    assert ModelShape("toy", 1, 1, 1, 1).bytes_per_token == 2
    with pytest.raises(ValueError, match="kv_dtype: expected one of .* got 'int4'"):
        MODELS["Qwen3-0.6B"].with_kv_dtype("int4")
