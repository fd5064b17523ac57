"""Tensor parallelism and the cache: each rank's heads follow GQA, its shard of the cache, and decode
attention over the shards equal to one process's (fp64 SDPA on contiguous K/V), in one process and over two
gloo processes (slow)."""
from __future__ import annotations

import pytest
import torch

from pagedkv_lib.core.paged_attention import paged_attention_decode
from pagedkv_lib.distributed.rank_launcher import launch_ranks
from pagedkv_lib.distributed.tp_decode import tp_decode_rank
from pagedkv_lib.distributed.tp_shard import (
    check_tp,
    kv_head_ids,
    kv_heads_per_rank,
    kv_replicas,
    query_head_ids,
    shard_kv_cache,
)
from pagedkv_lib.testing.paged_batch import make_paged_batch
from pagedkv_lib.testing.sdpa_reference import sdpa_batch

SPLITS = [(8, 8, 1), (8, 4, 2), (8, 2, 4), (8, 1, 2), (8, 1, 8), (32, 8, 4), (32, 4, 8), (28, 4, 4),
          (12, 6, 3)]


@pytest.mark.parametrize("H, H_kv, tp", SPLITS)
def test_each_rank_holds_exactly_the_kv_heads_its_query_heads_read(H, H_kv, tp):
    check_tp(H, H_kv, tp)
    G = H // H_kv
    holders = {h: 0 for h in range(H_kv)}
    for r in range(tp):
        held = kv_head_ids(r, H_kv, tp)
        assert sorted({h // G for h in query_head_ids(r, H, tp)}) == held
        assert len(held) == kv_heads_per_rank(H_kv, tp)
        for h in held:
            holders[h] += 1
    assert set(holders.values()) == {kv_replicas(H_kv, tp)}
    assert sorted(h for r in range(tp) for h in query_head_ids(r, H, tp)) == list(range(H))


@pytest.mark.parametrize("H, H_kv, tp, why", [(8, 4, 3, "divisor of the 8 query heads"),
                                               (12, 4, 6, "divisor or a multiple of the 4 KV heads")])
def test_a_split_that_does_not_fit_the_heads_is_refused(H, H_kv, tp, why):
    with pytest.raises(ValueError, match=why):
        check_tp(H, H_kv, tp)


def test_a_shard_is_a_slice_of_heads_of_every_block():
    kv_cache = torch.randn(2, 3, 5, 4, 4, 2)                          # [2, L, N, S, H_kv, D]
    assert torch.equal(shard_kv_cache(kv_cache, 1, 2), kv_cache[..., 2:4, :])
    assert torch.equal(shard_kv_cache(kv_cache[0, 0], 3, 4), kv_cache[0, 0, :, :, 3:4])
    assert torch.equal(shard_kv_cache(kv_cache[..., :1, :], 1, 2), kv_cache[..., :1, :])   # replicated


@pytest.mark.parametrize("H, H_kv, tp, S", [(8, 4, 2, 4), (8, 2, 4, 1), (8, 1, 2, 16), (6, 3, 3, 5)])
def test_attention_over_the_shards_concatenated_equals_one_process(H, H_kv, tp, S):
    batch = make_paged_batch([37, 5, 64, 1], S, H, H_kv, 8, seed=3)
    parts = []
    for r in range(tp):                                               # what each rank computes
        heads = query_head_ids(r, H, tp)
        q = batch.q[:, heads[0] : heads[-1] + 1].contiguous()          # [B, H / tp, D]
        parts.append(paged_attention_decode(q, shard_kv_cache(batch.k_cache, r, tp),
                                            shard_kv_cache(batch.v_cache, r, tp), batch.block_tables,
                                            batch.context_lens, 8**-0.5))
    out = torch.cat(parts, dim=1)                                     # [B, H, D]
    torch.testing.assert_close(out.double(), sdpa_batch(batch), atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_tp_decode_over_two_gloo_processes_equals_one_process():
    runs = launch_ranks(tp_decode_rank, world_size=2, timeout_s=120, backend="gloo", seq_lens=[37, 5, 64],
                        block_size=4, num_heads=8, kv_head_counts=[4, 1], head_dim=16, batch_seed=0)
    for rank0, rank1 in zip(*runs):
        H_kv = rank0["num_kv_heads"]
        assert rank0["kv_heads"] == kv_head_ids(0, H_kv, 2) and rank1["kv_heads"] == kv_head_ids(1, H_kv, 2)
        reference = sdpa_batch(make_paged_batch([37, 5, 64], 4, 8, H_kv, 16, seed=0))
        torch.testing.assert_close(torch.tensor(rank0["out"], dtype=torch.float64), reference, atol=1e-5,
                                   rtol=1e-5)
        assert rank1["out"] is None and rank0["shard_bytes"] == rank1["shard_bytes"]
