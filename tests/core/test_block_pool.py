"""BlockPool: the worked example of notebook 02, its contract line by line, and ref-count invariants."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pagedkv_lib import BlockPool, compute_slot_mapping, slot_mapping_for


def test_worked_example_allocate_free_reuses_from_the_end():
    pool = BlockPool(8)
    assert pool.allocate(3) == [0, 1, 2] and pool.num_free() == 5
    assert pool.allocate(2) == [3, 4]
    pool.free([0, 1, 2])
    assert list(pool.free_block_ids) == [5, 6, 7, 0, 1, 2]
    table = pool.allocate(4)
    assert table == [5, 6, 7, 0]
    slots = list(range(20, 32)) + [0, 1]
    assert slot_mapping_for(table, list(range(14)), 4) == slots
    assert compute_slot_mapping(table, 0, 14, 4) == slots


def test_allocate_too_many_returns_none_and_changes_nothing():
    pool = BlockPool(4)
    pool.allocate(3)
    before = (list(pool.free_block_ids), list(pool.ref_counts))
    assert pool.allocate(2) is None
    assert (list(pool.free_block_ids), list(pool.ref_counts)) == before
    assert pool.allocate(0) == []


def test_double_free_raises_and_changes_nothing():
    pool = BlockPool(4)
    a = pool.allocate(2)
    pool.free([a[0]])
    with pytest.raises(ValueError, match="double free"):
        pool.free([a[1], a[0]])
    assert pool.ref_count(a[1]) == 1 and pool.num_free() == 3
    with pytest.raises(ValueError, match="double free"):
        pool.free([a[1], a[1]])


def test_fork_returns_a_new_list_and_adds_one_reference_each():
    pool = BlockPool(6)
    table = pool.allocate(3)
    child = pool.fork(table)
    assert child == table and child is not table
    assert [pool.ref_count(b) for b in table] == [2, 2, 2]
    pool.free(table)
    assert pool.num_free() == 3
    pool.free(child)
    assert pool.num_free() == 6 and list(pool.free_block_ids)[-3:] == table


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_bad_sizes_and_ids_raise_value_error(bad):
    with pytest.raises(ValueError, match="expected"):
        BlockPool(bad)
    pool = BlockPool(2)
    with pytest.raises(ValueError, match="expected"):
        pool.allocate(bad)
    with pytest.raises(ValueError, match="block id"):
        pool.free([bad])


def test_fork_of_a_free_block_raises():
    pool = BlockPool(2)
    with pytest.raises(ValueError, match="free"):
        pool.fork([0])


ops = st.lists(st.tuples(st.sampled_from(["alloc", "free", "fork"]), st.integers(0, 5)), max_size=60)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_random_operations_keep_ref_counts_consistent(script):
    """Against a brute-force model: refs >= 0, free queue = refs 0, no block twice; idle pool is all free."""
    pool, tables = BlockPool(8), []
    for op, k in script:
        if op == "alloc":
            got = pool.allocate(k)
            if got is not None:
                tables.append(got)
        elif op == "free" and tables:
            pool.free(tables.pop(k % len(tables)))
        elif op == "fork" and tables:
            tables.append(pool.fork(tables[k % len(tables)]))
        held = [b for t in tables for b in t]
        assert [held.count(b) for b in range(8)] == pool.ref_counts
        assert sorted(pool.free_block_ids) == [b for b in range(8) if held.count(b) == 0]
    for t in tables:
        pool.free(t)
    assert pool.num_free() == 8 and sorted(pool.free_block_ids) == list(range(8))


def test_on_evict_sees_each_block_allocate_hands_out_in_order_and_nothing_on_a_failed_allocate():
    seen = []
    pool = BlockPool(4, on_evict=seen.append)
    pool.allocate(2)
    pool.free([1, 0])
    assert pool.allocate(3) == [2, 3, 1] and seen == [0, 1, 2, 3, 1]
    assert pool.allocate(2) is None and seen == [0, 1, 2, 3, 1]
    pool.touch([0])                                   # a prefix hit takes a block back: nothing evicted
    assert seen == [0, 1, 2, 3, 1]
