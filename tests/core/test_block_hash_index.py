"""BlockHashIndex keeps every block registered under a hash, as vLLM's BlockPool does: the first still
registered serves hits, and a duplicate takes over when that one is taken from the pool."""
from __future__ import annotations

import pytest

from pagedkv_lib.core.block_hash_index import BlockHashIndex
from pagedkv_lib.core.block_manager import block_hashes
from pagedkv_lib.core.block_pool import BlockPool
from pagedkv_lib.core.single_type_manager import FullAttentionManager


def test_a_duplicate_takes_over_when_the_first_block_is_dropped():
    index = BlockHashIndex()
    index.insert(0, 77, 3)
    index.insert(0, 77, 5)                    # the same tokens in another block
    index.insert(1, 77, 6)                    # another group: its own entry
    assert index.get(0, 77) == 3
    index.drop(3)
    assert index.get(0, 77) == 5 and index.get(1, 77) == 6
    index.drop(5)
    assert index.get(0, 77) is None and index.get(1, 77) == 6


def test_the_second_request_with_a_prompt_keeps_its_hits_after_the_first_copy_is_evicted():
    pool = BlockPool(5)
    (null,) = pool.allocate(1)
    full = FullAttentionManager(pool, 4, null)
    prompt = list(range(8))
    hashes = block_hashes(prompt, 4)
    assert full.allocate_slots("a", 8) == [1, 2]
    full.cache_blocks("a", hashes, 8)
    hit = full.find_longest_cache_hit(hashes, 7)               # at most 7 tokens: block 1 only
    assert full.allocate_slots("b", 8, hit) == [3]             # b's last block duplicates a's block 2
    full.cache_blocks("b", hashes, 8)
    full.free("a")                                             # block 2 goes back to the pool, still cached
    assert full.allocate_slots("c", 8) == [4, 2]               # ... and is taken for other tokens
    assert full.find_longest_cache_hit(hashes, 8) == [1, 3]    # b's duplicate still serves the hit


def test_a_block_the_shared_pool_hands_out_leaves_the_index_whoever_takes_it():
    pool = BlockPool(4)
    (null,) = pool.allocate(1)
    full = FullAttentionManager(pool, 4, null)
    hashes = block_hashes(list(range(8)), 4)
    full.allocate_slots("a", 8)
    full.cache_blocks("a", hashes, 8)
    full.free("a")                                             # blocks 1, 2 free, still cached
    assert full.find_longest_cache_hit(hashes, 8) == [1, 2]
    assert pool.allocate(1) == [3] and pool.allocate(1) == [2]   # taken past the manager
    assert full.find_longest_cache_hit(hashes, 8) == [1]


def test_a_pool_whose_evictions_drop_from_another_index_is_refused():
    pool = BlockPool(4)
    (null,) = pool.allocate(1)
    FullAttentionManager(pool, 4, null)
    with pytest.raises(ValueError, match="on_evict"):
        FullAttentionManager(pool, 4, null, BlockHashIndex())
