"""The Triton paged decode attention kernels (v1, v2, v3, fp8 caches) against float64 SDPA on contiguous K/V
and the PyTorch reference; the v3 plan the kernels compute against decode_config's Python one; what
show_reference(131) prints.

Runs in Triton's interpreter on CPU (small shapes) and natively on a GPU. Cases are data:
(seq_lens, block_size, H, H_kv, D, dtype, num_splits, seed); num_splits None = the launcher's choice (v3),
1 = v1 (no split), > 1 = v2 (split-KV, some splits empty for short sequences). v3 cases use small chunks
(SMALL_CHUNKS) so that interpreter-sized contexts split unevenly.
"""
import dataclasses
import random

import pytest
import torch

from pagedkv_lib.core.paged_attention import paged_attention_decode
from pagedkv_lib.core.partial_softmax import from_lse, merge_tree, output
from pagedkv_lib.kernels import backend
from pagedkv_lib.kernels.attention_args import LOG2E
from pagedkv_lib.kernels.decode_config import choose_config, items_bound, plan_chunks_reference
from pagedkv_lib.kernels.triton_decode_attention import (
    launch_decode_partials,
    paged_attention_decode_reference,
    paged_attention_decode_triton,
)
from pagedkv_lib.kernels.triton_decode_merge import plan_chunks
from pagedkv_lib.testing.paged_batch import make_paged_batch, quantize_batch
from pagedkv_lib.testing.sdpa_reference import sdpa_batch

DEVICE = backend.device()
INTERPRETED = backend.is_interpreted()
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.5e-2}  # relative, vs float64 SDPA
SMALL_CHUNKS = dict(block_n=16, min_chunk=16, max_chunk=48)                     # v3: C in {16, 32, 48}
FP8_SKIP = backend.fp8_unsupported_reason()


def _config(batch, version, num_sms=4, **kw):
    B, M = batch.block_tables.shape
    H, D = batch.q.shape[1:]
    return choose_config(B, H, batch.k_cache.shape[2], D, M * batch.block_size, kw.pop("num_splits", None),
                         num_sms=num_sms, interpreted=INTERPRETED, version=version,
                         cache_bytes=batch.k_cache.element_size(), **kw)


def _run(seq_lens, block_size, H, H_kv, D, dtype=torch.float32, num_splits=None, seed=0, extra_padding=2,
         garbage=float("nan"), config=None, **scales):
    batch = make_batch(seq_lens, block_size, H, H_kv, D, dtype, seed, extra_padding, garbage)
    out = _launch(batch, num_splits=num_splits, config=config, **scales)
    return batch, out


def make_batch(seq_lens, block_size, H, H_kv, D, dtype=torch.float32, seed=0, extra_padding=2,
               garbage=float("nan")):
    return make_paged_batch(seq_lens, block_size, H, H_kv, D, seed=seed, dtype=dtype, device=DEVICE,
                            extra_padding=extra_padding, garbage=garbage)


def _launch(batch, **kw):
    D = batch.q.shape[-1]
    return paged_attention_decode_triton(batch.q, batch.k_cache, batch.v_cache, batch.block_tables,
                                         batch.context_lens, D**-0.5, **kw)     # [B, H, D]


def _assert_close_to_sdpa(batch, out, tol=None):
    assert out.dtype == batch.q.dtype and out.shape == batch.q.shape
    assert not out.isnan().any(), "NaN in the output: an unused cache row or a padded table entry was read"
    ref = sdpa_batch(batch).to(out.device)                           # [B, H, D] float64
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err < (tol or TOLERANCE[out.dtype]), f"relative error {err:.2e}"


# ----------------------------------------------------------------------------------------------------------
# every version, the contract

@pytest.mark.parametrize("block_size", [1, 4, 16, 256])
def test_decode_kernel_matches_sdpa_for_every_block_size(block_size):
    bs = block_size
    batch, out = _run(sorted({1, max(bs - 1, 1), bs, bs + 1, 127, 128, 129}), bs, H=4, H_kv=2, D=32, seed=bs)
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
    batch, out = _run([70, 128, 1], 16, H=8, H_kv=2, D=64, dtype=dtype, seed=3)
    _assert_close_to_sdpa(batch, out)
    ref = paged_attention_decode(batch.q, batch.k_cache, batch.v_cache, batch.block_tables,
                                 batch.context_lens, 64**-0.5)           # fp32 math, rounded like ours
    err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
    assert err < TOLERANCE[dtype] / 2


