"""The Triton paged prefill (varlen) attention kernel against float64 SDPA on contiguous K/V (bottom-right
causal) and the PyTorch reference paged_attention_varlen.

Runs in Triton's interpreter on CPU (small shapes) and natively on a GPU. Cases are data:
(seq_lens, q_lens, block_size, H, H_kv, D, dtype, seed); q_len < seq_len is a chunked prefill (the queries
are the LAST q_len tokens), q_len 1 a decode row, q_len 0 a sequence with nothing to compute.
"""
import pytest
import torch

from pagedkv_lib.core.paged_attention import paged_attention_decode, paged_attention_varlen
from pagedkv_lib.kernels import backend
from pagedkv_lib.kernels.triton_prefill_attention import (
    PrefillConfig,
    causal_flops,
    choose_prefill_config,
    launch_prefill_attention,
    paged_attention_varlen_reference,
    paged_attention_varlen_triton,
)
from pagedkv_lib.testing.paged_batch import make_paged_batch, quantize_batch
from pagedkv_lib.testing.sdpa_reference import sdpa_batch

DEVICE = backend.device()
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.5e-2}  # relative, vs float64 SDPA
FP8_SKIP = backend.fp8_unsupported_reason()


def make_batch(seq_lens, q_lens, block_size, H, H_kv, D, dtype=torch.float32, seed=0, extra_padding=2,
               garbage=float("nan")):
    return make_paged_batch(seq_lens, block_size, H, H_kv, D, q_lens, seed=seed, dtype=dtype,
                            device=DEVICE, extra_padding=extra_padding, garbage=garbage)


def _launch(batch, **kw):
    D = batch.q.shape[-1]
    return paged_attention_varlen_triton(batch.q, batch.k_cache, batch.v_cache, batch.block_tables,
                                         batch.seq_lens, batch.cu_seqlens_q, D**-0.5, **kw)  # [T, H, D]


def _assert_close_to_sdpa(batch, out, tol=None):
    assert out.dtype == batch.q.dtype and out.shape == batch.q.shape
    assert not out.isnan().any(), "NaN in the output: an unused cache row or a padded table entry was read"
    ref = sdpa_batch(batch).to(out.device)                           # [T, H, D] float64
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err < (tol or TOLERANCE[out.dtype]), f"relative error {err:.2e}"


def _run(seq_lens, q_lens, block_size, H=4, H_kv=2, D=16, dtype=torch.float32, seed=0, extra_padding=2,
         garbage=float("nan"), **launch_kw):
    batch = make_batch(seq_lens, q_lens, block_size, H, H_kv, D, dtype, seed, extra_padding, garbage)
    out = _launch(batch, **launch_kw)
    _assert_close_to_sdpa(batch, out)
    return batch, out


@pytest.mark.parametrize("block_size", [1, 4, 16, 256])
def test_prefill_kernel_matches_sdpa_for_every_block_size(block_size):
    bs = block_size
    lens = sorted({1, max(bs - 1, 1), bs, bs + 1, 127, 128, 129})
    q_lens = [n if n <= 129 else 24 for n in lens]                     # cold prefill, chunked past 129
    _run(lens, q_lens, bs, seed=bs)


def test_prefill_kernel_matches_sdpa_with_chunked_prefill_offset():
    _run([129, 64, 40, 17], [33, 64, 1, 16], 16, seed=1)               # queries are the LAST q_len tokens


@pytest.mark.parametrize("group", [1, 2, 3, 4, 8])
def test_prefill_kernel_matches_sdpa_for_gqa_ratios(group):
    _run([37, 20], [21, 20], 16, H=2 * group, H_kv=2, seed=group)     # G rows of one token share a tile


def test_prefill_kernel_handles_decode_rows_next_to_prefills():
    batch, out = _run([50, 1, 77, 9, 128], [50, 1, 1, 9, 1], 8, seed=2)
    rows = batch.cu_seqlens_q[[1, 2, 4]].long()                        # the decode rows: 50, 51, 61
    decode = paged_attention_decode(batch.q[rows], batch.k_cache, batch.v_cache,
                                    batch.block_tables[[1, 2, 4]], batch.seq_lens[[1, 2, 4]], 16**-0.5)
    torch.testing.assert_close(out[rows], decode, rtol=1e-5, atol=1e-5)


def test_prefill_kernel_skips_sequences_with_no_new_tokens():
    batch = make_batch([10, 30, 5, 12], [0, 7, 0, 12], 4, 4, 2, 16, seed=3)
    T, H, D = batch.q.shape
    guarded = torch.full((T + 2, H, D), 7.0, device=DEVICE)            # guard rows around the output
    out = guarded[1 : T + 1]
    config = choose_prefill_config(H, 2, D, batch.q.dtype, interpreted=backend.is_interpreted())
    launch_prefill_attention(batch.q, batch.k_cache, batch.v_cache, batch.block_tables, batch.seq_lens,
                             batch.cu_seqlens_q, D**-0.5, config, out)
    assert (guarded[0] == 7).all() and (guarded[-1] == 7).all(), "wrote outside [T, H, D]"
    _assert_close_to_sdpa(batch, out)


@pytest.mark.parametrize("garbage", [float("nan"), float("inf")])
def test_prefill_kernel_never_reads_unused_rows_or_padding(garbage):
    _run([3, 20, 1, 33], [3, 5, 1, 20], 8, extra_padding=5, garbage=garbage)


