"""The Triton paged MLA decode kernel against its PyTorch reference and, through the absorbed form, against
the multi-head form in float64. Interpreter on CPU (small shapes), natively on a GPU.

Cases are data: (context_lens, block_size, H, C, R, dtype, extra_padding, num_splits). NaN garbage outside
every context, block sizes 1 / 16 / 64 (tiles that span several blocks and part of one), -1 padding, C and R
not powers of two (masked lanes), H not a multiple of BLOCK_H (masked heads), v1 and split-KV (v2) with
splits left empty by short contexts.
"""
import functools

import pytest
import torch

from pagedkv_lib.core.mla_attention import (
    absorb_query,
    mla_decode_absorbed,
    mla_decode_multihead,
    mla_latent_attention,
    mla_scale,
)
from pagedkv_lib.kernels import backend
from pagedkv_lib.kernels.triton_mla_decode import choose_num_splits, mla_latent_attention_triton
from pagedkv_lib.kernels.triton_mla_decode_tuned import (
    choose_tuned_splits,
    descriptors_in_triton,
    mla_latent_attention_tuned,
)
from pagedkv_lib.testing.mla_batch import make_mla_batch

DEVICE = backend.device()
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 3e-2}
CASES = [
    ([1, 5, 9], 1, 4, 16, 8, torch.float32, 2, 1),
    ([15, 16, 17, 47], 16, 3, 24, 4, torch.float32, 1, 1),
    ([1, 63, 64, 65, 130], 64, 17, 32, 8, torch.float32, 3, 1),
    ([33, 70], 16, 8, 32, 16, torch.bfloat16, 0, 1),
    ([1, 40, 130], 16, 4, 16, 8, torch.float32, 1, 3),       # v2: sequence 0 leaves two splits empty
    ([200], 64, 3, 24, 8, torch.float32, 0, 5),
]


def _batch(lens, S, H, C, R, dtype, pad, seed=0):
    return make_mla_batch(lens, S, H, C, R, 8, 8, num_layers=2, dtype=dtype, extra_padding=pad, seed=seed)


def check_against_the_reference(attention, lens, S, H, C, R, dtype, pad):
    """`attention` (a kernel's checked launcher, on DEVICE) equals mla_latent_attention on every layer of a
    batch with NaN garbage past every context; its output holds no NaN."""
    batch = _batch(lens, S, H, C, R, dtype, pad)
    for layer in range(2):
        q_latent = absorb_query(batch.q[layer], batch.w_uk[layer], batch.cos, batch.sin).contiguous()
        args = (batch.kv_cache[layer], batch.block_tables, batch.context_lens, C, mla_scale(8, R))
        expected = mla_latent_attention(q_latent, *args)
        got = attention(q_latent.to(DEVICE), *(a.to(DEVICE) for a in args[:3]), *args[3:])
        assert not got.isnan().any()
        torch.testing.assert_close(got.cpu(), expected, atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])


@pytest.mark.parametrize("case", CASES,
                         ids=lambda c: f"S{c[1]}-H{c[2]}-C{c[3]}-{c[5]}-P{c[7]}".replace("torch.", ""))
def test_kernel_equals_the_pytorch_reference(case):
    *shape, splits = case
    check_against_the_reference(functools.partial(mla_latent_attention_triton, num_splits=splits), *shape)


FP32_CASES = [c for c in CASES if c[5] == torch.float32]


@pytest.mark.parametrize("case", FP32_CASES, ids=lambda c: f"S{c[1]}-lens{c[0]}-P{c[7]}")
def test_absorbed_decode_on_the_kernel_equals_the_multihead_form_in_float64(case):
    lens, S, H, C, R, dtype, pad, splits = case
    batch = _batch(lens, S, H, C, R, dtype, pad, seed=1)
    for layer in range(2):
        args = (batch.q[layer], batch.kv_cache[layer], batch.block_tables, batch.context_lens,
                batch.w_uk[layer], batch.w_uv[layer], batch.cos, batch.sin)
        expected = mla_decode_multihead(*(a.double() if a.is_floating_point() else a for a in args))
        on_device = [a.to(DEVICE) for a in args]
        got = mla_decode_absorbed(*on_device, attention=functools.partial(mla_latent_attention_triton,
                                                                          num_splits=splits))
        torch.testing.assert_close(got.cpu().double(), expected, atol=1e-4, rtol=1e-4)


