"""Cascade attention in PyTorch (pagedkv_lib.core.cascade_attention): the shared prefix once plus each
suffix, merged, equals float64 SDPA over the whole context; the common prefix is counted from the tables
in whole blocks; vLLM's rule decides on both sides of each of its thresholds; the bytes model."""
import pytest
import torch

from pagedkv_lib.core.cascade_attention import (
    MIN_PREFIX_TOKENS,
    MIN_SEQS,
    cascade_attention_decode,
    common_prefix_blocks,
    kv_bytes_read,
    use_cascade_attention,
)
from pagedkv_lib.core.paged_attention import paged_attention_decode
from pagedkv_lib.testing.paged_batch import make_paged_batch
from pagedkv_lib.testing.sdpa_reference import sdpa_batch
from pagedkv_lib.testing.shared_prefix_batch import make_shared_prefix_batch

CASES = [  # (shared_len, suffix_lens, block_size, H, H_kv, D): a suffix of 0, a shared tail < one block
    (32, [0, 5, 17], 16, 8, 2, 32),
    (37, [1, 0, 30, 4], 16, 4, 4, 16),
    (24, [3] * 9, 8, 8, 1, 64),
    (5, [2, 9], 4, 2, 1, 16),
]


def _run(batch, n):
    D = batch.q.shape[-1]
    return cascade_attention_decode(batch.q, batch.k_cache, batch.v_cache, batch.block_tables,
                                    batch.context_lens, D**-0.5, n)    # [B, H, D]


@pytest.mark.parametrize("case", CASES)
def test_cascade_matches_float64_sdpa_over_the_whole_context(case):
    shared, suffixes, S, H, H_kv, D = case
    batch = make_shared_prefix_batch(shared, suffixes, S, H, H_kv, D, seed=len(suffixes), dtype=torch.float64)
    n = common_prefix_blocks(batch.block_tables, batch.context_lens, S)
    assert n == shared // S
    out = _run(batch, n)
    assert out.dtype == torch.float64 and not out.isnan().any()
    torch.testing.assert_close(out, sdpa_batch(batch), rtol=1e-10, atol=1e-10)


def test_cascade_with_fewer_prefix_blocks_than_shared_gives_the_same_result():
    batch = make_shared_prefix_batch(48, [3, 11], 8, 4, 2, 16, seed=2, dtype=torch.float64)
    ref = sdpa_batch(batch)
    for n in range(1, 7):
        torch.testing.assert_close(_run(batch, n), ref, rtol=1e-10, atol=1e-10)


def test_cascade_in_float32_agrees_with_plain_paged_decode():
    batch = make_shared_prefix_batch(40, [6, 0, 13], 8, 8, 2, 32, seed=5)
    plain = paged_attention_decode(batch.q, batch.k_cache, batch.v_cache, batch.block_tables,
                                   batch.context_lens, 32**-0.5)
    torch.testing.assert_close(_run(batch, 5), plain, rtol=1e-5, atol=1e-5)


def test_common_prefix_stops_at_the_first_block_not_shared_and_at_the_shortest_context():
    batch = make_shared_prefix_batch(40, [6, 0, 13], 8, 2, 1, 16)
    assert common_prefix_blocks(batch.block_tables, batch.context_lens, 8) == 5
    tables = batch.block_tables.clone()
    tables[1, 2] = tables[1, 2] + 100                                    # row 1 leaves the prefix at 2
    assert common_prefix_blocks(tables, batch.context_lens, 8) == 2
    short = batch.context_lens.clone()
    short[2] = 17                                                        # a context of 2 full blocks
    assert common_prefix_blocks(batch.block_tables, short, 8) == 2
    separate = make_paged_batch([20, 20], 4, 2, 1, 16)                    # nothing shared
    assert common_prefix_blocks(separate.block_tables, separate.context_lens, 4) == 0


@pytest.mark.parametrize("n", [0, 6, True, 2.0])
def test_cascade_rejects_a_prefix_that_is_not_shared_whole_blocks(n):
    batch = make_shared_prefix_batch(40, [6, 1], 8, 2, 1, 16)
    with pytest.raises(ValueError, match=r"num_prefix_blocks: expected an int in \[1, 5\]"):
        _run(batch, n)


def _decide(prefix=4096, seqs=64, heads=32, kv_heads=8, sms=132, query_lens=None, **kw):
    return use_cascade_attention(prefix, query_lens or [1] * seqs, heads, kv_heads, sms, **kw)


def test_rule_needs_a_long_enough_prefix_and_enough_sequences():
    assert _decide(prefix=MIN_PREFIX_TOKENS, kv_heads=32)            # MHA: no flash-decoding, cascade
    assert not _decide(prefix=MIN_PREFIX_TOKENS - 1, kv_heads=32)
    assert _decide(seqs=MIN_SEQS, kv_heads=32)
    assert not _decide(seqs=MIN_SEQS - 1, kv_heads=32)
    assert not _decide(kv_heads=32, use_alibi=True)
    assert not _decide(kv_heads=32, use_sliding_window=True)


def test_rule_takes_cascade_whenever_the_plain_kernel_would_not_split():
    assert _decide(seqs=8, kv_heads=32)                              # G = 1: no flash-decoding
    assert _decide(seqs=8, query_lens=[2] * 8)                       # a chunk of 2 queries: none either


def test_rule_compares_waves_when_the_plain_kernel_splits():
    # GQA decode, 32 heads / 8 KV heads, 132 SMs, a 512-token prefix (4 KV tiles of 128): the cascade's
    # 32 * cdiv(B, 128) programs take 1 wave * 4 tiles; flash-decoding's B * 8 * 4 take cdiv(32 B, 132)
    assert not _decide(prefix=512, seqs=16)                          # 4 < cdiv(512, 132) = 4: no
    assert _decide(prefix=512, seqs=17)                              # 4 < cdiv(544, 132) = 5: yes
    assert _decide(prefix=4096, seqs=64)                             # 32 < cdiv(65536, 132) = 497
    assert not _decide(prefix=4096, seqs=64, sms=100_000)            # enough SMs: 32 tiles > 1 wave


def test_bytes_read_count_the_prefix_once_for_the_cascade():
    got = kv_bytes_read(64, 4096, 32, 8, 128, 2)
    per_token = 2 * 8 * 128 * 2
    assert got["paged"] == 64 * (4096 + 32) * per_token
    assert got["cascade"] == (4096 + 64 * 32) * per_token
