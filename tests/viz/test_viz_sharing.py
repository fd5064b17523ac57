"""Notebook 08's fork / copy-on-write frames follow BlockPool and append_slot; the stepper shows them."""
from __future__ import annotations

import time

import pytest

from pagedkv_lib import BlockPool, allocate_kv_cache, append_slot
from pagedkv_lib.viz import block_map
from pagedkv_lib.viz.prefix_cache import SHARED, TablesStepper
from pagedkv_lib.viz.sharing import PARALLEL_SAMPLING, cow_frames


@pytest.fixture(scope="module")
def frames():
    return cow_frames(8, 4, PARALLEL_SAMPLING)


def test_fork_shares_every_block(frames):
    assert frames[3].tables == {"P": [0, 1, 2], "S1": [0, 1, 2], "S2": [0, 1, 2]}
    assert frames[3].ref_counts[:3] == [3, 3, 3] and frames[3].owners[:3] == [SHARED] * 3
    assert frames[3].table_labels["S2"] == ["0..3", "4..7", "8..9"]


def test_copy_on_write_then_in_place_then_new_block(frames):
    assert frames[4].tables["S1"] == [0, 1, 3] and "copy it to new block 3" in frames[4].description
    assert frames[5].tables["S2"] == [0, 1, 4] and frames[5].ref_counts[2] == 1
    assert frames[6].tables["P"] == [0, 1, 2] and "write in place" in frames[6].description
    assert frames[8].tables["S1"] == [0, 1, 3, 5] and "starts a block" in frames[8].description
    assert frames[9].free_queue == [6, 7, 4] and frames[9].ref_counts[:2] == [2, 2]
    assert frames[8].table_labels["S1"] == ["0..3", "4..7", "8..11", "12"]


def test_frames_agree_with_the_library_driven_by_hand(frames):
    pool, kv = BlockPool(8), allocate_kv_cache(1, 8, 4, 1, 1, fill=0.0)
    p = pool.allocate(3)
    s1, s2 = pool.fork(p), pool.fork(p)
    slots = [append_slot(pool, kv, t, 10, 4) for t in (s1, s2, p)]
    assert slots == [14, 18, 10]
    assert frames[6].tables == {"P": p, "S1": s1, "S2": s2}
    assert frames[6].ref_counts == [pool.ref_count(b) for b in range(8)]
    assert frames[6].free_queue == list(pool.free_block_ids)


def test_no_free_block_changes_nothing():
    frames = cow_frames(3, 4, [("allocate", "P", 10), ("fork", "P", "S"), ("append", "S")])
    assert "no free block" in frames[-1].description and frames[-1].tables["S"] == [0, 1, 2]


def test_stepper_over_the_copy_on_write_script(frames):
    stepper = TablesStepper(frames)
    for i in range(1, len(frames)):
        before = stepper.image.value
        start = time.perf_counter()
        stepper.step()
        print(f"copy-on-write step {i}: {1e3 * (time.perf_counter() - start):.0f} ms")
        assert stepper.colors == block_map.owner_colors(frames[i].owners)
        assert len(stepper.arrows) == sum(len(t) for t in frames[i].tables.values())
        if frames[i].owners != frames[i - 1].owners or frames[i].tables != frames[i - 1].tables:
            assert stepper.image.value != before
        assert time.perf_counter() - start < 2.0
