"""Slot mapping: per token and per block range agree with a brute-force scan of the flat cache."""
import random

import pytest

from pagedkv_lib import compute_slot_mapping, slot_mapping_for


def brute_force_slots(block_table, positions, block_size):
    """Enumerate every (block, offset) of the table in logical order and pick the positions."""
    flat = [b * block_size + o for b in block_table for o in range(block_size)]
    return [flat[p] for p in positions]


def test_walk_the_shapes_example():
    assert slot_mapping_for([7, 2], list(range(6)), 4) == [28, 29, 30, 31, 8, 9]
    assert compute_slot_mapping([7, 2], 0, 6, 4) == [28, 29, 30, 31, 8, 9]
    assert compute_slot_mapping([5], 0, 3, 4) == [20, 21, 22]


@pytest.mark.parametrize("block_size", [1, 4, 16, 256])
def test_per_block_ranges_match_per_token_for_any_start_end(block_size):
    rng = random.Random(block_size)
    for _ in range(200):
        end = rng.randint(0, 3 * block_size + 5)
        start = rng.randint(0, end)
        table = rng.sample(range(64), -(-end // block_size))
        expect = brute_force_slots(table, range(start, end), block_size)
        assert compute_slot_mapping(table, start, end, block_size) == expect
        assert slot_mapping_for(table, list(range(start, end)), block_size) == expect


def test_first_block_mid_block_and_last_partial():
    # prefix hit of 1 block + 2 tokens of the next at block size 4: positions 6..9
    assert compute_slot_mapping([3, 9, 1], 6, 10, 4) == [38, 39, 4, 5]


def test_table_too_short_raises():
    with pytest.raises(ValueError, match="need 3 blocks"):
        compute_slot_mapping([1, 2], 0, 9, 4)
    with pytest.raises(ValueError, match="logical block 2"):
        slot_mapping_for([1, 2, -1], [8], 4)


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="block_size"):
        slot_mapping_for([0], [0], 0)
    with pytest.raises(ValueError, match="start <= end"):
        compute_slot_mapping([0], 3, 2, 4)
    with pytest.raises(ValueError, match="positions >= 0"):
        slot_mapping_for([0], [-1], 4)
