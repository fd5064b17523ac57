"""Paged storage: model cache layout, layer views, gather, and the test-batch builder."""
import pytest
import torch

from pagedkv_lib import allocate_kv_cache, gather_kv, layer_caches, make_paged_batch, round_robin_tables
from pagedkv_lib.core.validation import check_gqa


def test_model_cache_shape_and_layer_views_share_storage():
    kv = allocate_kv_cache(4, 10, 16, 2, 8, dtype=torch.bfloat16, fill=0.0)
    assert kv.shape == (2, 4, 10, 16, 2, 8) and kv.dtype == torch.bfloat16
    k, v = layer_caches(kv, 3)
    k[1, 2] = 1.0
    assert kv[0, 3, 1, 2].eq(1).all() and kv[1].eq(0).all() and v.shape == (10, 16, 2, 8)


@pytest.mark.parametrize("block_size", [1, 4, 16, 256])
def test_batch_builder_scatters_each_sequence_where_its_table_says(block_size):
    b = make_paged_batch([1, 5, 300], block_size, 4, 2, 8, seed=block_size)
    for n, table, k, v in zip(b.seq_lens.tolist(), b.block_tables, b.keys, b.values):
        assert torch.equal(gather_kv(b.k_cache, table, n), k)
        assert torch.equal(gather_kv(b.v_cache, table, n), v)
    used = {blk for row in b.block_tables.tolist() for blk in row if blk >= 0}
    unused = [i for i in range(b.k_cache.shape[0]) if i not in used]
    assert unused and torch.isnan(b.k_cache[unused]).all()        # garbage where no sequence lives


def test_round_robin_tables_hand_out_one_block_at_a_time():
    assert round_robin_tables([37, 5, 20], 4) == [[0, 3, 6, 8, 10, 12, 13, 14, 15, 16], [1, 4],
                                                  [2, 5, 7, 9, 11]]
    assert round_robin_tables([3, 3], 4) == [[0], [1]]


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_blocks"):
        allocate_kv_cache(1, 0, 4, 1, 1)
    with pytest.raises(ValueError, match="expected 4 dimensions"):
        gather_kv(torch.zeros(2, 4, 1), [0], 1)
    with pytest.raises(ValueError, match="need 2 blocks"):
        gather_kv(torch.zeros(2, 4, 1, 1), [0, -1], 5)
    with pytest.raises(ValueError, match=r"num_heads \(6\) must be a multiple of num_kv_heads \(4\)"):
        check_gqa(6, 4)
    with pytest.raises(ValueError, match="q_lens"):
        make_paged_batch([3], 4, 2, 1, 4, q_lens=[4])


def test_batch_builder_sizes_the_pool_from_given_tables():
    b = make_paged_batch([6, 3], 4, 2, 1, 4, block_tables=[[7, 2], [5]])
    assert b.k_cache.shape[0] >= 8
    assert torch.equal(gather_kv(b.k_cache, [7, 2], 6), b.keys[0])