@pytest.mark.parametrize("garbage", [float("nan"), float("inf")])
@pytest.mark.parametrize("version", [2, 3])
def test_decode_kernel_never_reads_unused_rows_or_padding(garbage, version):
    batch = make_batch([3, 20, 1], 8, 2, 2, 16, extra_padding=5, garbage=garbage)
    config = _config(batch, version, num_splits=4 if version == 2 else None, **SMALL_CHUNKS)
    _assert_close_to_sdpa(batch, _launch(batch, config=config))


def test_decode_kernel_tiles_a_large_head_group():
    batch, out = _run([9], 4, H=64, H_kv=1, D=256, seed=5)              # 64 query heads: 2 tiles of 32
    assert choose_config(1, 64, 1, 256, 12, 1, num_sms=4, interpreted=True).block_g == 32
    _assert_close_to_sdpa(batch, out)


def test_choose_config_splits_only_small_batches():
    small = choose_config(1, 32, 8, 128, 4096, version=2, num_sms=132, interpreted=False)
    large = choose_config(64, 32, 8, 128, 4096, version=2, num_sms=132, interpreted=False)
    assert small.num_splits > 1 and large.num_splits == 1
    for cfg in (small, large):
        assert cfg.tokens_per_split % cfg.block_n == 0
        assert (cfg.num_splits - 1) * cfg.tokens_per_split < 4096 <= cfg.num_splits * cfg.tokens_per_split
    assert choose_config(1, 32, 8, 128, 100, version=2, num_sms=132, interpreted=False).num_splits == 1
    assert choose_config(64, 32, 8, 128, 4096, num_sms=132, interpreted=False).version == 3  # the default


# ----------------------------------------------------------------------------------------------------------
# v3: length-aware chunks

def test_decode_v3_plan_covers_every_token_once_within_the_grid_bound():
    rng = random.Random(0)
    for trial in range(300):
        B, S = rng.randint(1, 40), rng.choice([1, 16, 256])
        M = rng.randint(1, 64)
        lens = [rng.randint(1, M * S) for _ in range(B)]
        cfg = choose_config(B, 32, 8, 128, M * S, num_sms=rng.choice([4, 132]), interpreted=False,
                            block_n=rng.choice([16, 64]), min_chunk=rng.choice([16, 64, 128]),
                            max_chunk=rng.choice([64, 512, 1024, 10**6]), balanced=rng.random() < 0.5)
        chunk, items = plan_chunks_reference(lens, cfg)
        assert chunk % cfg.block_n == 0 and 0 < len(items) <= cfg.max_items, (trial, lens, cfg)
        covered = sorted((b, s, e) for b, s, e, _ in items)
        expect = sorted((b, s, min(s + chunk, n)) for b, n in enumerate(lens) for s in range(0, n, chunk))
        assert covered == expect                                       # each token in exactly one chunk
        sizes = [e - s for _, s, e, _ in items]
        assert sizes == sorted(sizes, key=lambda n: n != chunk)        # full chunks first (longest first)
        assert sorted(slot for *_, slot in items) == list(range(len(items)))   # partial slots: a bijection


def test_decode_v3_plan_the_kernels_compute_is_the_python_plan():
    """chunk_plan and chunk_of_item (the helpers the split and merge kernels run), read back by plan_chunks,
    give decode_config's plan: the same chunk, the same items in the same program order."""
    rng = random.Random(1)
    for trial in range(12):
        B, S = rng.randint(1, 12), rng.choice([1, 16])
        M = rng.randint(1, 16)
        lens = [rng.randint(1, M * S) for _ in range(B)]
        cfg = choose_config(B, 32, 8, 128, M * S, num_sms=4, interpreted=False, block_n=16,
                            min_chunk=rng.choice([16, 32]), max_chunk=rng.choice([32, 64, 10**6]),
                            balanced=rng.random() < 0.5)
        assert plan_chunks(lens, cfg) == plan_chunks_reference(lens, cfg), (trial, lens, cfg)


