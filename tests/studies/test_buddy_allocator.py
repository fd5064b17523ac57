"""pagedkv_lib.studies.buddy_allocator: power-of-two blocks, splits and merges, regions for a capacity that
is not a power of two."""
import numpy as np
import pytest

from pagedkv_lib.studies.buddy_allocator import BuddyAllocator


def test_opt_13b_capacity_holds_seven_2048_chunks():
    a = BuddyAllocator(15_728)
    assert [1 << k for k in a.region_order] == [8192, 4096, 2048, 1024, 256, 64, 32, 16]
    offsets = [a.alloc(2048) for _ in range(7)]
    assert offsets[0] == 12288                       # the smallest free block that fits: the 2048 region
    assert sorted(offsets) == [0, 2048, 4096, 6144, 8192, 10240, 12288] and a.alloc(2048) is None
    assert a.num_free == 15_728 - 7 * 2048 and a.largest_free() == 1024


def test_split_lowest_address_and_merge_by_hand():
    a = BuddyAllocator(16)
    assert a.alloc(3) == 0          # 16 -> 8 + 8 -> 4 + 4: [0, 4)
    assert a.alloc(8) == 8          # the free 8 at 8
    assert a.alloc(4) == 4
    assert a.alloc(1) is None and a.num_free == 0
    a.free(4)
    assert a.alloc(2) == 4          # splits the freed 4 into 2 + 2
    a.free(0), a.free(4), a.free(8)
    assert a.largest_free() == 16 and a.num_free == 16
    assert {k: s for k, s in a.free_sets.items() if s} == {4: {0}}


def test_random_alloc_free_never_overlaps_and_merges_back():
    rng = np.random.default_rng(0)
    a = BuddyAllocator(15_728)
    owner = np.full(15_728, -1)
    live = {}
    for step in range(5000):
        if live and rng.random() < 0.5:
            off = list(live)[rng.integers(len(live))]
            a.free(off)
            owner[off:off + live.pop(off)] = -1
        else:
            size = int(rng.integers(1, 3000))
            off = a.alloc(size)
            block = 1 << (size - 1).bit_length()
            if off is None:
                assert a.largest_free() < block
                continue
            assert off % block == 0 and (owner[off:off + block] == -1).all() and off + block <= 15_728
            owner[off:off + block] = step
            live[off] = block
        assert a.num_free == int((owner == -1).sum())
    for off in list(live):
        a.free(off)
    regions = {k: {b} for k, b in zip(a.region_order, a.region_base)}
    assert {k: s for k, s in a.free_sets.items() if s} == regions


@pytest.mark.parametrize("call, message", [
    (lambda: BuddyAllocator(0), "capacity"),
    (lambda: BuddyAllocator(16).alloc(0), "size"),
    (lambda: BuddyAllocator(16).free(3), "offset: expected"),
])
def test_bad_inputs(call, message):
    with pytest.raises(ValueError, match=message):
        call()