@pytest.mark.parametrize("block_m,block_n", [(16, 16), (32, 16), (16, 64), (64, 32)])
def test_prefill_kernel_matches_sdpa_for_tile_shapes(block_m, block_n):
    # block size 8 < BLOCK_N: tiles span blocks; 32 > BLOCK_N 16: part of one
    for bs in (8, 32):
        _run([70, 45], [70, 20], bs, H=8, H_kv=2, seed=block_m + block_n,
             config=PrefillConfig(block_m, block_n, num_warps=4, num_stages=1))


@pytest.mark.parametrize("D", [16, 80, 128])
def test_prefill_kernel_matches_sdpa_for_head_dims(D):
    _run([24, 9], [24, 4], 16, H=2, H_kv=1, D=D, seed=D)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_prefill_kernel_matches_reference_in_half_precision(dtype):
    batch, out = _run([70, 128, 1], [30, 128, 1], 16, H=8, H_kv=2, D=32, dtype=dtype, seed=3)
    ref = paged_attention_varlen(batch.q, batch.k_cache, batch.v_cache, batch.block_tables,
                                 batch.seq_lens, batch.cu_seqlens_q, 32**-0.5)  # fp32 math, rounded
    err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
    assert err < TOLERANCE[dtype] / 2


@pytest.mark.skipif(FP8_SKIP is not None, reason=str(FP8_SKIP))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_prefill_kernel_matches_sdpa_with_fp8_cache(dtype):
    batch = make_batch([1, 40, 64], [1, 17, 64], 16, 8, 2, 32, seed=5)
    batch = quantize_batch(batch, k_scale=0.05, v_scale=0.02)
    batch.q = batch.q.to(dtype)
    scales = dict(k_scale=torch.tensor([0.05], device=DEVICE), v_scale=0.02)
    out = _launch(batch, **scales)
    _assert_close_to_sdpa(batch, out)                                  # SDPA on the dequantized values
    ref = paged_attention_varlen_reference(batch.q, batch.k_cache, batch.v_cache, batch.block_tables,
                                           batch.seq_lens, batch.cu_seqlens_q, 32**-0.5, **scales)
    err = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
    assert err < TOLERANCE[dtype]


def test_prefill_kernel_reruns_are_bit_identical():
    batch = make_batch([90, 33], [60, 33], 16, 8, 2, 32, dtype=torch.bfloat16, seed=8)
    first = _launch(batch)
    assert torch.equal(first, _launch(batch))


def test_causal_flops_counts_each_pair_once():
    assert causal_flops([4], [4], H=1, D=1) == 4 * (1 + 2 + 3 + 4)
    assert causal_flops([6], [2], H=2, D=3) == 4 * 3 * 2 * (5 + 6)     # positions 4, 5 see 5 and 6 keys


def _bad(case):
    batch = make_batch([5, 9], [2, 9], 4, 4, 2, 16)
    args = [batch.q, batch.k_cache, batch.v_cache, batch.block_tables, batch.seq_lens, batch.cu_seqlens_q,
            0.25]
    kwargs = {}
    if case == "q_not_contiguous":
        args[0] = batch.q.transpose(0, 1).contiguous().transpose(0, 1)
    elif case == "q_dtype":
        args[0] = batch.q.double()
    elif case == "cache_dtype":
        args[1] = args[2] = batch.k_cache.half()
    elif case == "cu_shape":
        args[5] = batch.cu_seqlens_q[:2]
    elif case == "cu_float":
        args[5] = batch.cu_seqlens_q.float()
    elif case == "cu_total":
        args[5] = torch.tensor([0, 2, 10], dtype=torch.int32, device=DEVICE)
    elif case == "q_len_above_seq_len":
        args[5] = torch.tensor([0, 6, 11], dtype=torch.int32, device=DEVICE)
        args[0] = torch.randn(11, 4, 16, device=DEVICE)
    elif case == "head_dim":
        args[0] = torch.randn(11, 4, 8, device=DEVICE)
    elif case == "fp8_without_scale":
        args[1:3] = [t.nan_to_num(0.0).to(torch.float8_e4m3fn) for t in args[1:3]]
    elif case == "table_stride":
        args[3] = batch.block_tables.t().contiguous().t()
    elif case == "block_m":
        kwargs["config"] = PrefillConfig(24, 16, 4, 1)
    return args, kwargs


@pytest.mark.parametrize("case,error,match", [
    ("q_not_contiguous", ValueError, "q: expected a contiguous tensor"),
    ("q_dtype", TypeError, "expected float32, float16 or bfloat16, got float64"),
    ("cache_dtype", TypeError, "k_cache: expected dtype float32 like q"),
    ("cu_shape", ValueError, r"cu_seqlens_q: expected a contiguous tensor of shape \(3,\)"),
    ("cu_float", TypeError, "cu_seqlens_q: expected an int32 tensor"),
    ("cu_total", ValueError, "c_B = T = 11"),
    ("q_len_above_seq_len", ValueError, "seq 0: expected q_len <= seq_lens"),
    ("head_dim", ValueError, "k_cache: expected head_dim 8 like q"),
    ("fp8_without_scale", ValueError, "k_scale: a float8_e4m3fn cache needs a scale"),
    ("table_stride", ValueError, "block_tables: expected rows with stride 1"),
    ("block_m", ValueError, "config.block_m: expected a power of two"),
])
def test_prefill_kernel_rejects_bad_inputs(case, error, match):
    args, kwargs = _bad(case)
    with pytest.raises(error, match=match):
        paged_attention_varlen_triton(*args, **kwargs)