def test_launcher_rejects_what_the_kernel_cannot_read():
    batch = _batch([5], 4, 2, 16, 8, torch.float32, 0)
    q_latent = absorb_query(batch.q[0], batch.w_uk[0], batch.cos, batch.sin).contiguous()
    args = (batch.kv_cache[0], batch.block_tables, batch.context_lens)
    with pytest.raises(ValueError, match=r"expected \[B, H, 24\]"):
        mla_latent_attention_triton(q_latent[..., :20], *args, 16, 0.1)
    with pytest.raises(TypeError, match="int32"):
        mla_latent_attention_triton(q_latent, args[0], args[1].long(), args[2], 16, 0.1)
    with pytest.raises(TypeError, match="one dtype"):
        mla_latent_attention_triton(q_latent.double(), *args, 16, 0.1)
    with pytest.raises(ValueError, match="contiguous"):
        mla_latent_attention_triton(q_latent, args[0].transpose(0, 1), *args[1:], 16, 0.1)


def test_splits_fill_the_gpu_only_when_the_batch_does_not():
    assert choose_num_splits(B=128, H=128, max_context_len=32768, sms=132) == 1      # 1,024 programs
    assert choose_num_splits(B=1, H=128, max_context_len=32768, sms=132) == 17       # 8 programs x 17 >= 132
    assert choose_num_splits(B=1, H=128, max_context_len=1024, sms=132) == 4         # splits of >= 256 tokens
    assert choose_num_splits(B=2, H=16, max_context_len=100, sms=132) == 1


TUNED_CASES = [  # (context_lens, block_size, H, C, R, dtype, extra_padding, num_splits, block_n)
    ([1, 15, 16, 17, 47], 16, 3, 32, 16, torch.float32, 1, 1, 16),       # masked heads, a partial last tile
    ([1, 63, 64, 65, 130], 64, 17, 32, 16, torch.float32, 2, 1, 32),     # two tiles per block
    ([1, 40, 130], 64, 4, 64, 16, torch.float32, 0, 3, 16),              # splits, two of sequence 0's empty
    ([33, 70], 32, 8, 32, 16, torch.bfloat16, 0, 2, 32),
]


NO_DESCRIPTORS = pytest.mark.skipif(not descriptors_in_triton(), reason="no tensor descriptors here")


@pytest.mark.parametrize("tma", [False, pytest.param(True, marks=NO_DESCRIPTORS)], ids=["pointers", "tma"])
@pytest.mark.parametrize("case", TUNED_CASES, ids=lambda c: f"S{c[1]}-H{c[2]}-{c[5]}-P{c[7]}-N{c[8]}"
                         .replace("torch.", ""))
def test_tuned_kernel_equals_the_pytorch_reference(case, tma):
    """Both ways of reading whole tiles (TMA, pointers); NaN garbage past every context and in the last
    tile's rows (the TMA path reads that tile by masked pointers)."""
    *shape, splits, block_n = case
    check_against_the_reference(functools.partial(mla_latent_attention_tuned, num_splits=splits,
                                                  block_n=block_n, tma=tma), *shape)


def test_tuned_launcher_rejects_tiles_it_cannot_lay_out():
    for C, R, block_n, message in ((24, 8, None, "powers of 2"), (32, 16, 32, "block_n 32")):
        batch = _batch([5], 16, 2, C, R, torch.float32, 0)                  # C = 24; a tile over 2 blocks
        q_latent = absorb_query(batch.q[0], batch.w_uk[0], batch.cos, batch.sin).contiguous()
        with pytest.raises(ValueError, match=message):
            mla_latent_attention_tuned(q_latent, batch.kv_cache[0], batch.block_tables, batch.context_lens, C,
                                       0.1, block_n=block_n)


def test_tuned_splits_fill_the_gpu_with_splits_of_whole_tiles():
    assert choose_tuned_splits(B=64, H=128, max_context_len=4096, sms=132) == 2        # 128 programs x 2
    assert choose_tuned_splits(B=128, H=128, max_context_len=4096, sms=132) == 1
    assert choose_tuned_splits(B=1, H=128, max_context_len=4096, sms=132) == 32        # 64 tiles / 2
    assert choose_tuned_splits(B=1, H=128, max_context_len=4096, sms=132, min_tiles=1) == 64
