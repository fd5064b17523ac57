"""The Triton cascade (shared-prefix) decode kernel against float64 SDPA over the whole context
(prefix + suffix) and the PyTorch cascade.

Runs in Triton's interpreter on CPU (small shapes) and natively on a GPU. Cases are data:
(shared_len, suffix_lens, block_size, H, H_kv, D, prefix splits); suffixes of length 0, shared lengths that
are not a multiple of block_size (the tail goes to each suffix), several splits of the prefix.
"""
import pytest
import torch

from pagedkv_lib.core.cascade_attention import cascade_attention_decode, common_prefix_blocks
from pagedkv_lib.kernels import backend
from pagedkv_lib.kernels.triton_cascade_attention import (
    cascade_attention_decode_triton,
    choose_cascade_config,
)
from pagedkv_lib.testing.sdpa_reference import sdpa_batch
from pagedkv_lib.testing.shared_prefix_batch import make_shared_prefix_batch

DEVICE = backend.device()
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.5e-2}  # relative, vs float64 SDPA

CASES = [
    (32, [0, 5, 17], 16, 8, 2, 32, None),          # one suffix empty
    (37, [1, 0, 30, 4], 16, 4, 4, 16, 2),          # G = 1; 5 shared tokens past the last shared block
    (64, [3] * 9, 8, 8, 1, 64, 3),                 # G = 8: 72 query rows, 5 row tiles of 16
    (20, [0, 0], 4, 2, 1, 16, 1),                  # every suffix empty but the shared tail's 0
    (80, [2, 40, 7], 16, 4, 2, 80, 4),             # D = 80 (padded to 128)
]


def _batch(shared, suffixes, S, H, H_kv, D, dtype=torch.float32, seed=0):
    return make_shared_prefix_batch(shared, suffixes, S, H, H_kv, D, seed=seed, dtype=dtype, device=DEVICE)


def _launch(batch, n, **kw):
    D = batch.q.shape[-1]
    return cascade_attention_decode_triton(batch.q, batch.k_cache, batch.v_cache, batch.block_tables,
                                           batch.context_lens, D**-0.5, n, **kw)   # [B, H, D]


def _assert_close_to_sdpa(batch, out):
    assert out.dtype == batch.q.dtype and out.shape == batch.q.shape
    assert not out.isnan().any(), "NaN in the output: an unused cache row or a padded table entry was read"
    ref = sdpa_batch(batch).to(out.device)                               # [B, H, D] float64
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err < TOLERANCE[out.dtype], f"relative error {err:.2e}"


@pytest.mark.parametrize("case", CASES)
def test_cascade_kernel_matches_float64_sdpa_over_prefix_and_suffix(case):
    shared, suffixes, S, H, H_kv, D, splits = case
    batch = _batch(shared, suffixes, S, H, H_kv, D, seed=shared)
    n = common_prefix_blocks(batch.block_tables, batch.context_lens, S)
    config = choose_cascade_config(len(suffixes), H, H_kv, D, n * S, num_sms=4,
                                   interpreted=backend.is_interpreted(), block_m=16, block_n=16,
                                   num_splits=splits)               # 16: several splits on a GPU too
    tps = config.tokens_per_split
    assert (config.num_splits - 1) * tps < n * S <= config.num_splits * tps     # no split empty
    assert config.num_splits > 1 or not splits or splits == 1               # several splits exercised
    _assert_close_to_sdpa(batch, _launch(batch, n, config=config))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cascade_kernel_in_half_precision_matches_the_pytorch_cascade(dtype):
    batch = _batch(48, [5, 0, 21, 9], 16, 8, 2, 64, dtype=dtype, seed=3)
    out = _launch(batch, 3)
    _assert_close_to_sdpa(batch, out)
    ref = cascade_attention_decode(batch.q, batch.k_cache, batch.v_cache, batch.block_tables,
                                   batch.context_lens, 64**-0.5, 3)    # fp32 math, rounded like ours
    err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
    assert err < TOLERANCE[dtype] / 2


def test_cascade_kernel_with_part_of_the_shared_blocks_as_prefix():
    batch = _batch(48, [3, 11], 8, 4, 2, 16, seed=4)
    for n in (1, 4, 6):
        _assert_close_to_sdpa(batch, _launch(batch, n))


@pytest.mark.parametrize("garbage", [float("nan"), float("inf")])
def test_cascade_kernel_never_reads_unused_rows_or_padding(garbage):
    batch = make_shared_prefix_batch(24, [0, 9, 1], 8, 2, 1, 16, device=DEVICE, garbage=garbage,
                                     extra_padding=4)
    _assert_close_to_sdpa(batch, _launch(batch, 3))


@pytest.mark.parametrize("n", [0, 4, False])
def test_cascade_kernel_rejects_a_prefix_that_is_not_shared_whole_blocks(n):
    batch = _batch(24, [5, 9], 8, 2, 1, 16)
    with pytest.raises(ValueError, match=r"num_prefix_blocks: expected an int in \[1, 3\]"):
        _launch(batch, n)


def test_choose_cascade_config_splits_the_prefix_only_when_programs_are_few():
    few = choose_cascade_config(8, 32, 8, 128, 8192, num_sms=132, interpreted=False)     # 8 programs
    many = choose_cascade_config(256, 32, 8, 128, 8192, num_sms=132, interpreted=False)  # 128 programs
    alone = choose_cascade_config(1024, 32, 8, 128, 8192, num_sms=132, interpreted=False)  # 512
    assert few.num_splits > many.num_splits > alone.num_splits == 1
    assert many.num_splits * 128 >= 2 * 132                          # WAVES programs per SM
    assert (few.block_n, many.block_n, alone.block_n) == (64, 32, 32)   # small tiles once programs are many
    assert choose_cascade_config(64, 32, 8, 128, 4096, num_sms=132, interpreted=False).block_n == 64   # 32
    assert choose_cascade_config(128, 32, 8, 128, 4096, num_sms=132, interpreted=False).block_n == 32  # 64
    for cfg in (few, many, alone):
        assert cfg.tokens_per_split % cfg.block_n == 0
        assert (cfg.num_splits - 1) * cfg.tokens_per_split < 8192 <= cfg.num_splits * cfg.tokens_per_split