def test_decode_v3_plan_keeps_a_balanced_batch_whole_and_splits_a_ragged_one():
    cfg = choose_config(64, 32, 8, 128, 4096, num_sms=132, interpreted=False)
    assert plan_chunks_reference([4096] * 64, cfg)[0] == 4096          # v1's partition: one chunk each
    chunk, items = plan_chunks_reference([64 * (i + 1) for i in range(64)], cfg)
    assert chunk < 4096 and len(items) > 64


@pytest.mark.parametrize("block_size", [1, 16])
def test_decode_v3_matches_sdpa_when_chunks_split_contexts_unevenly(block_size):
    lens = [1, 15, 16, 17, 47, 48, 49, 127, 128, 129, 300]
    batch = make_batch(lens, block_size, 4, 2, 16, seed=11, extra_padding=3)
    config = _config(batch, 3, **SMALL_CHUNKS)
    chunk, items = plan_chunks_reference(lens, config)
    assert chunk == 48 and len(items) > len(lens)                      # several sequences split, unevenly
    _assert_close_to_sdpa(batch, _launch(batch, config=config))


def test_decode_v3_balanced_batch_writes_its_output_without_the_merge():
    batch = make_batch([33] * 8, 4, 4, 2, 16, seed=2)
    config = _config(batch, 3, **SMALL_CHUNKS)                         # 16 programs >= 3 per SM on 4 "SMs"
    assert config.balanced_x8 and plan_chunks_reference([33] * 8, config)[0] >= 33
    _assert_close_to_sdpa(batch, _launch(batch, config=config))


@pytest.mark.parametrize("merge_per_head", [False, True])
def test_decode_v3_merge_per_kv_head_or_per_query_head_gives_the_same_result(merge_per_head):
    batch = make_batch([130, 7, 64], 4, 8, 2, 16, seed=12)
    config = _config(batch, 3, merge_per_head=merge_per_head, **SMALL_CHUNKS)
    assert config.merge_per_head == merge_per_head and len(plan_chunks_reference([130, 7, 64], config)[1]) > 3
    _assert_close_to_sdpa(batch, _launch(batch, config=config))


def test_choose_config_merges_per_query_head_only_when_kv_head_programs_are_fewer_than_sms():
    assert choose_config(1, 32, 8, 128, 4096, num_sms=132, interpreted=False).merge_per_head
    assert not choose_config(64, 32, 8, 128, 4096, num_sms=132, interpreted=False).merge_per_head


def test_decode_v3_one_config_serves_any_lengths_within_the_table():
    """What a CUDA graph needs: nothing in the launch depends on the lengths, only on B and M * S."""
    batch = make_batch([130, 130, 130], 16, 4, 2, 16, seed=4)
    config = _config(batch, 3, **SMALL_CHUNKS)
    keys, values = batch.keys, batch.values
    for lens in ([1, 130, 7], [130, 129, 128], [49, 1, 1]):
        batch.context_lens.copy_(torch.tensor(lens, dtype=torch.int32))
        batch.keys = [k[:n] for k, n in zip(keys, lens)]               # the tails stay in the cache
        batch.values = [v[:n] for v, n in zip(values, lens)]
        _assert_close_to_sdpa(batch, _launch(batch, config=config))


@pytest.mark.parametrize("version", [1, 3])
def test_decode_padding_row_of_length_zero_reads_nothing_and_outputs_zeros(version):
    """A CUDA graph pads its batch with context length 0 (engine/decode_graphs.py); check_values=False lets
    it through the checked launcher, as the engine does."""
    batch = make_batch([9, 5, 13], 4, 4, 2, 16)
    lens = batch.context_lens.clone()
    lens[1] = 0
    config = _config(batch, version, **(SMALL_CHUNKS if version == 3 else {"num_splits": 1}))
    out = paged_attention_decode_triton(batch.q, batch.k_cache, batch.v_cache, batch.block_tables, lens,
                                        16**-0.5, config=config, check_values=False)   # [3, H, D]
    assert torch.equal(out[1], torch.zeros_like(out[1]))
    full = _launch(batch, config=config)                              # the real lengths
    assert torch.equal(out[0::2], full[0::2])


