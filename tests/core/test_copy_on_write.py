"""append_slot: new blocks at block boundaries, copy-on-write inside a shared block, None on shortage."""
import pytest
import torch

from pagedkv_lib import BlockPool, allocate_kv_cache, append_slot


def make(num_blocks=6, bs=4, layers=3):
    g = torch.Generator().manual_seed(0)
    kv = torch.randn(2, layers, num_blocks, bs, 2, 4, generator=g)
    return BlockPool(num_blocks), kv


def test_fork_then_write_into_the_shared_partial_block_copies_k_and_v_of_every_layer():
    pool, kv = make()
    parent = pool.allocate(2)                          # 6 tokens at block size 4
    child = pool.fork(parent)
    old = parent[-1]
    before = kv.clone()
    slot = append_slot(pool, kv, child, 6, 4)
    new = child[-1]
    assert new != old and child[0] == parent[0] and parent[-1] == old
    assert slot == new * 4 + 2
    assert torch.equal(kv[:, :, new], before[:, :, old])            # K and V, all layers
    assert pool.ref_count(old) == 1 and pool.ref_count(new) == 1 and pool.ref_count(parent[0]) == 2
    assert torch.equal(kv[:, :, old], before[:, :, old])


def test_private_last_block_is_written_in_place():
    pool, kv = make()
    table = pool.allocate(2)
    assert append_slot(pool, kv, table, 5, 4) == table[1] * 4 + 1 and pool.num_free() == 4


@pytest.mark.parametrize("num_tokens", [0, 4, 8])
def test_a_position_that_opens_a_block_gets_a_new_one(num_tokens):
    pool, kv = make()
    table = pool.allocate(num_tokens // 4)
    slot = append_slot(pool, kv, table, num_tokens, 4)
    assert len(table) == num_tokens // 4 + 1 and slot == table[-1] * 4


def test_no_free_block_returns_none_and_changes_nothing():
    pool, kv = make(num_blocks=2)
    table = pool.allocate(2)
    child = pool.fork(table)
    kv_before, child_before = kv.clone(), list(child)
    assert append_slot(pool, kv, child, 6, 4) is None
    assert append_slot(pool, kv, table, 8, 4) is None
    assert child == child_before and table == [0, 1] and torch.equal(kv, kv_before)
    assert [pool.ref_count(b) for b in (0, 1)] == [2, 2] and pool.num_free() == 0


def test_bad_table_length_and_block_size():
    pool, kv = make()
    with pytest.raises(ValueError, match="need 2 blocks"):
        append_slot(pool, kv, [0], 6, 4)
    with pytest.raises(ValueError, match="block_size 8"):
        append_slot(pool, allocate_kv_cache(1, 6, 4, 2, 4), [0], 3, 8)
