"""Reference paged attention against SDPA on contiguous K/V in float64 (no block table involved)."""
import pytest
import torch

from pagedkv_lib import (
    gather_kv,
    make_paged_batch,
    paged_attention_decode,
    paged_attention_varlen,
    round_robin_tables,
    sdpa_batch,
)


@pytest.mark.parametrize("block_size", [1, 4, 16, 256])
@pytest.mark.parametrize("group", [1, 2, 4, 8])
def test_decode_matches_contiguous_sdpa_with_garbage_in_unused_rows(block_size, group):
    seq_lens = [1, block_size - 1 or 1, block_size, block_size + 1, 127, 129]
    b = make_paged_batch(seq_lens, block_size, 8, 8 // group, 16, seed=group, extra_padding=2)
    out = paged_attention_decode(b.q, b.k_cache, b.v_cache, b.block_tables, b.context_lens, 0.25)
    assert out.dtype == torch.float32 and torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), sdpa_batch_with_scale(b, 0.25), atol=1e-5, rtol=1e-5)


def sdpa_batch_with_scale(b, scale):
    from pagedkv_lib import sdpa_contiguous
    return sdpa_contiguous(b.q, b.keys, b.values, b.cu_seqlens_q.tolist(), scale)


def test_course_varlen_batch_decode_prefill_and_chunked_prefill_under_1e5():
    tables = round_robin_tables([37, 5, 20], 4)
    assert tables == [[0, 3, 6, 8, 10, 12, 13, 14, 15, 16], [1, 4], [2, 5, 7, 9, 11]]
    b = make_paged_batch([37, 5, 20], 4, 8, 2, 64, q_lens=[1, 5, 8], block_tables=tables, seed=0)
    out = paged_attention_varlen(b.q, b.k_cache, b.v_cache, b.block_tables, b.seq_lens, b.cu_seqlens_q,
                                 64 ** -0.5)
    assert (out.double() - sdpa_batch(b)).abs().max() < 1e-5


@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_varlen_chunks_of_every_length_match_sdpa(block_size):
    seq_lens, q_lens = [1, 9, 33, 64, 17], [1, 9, 7, 0, 16]
    b = make_paged_batch(seq_lens, block_size, 4, 2, 8, q_lens=q_lens, seed=3)
    out = paged_attention_varlen(b.q, b.k_cache, b.v_cache, b.block_tables, b.seq_lens, b.cu_seqlens_q,
                                 8 ** -0.5)
    torch.testing.assert_close(out.double(), sdpa_batch(b), atol=1e-5, rtol=1e-5)


def test_varlen_with_one_query_per_sequence_equals_decode():
    b = make_paged_batch([5, 40, 16], 16, 4, 1, 32, seed=7)
    dec = paged_attention_decode(b.q, b.k_cache, b.v_cache, b.block_tables, b.seq_lens, 0.1)
    var = paged_attention_varlen(b.q, b.k_cache, b.v_cache, b.block_tables, b.seq_lens, b.cu_seqlens_q, 0.1)
    assert torch.equal(dec, var)


@pytest.mark.parametrize("dtype, tol", [(torch.float16, 2e-3), (torch.bfloat16, 1e-2),
                                        (torch.float64, 1e-12)])
def test_low_precision_inputs_come_back_in_their_dtype(dtype, tol):
    b = make_paged_batch([30, 3], 4, 4, 2, 16, seed=1, dtype=dtype)
    out = paged_attention_decode(b.q, b.k_cache, b.v_cache, b.block_tables, b.seq_lens, 0.25)
    assert out.dtype == dtype
    assert (out.double() - sdpa_batch_with_scale(b, 0.25)).abs().max() < tol


def test_gather_drops_padding_and_cuts_the_tail():
    cache = torch.arange(4 * 4, dtype=torch.float32).reshape(4, 4, 1, 1)
    assert gather_kv(cache, torch.tensor([2, 0, -1], dtype=torch.int32), 6).flatten().tolist() == \
        [8, 9, 10, 11, 0, 1]


def _decode_args():
    b = make_paged_batch([6, 3], 4, 4, 2, 8, seed=0)
    return [b.q, b.k_cache, b.v_cache, b.block_tables, b.seq_lens, 0.3]


@pytest.mark.parametrize("change, error, match", [
    (lambda a: a.__setitem__(0, a[0][:, :3]), ValueError, r"num_heads \(3\) must be a multiple"),
    (lambda a: a.__setitem__(0, a[0][:1]), ValueError, r"q: expected shape \(2, \*, \*\)"),
    (lambda a: a.__setitem__(0, a[0][..., :4]), ValueError, "expected head_dim 4"),
    (lambda a: a.__setitem__(1, a[1].double()), TypeError, "k_cache: expected dtype"),
    (lambda a: a.__setitem__(3, a[3].float()), TypeError, "block_tables: expected dtype"),
    (lambda a: a.__setitem__(4, torch.tensor([6, 9], dtype=torch.int32)), ValueError, "need 3 blocks"),
    (lambda a: a.__setitem__(4, torch.tensor([6], dtype=torch.int32)), ValueError, "context_lens"),
    (lambda a: a.__setitem__(4, torch.tensor([6, 0], dtype=torch.int32)), ValueError, ">= 1"),
    (lambda a: a.__setitem__(3, torch.tensor([[0, 1], [99, -1]], dtype=torch.int32)), ValueError,
     "out of range"),
])
def test_decode_bad_arguments_say_what_was_expected(change, error, match):
    args = _decode_args()
    change(args)
    with pytest.raises(error, match=match):
        paged_attention_decode(*args)


def test_varlen_bad_cu_seqlens_and_too_many_queries():
    b = make_paged_batch([6, 3], 4, 4, 2, 8, q_lens=[2, 3], seed=0)
    args = [b.q, b.k_cache, b.v_cache, b.block_tables, b.seq_lens]
    with pytest.raises(ValueError, match="cu_seqlens_q: expected 0 = c_0"):
        paged_attention_varlen(*args, torch.tensor([0, 2, 4], dtype=torch.int32), 0.3)
    with pytest.raises(ValueError, match="cu_seqlens_q: expected shape"):
        paged_attention_varlen(*args, torch.tensor([0, 5], dtype=torch.int32), 0.3)
    short = torch.tensor([6, 2], dtype=torch.int32)
    with pytest.raises(ValueError, match="3 query tokens but seq_lens"):
        paged_attention_varlen(*args[:4], short, b.cu_seqlens_q, 0.3)