def test_decode_versions_agree_and_reruns_are_bit_identical():
    batch = make_batch([100, 3, 64, 200], 8, 8, 2, 32, dtype=torch.bfloat16, seed=9)
    outs = {v: _launch(batch, config=_config(batch, v, num_splits=3 if v == 2 else None, **SMALL_CHUNKS))
            for v in (1, 2, 3)}
    for out in outs.values():
        _assert_close_to_sdpa(batch, out)
    again = _launch(batch, config=_config(batch, 3, **SMALL_CHUNKS))
    assert torch.equal(again, outs[3]), "v3 is not deterministic"


# ----------------------------------------------------------------------------------------------------------
# FP8 caches

@pytest.mark.skipif(FP8_SKIP is not None, reason=str(FP8_SKIP))
@pytest.mark.parametrize("version,scale_kind,dtype", [
    (1, "float", torch.bfloat16), (2, "tensor_0d", torch.float16), (3, "tensor_1", torch.bfloat16),
    (3, "float", torch.float32),
])
def test_decode_kernel_matches_sdpa_with_fp8_cache(version, scale_kind, dtype):
    batch = make_batch([1, 17, 64, 129], 16, 8, 2, 32, dtype=torch.float32, seed=version)
    batch = quantize_batch(batch, k_scale=0.05, v_scale=0.02)
    batch.q = batch.q.to(dtype)
    make = {"float": float, "tensor_0d": lambda s: torch.tensor(s, device=DEVICE),
            "tensor_1": lambda s: torch.tensor([s], device=DEVICE)}[scale_kind]
    k_scale, v_scale = make(0.05), make(0.02)
    config = _config(batch, version, num_splits=3 if version == 2 else None, **SMALL_CHUNKS)
    out = _launch(batch, config=config, k_scale=k_scale, v_scale=v_scale)
    _assert_close_to_sdpa(batch, out)                                  # SDPA on the dequantized values
    ref = paged_attention_decode_reference(batch.q, batch.k_cache, batch.v_cache, batch.block_tables,
                                           batch.context_lens, 32**-0.5, k_scale=k_scale, v_scale=v_scale)
    err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
    assert err < TOLERANCE[dtype]


def test_decode_kernel_applies_scales_to_a_16_bit_cache():
    batch = make_batch([40, 9], 4, 4, 2, 16, dtype=torch.bfloat16, seed=6)
    out = _launch(batch, k_scale=0.5, v_scale=3.0)
    batch.keys = [k.float() * 0.5 for k in batch.keys]
    batch.values = [v.float() * 3.0 for v in batch.values]
    _assert_close_to_sdpa(batch, out)


# ----------------------------------------------------------------------------------------------------------
# bad inputs

def _bad(case):
    batch = make_batch([5, 9], 4, 4, 2, 16)
    args = [batch.q, batch.k_cache, batch.v_cache, batch.block_tables, batch.context_lens, 0.25]
    kwargs = {}
    fp8 = [t.nan_to_num(0.0).to(torch.float8_e4m3fn) for t in (batch.k_cache, batch.v_cache)]
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
    elif case == "fp8_without_scale":
        args[1:3] = fp8
        kwargs["v_scale"] = 1.0
    elif case == "scale_not_positive":
        args[1:3] = fp8
        kwargs.update(k_scale=0.0, v_scale=1.0)
    elif case == "scale_tensor_negative":
        args[1:3] = fp8
        kwargs.update(k_scale=1.0, v_scale=torch.tensor([-2.0], device=DEVICE))
    elif case == "scale_wrong_dtype":
        args[1:3] = fp8
        kwargs.update(k_scale=torch.tensor(1.0, dtype=torch.float64, device=DEVICE), v_scale=1.0)
    elif case == "e5m2_cache":
        args[1:3] = [t.to(torch.float8_e5m2) for t in fp8]
        kwargs.update(k_scale=1.0, v_scale=1.0)
    elif case == "v3_config_too_small":
        small = make_batch([5], 4, 4, 2, 16)
        kwargs["config"] = _config(small, 3, **SMALL_CHUNKS)
    elif case == "unknown_version":
        kwargs["config"] = dataclasses.replace(_config(batch, 1, num_splits=1), version=4)
    return args, kwargs


