"""The Triton paged decode attention kernel against float64 SDPA on contiguous K/V and the PyTorch reference.

Runs in Triton's interpreter on CPU (small shapes) and natively on a GPU. Cases are data:
(seq_lens, block_size, H, H_kv, D, dtype, num_splits, seed); num_splits None = the launcher's choice,
1 = v1 (no split), > 1 = v2 (split-KV, some splits empty for short sequences).
"""
from __future__ import annotations

import pytest
import torch

from pagedkv_lib.core.paged_attention import paged_attention_decode
from pagedkv_lib.kernels import backend, paged_attention_decode_triton
from pagedkv_lib.kernels.triton_decode_attention import choose_config
from pagedkv_lib.testing.paged_batch import make_paged_batch
from pagedkv_lib.testing.sdpa_reference import sdpa_batch

DEVICE = backend.device()
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.5e-2}  # relative, vs float64 SDPA


def _run(seq_lens, block_size, H, H_kv, D, dtype=torch.float32, num_splits=None, seed=0, extra_padding=2,
         garbage=float("nan")):
    batch = make_paged_batch(seq_lens, block_size, H, H_kv, D, seed=seed, dtype=dtype, device=DEVICE,
                             extra_padding=extra_padding, garbage=garbage)
    out = paged_attention_decode_triton(batch.q, batch.k_cache, batch.v_cache, batch.block_tables,
                                        batch.context_lens, D**-0.5, num_splits=num_splits)  # [B, H, D]
    return batch, out


def _assert_close_to_sdpa(batch, out):
    assert out.dtype == batch.q.dtype and out.shape == batch.q.shape
    assert not out.isnan().any(), "NaN in the output: an unused cache row or a padded table entry was read"
    ref = sdpa_batch(batch).to(out.device)                              # [B, H, D] float64
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err < TOLERANCE[out.dtype], f"relative error {err:.2e}"


@pytest.mark.parametrize("block_size", [1, 4, 16, 256])
def test_decode_kernel_matches_sdpa_for_every_block_size(block_size):
    batch, out = _run([1, 127, 128, 129], block_size, H=4, H_kv=2, D=32, seed=block_size)
    _assert_close_to_sdpa(batch, out)


@pytest.mark.parametrize("group", [1, 2, 4, 8])
def test_decode_kernel_matches_sdpa_for_gqa_ratios(group):
    batch, out = _run([37, 5], 16, H=2 * group, H_kv=2, D=16, seed=group)
    _assert_close_to_sdpa(batch, out)


@pytest.mark.parametrize("num_splits", [1, 2, 5, 16])
def test_decode_kernel_same_result_with_split_kv_on_and_off(num_splits):
    batch, out = _run([129, 3, 64], 4, H=4, H_kv=1, D=16, num_splits=num_splits, seed=7)
    _assert_close_to_sdpa(batch, out)


@pytest.mark.parametrize("D", [16, 64, 256, 80])
def test_decode_kernel_matches_sdpa_for_head_dims(D):
    batch, out = _run([45, 17], 16, H=2, H_kv=1, D=D, num_splits=2, seed=D)
    _assert_close_to_sdpa(batch, out)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_decode_kernel_matches_reference_in_half_precision(dtype):
    batch, out = _run([70, 128, 1], 16, H=8, H_kv=2, D=64, dtype=dtype, num_splits=3, seed=3)
    _assert_close_to_sdpa(batch, out)
    ref = paged_attention_decode(batch.q, batch.k_cache, batch.v_cache, batch.block_tables,
                                 batch.context_lens, 64**-0.5)            # fp32 math, rounded like ours
    err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
    assert err < TOLERANCE[dtype] / 2


@pytest.mark.parametrize("garbage", [float("nan"), float("inf")])
def test_decode_kernel_never_reads_unused_rows_or_padding(garbage):
    batch, out = _run([3, 20, 1], 8, H=2, H_kv=2, D=16, extra_padding=5, garbage=garbage, num_splits=4)
    _assert_close_to_sdpa(batch, out)


def test_decode_kernel_tiles_a_large_head_group():
    batch, out = _run([9], 4, H=64, H_kv=1, D=256, seed=5)              # 64 query heads: 2 tiles of 32
    assert choose_config(1, 64, 1, 256, 12, 1, num_sms=4, interpreted=True).block_g == 32
    _assert_close_to_sdpa(batch, out)


def test_choose_config_splits_only_small_batches():
    small = choose_config(1, 32, 8, 128, 4096, num_sms=132, interpreted=False)
    large = choose_config(64, 32, 8, 128, 4096, num_sms=132, interpreted=False)
    assert small.num_splits > 1 and large.num_splits == 1
    for cfg in (small, large):
        assert cfg.tokens_per_split % cfg.block_n == 0
        assert (cfg.num_splits - 1) * cfg.tokens_per_split < 4096 <= cfg.num_splits * cfg.tokens_per_split
    assert choose_config(1, 32, 8, 128, 100, num_sms=132, interpreted=False).num_splits == 1


def _bad(case):
    batch = make_paged_batch([5, 9], 4, 4, 2, 16, device=DEVICE)
    args = [batch.q, batch.k_cache, batch.v_cache, batch.block_tables, batch.context_lens, 0.25]
    kwargs = {}
    if case == "q_not_contiguous":
        args[0] = batch.q.transpose(0, 1).contiguous().transpose(0, 1)
    elif case == "dtype_mismatch":
        args[1] = batch.k_cache.half()
    elif case == "float64":
        args[:3] = [t.double() for t in args[:3]]
    elif case == "gqa":
        args[0] = torch.randn(2, 3, 16, device=DEVICE)
    elif case == "zero_length":
        args[4] = torch.tensor([0, 9], dtype=torch.int32, device=DEVICE)
    elif case == "num_splits":
        kwargs["num_splits"] = 0
    elif case == "batch":
        args[0] = batch.q[:1]
    return args, kwargs


@pytest.mark.parametrize("case,error,match", [
    ("q_not_contiguous", ValueError, "contiguous"),
    ("dtype_mismatch", TypeError, "k_cache"),
    ("float64", TypeError, "float64"),
    ("gqa", ValueError, "multiple of num_kv_heads"),
    ("zero_length", ValueError, "context_lens"),
    ("num_splits", ValueError, "num_splits"),
    ("batch", ValueError, "one row per block table"),
])
def test_decode_kernel_rejects_bad_inputs(case, error, match):
    args, kwargs = _bad(case)
    with pytest.raises(error, match=match):
        paged_attention_decode_triton(*args, **kwargs)