@pytest.mark.parametrize("case,error,match", [
    ("q_not_contiguous", ValueError, "contiguous"),
    ("dtype_mismatch", TypeError, "k_cache"),
    ("float64", TypeError, "float64"),
    ("gqa", ValueError, "multiple of num_kv_heads"),
    ("zero_length", ValueError, "context_lens"),
    ("num_splits", ValueError, "num_splits"),
    ("batch", ValueError, "one row per block table"),
    ("fp8_without_scale", ValueError, "k_scale: a float8_e4m3fn cache needs a scale"),
    ("scale_not_positive", ValueError, "k_scale: expected a finite scale > 0, got 0.0"),
    ("scale_tensor_negative", ValueError, "v_scale: expected a finite scale > 0, got -2.0"),
    ("scale_wrong_dtype", TypeError, "k_scale: expected a Python float or a 1-element float32 tensor"),
    ("e5m2_cache", TypeError, "float8_e4m3fn"),
    ("v3_config_too_small", ValueError, "max_items"),
    ("unknown_version", ValueError, r"config.version: expected one of \[1, 2, 3\], got 4"),
])
def test_decode_kernel_rejects_bad_inputs(case, error, match):
    args, kwargs = _bad(case)
    with pytest.raises(error, match=match):
        paged_attention_decode_triton(*args, **kwargs)


def test_items_bound_holds_for_the_longest_possible_contexts():
    cfg = choose_config(7, 32, 8, 128, 1000, num_sms=132, interpreted=False, min_chunk=64, max_chunk=128)
    assert len(plan_chunks_reference([1000] * 7, cfg)[1]) <= items_bound(cfg, 7, 1000) == cfg.max_items


def test_decode_v2_partials_are_written_unmerged_and_merge_to_the_output():
    """`launch_decode_partials` (the cascade's hook): the splits' (o, lse) land in the first num_splits
    slots of the caller's buffer, the rest untouched, and come back; merged with partial_softmax they give
    SDPA's result."""
    batch = make_batch([40, 3, 17], 8, 4, 2, 16, seed=11)
    config = _config(batch, 2, num_splits=3)
    B, H, D = batch.q.shape
    part_out = torch.full((B, H, 5, D), 7.0, device=DEVICE)          # [B, H, P' = 5, D]
    part_lse = torch.full((B, H, 5), 7.0, device=DEVICE)             # [B, H, P']
    returned = launch_decode_partials(batch.q, batch.k_cache, batch.v_cache, batch.block_tables,
                                      batch.context_lens, D**-0.5, config, part_out, part_lse)
    assert returned[0] is part_out and returned[1] is part_lse
    assert (part_lse[:, :, 3:] == 7.0).all() and (part_out[:, :, 3:] == 7.0).all()
    assert part_lse[1, :, 1:3].isneginf().all()                       # 3 tokens: splits 1 and 2 are empty
    parts = [from_lse(part_out[:, :, i].double(), part_lse[:, :, i].double() / LOG2E) for i in range(3)]
    merged = output(merge_tree(parts, ((0, 1), 2)))                   # [B, H, D]
    ref = sdpa_batch(batch).to(merged.device)
    assert ((merged - ref).norm() / ref.norm()).item() < TOLERANCE[torch.float32]


def test_show_reference_131_prints_the_one_pass_kernel_beside_the_tuned_one_after_their_helpers():
    from pagedkv_lib.judge.notebook import reference_source

    text = reference_source(131)
    names = ("attend_range", "paged_decode_kernel", "chunk_of_item", "chunked_decode_kernel",
             "paged_attention_decode_triton")
    order = [text.index(f"def {name}(") for name in names]
    assert order == sorted(order)                                      # each helper before its first caller
    assert text.count("def attend_range(") == 1 and "def split_kv_decode_kernel(" not in text
