"""The sliding-window group and the hybrid coordinator against per-token brute force on random workloads:
which blocks a window needs after every step, reference counts, and the longest prefix hit."""
from __future__ import annotations

import random

import pytest

from pagedkv_lib.core.block_hash_index import BlockHashIndex
from pagedkv_lib.core.block_manager import block_hashes
from pagedkv_lib.core.block_pool import BlockPool
from pagedkv_lib.core.kv_cache_coordinator import KVCacheCoordinator, KVCacheGroupSpec
from pagedkv_lib.core.single_type_manager import FullAttentionManager
from pagedkv_lib.core.sliding_window_manager import SlidingWindowManager
from pagedkv_lib.core.state_manager import StateManager
from pagedkv_lib.testing.window_reference import needed_entries, table_mismatches, window_is_cached


def servable(hashes, index, group_id, length, window, block_size) -> bool:
    return window_is_cached(lambda i: index.get(group_id, hashes[i]) is not None, length, window, block_size)


def check_refs(pool: BlockPool, tables, null_block: int) -> None:
    held = {}
    for table in tables:
        for b in table:
            if b != null_block:
                held[b] = held.get(b, 0) + 1
    for b in range(pool.num_blocks):
        if b != null_block:
            assert pool.ref_count(b) == held.get(b, 0), f"block {b}"
    assert pool.num_free() == pool.num_blocks - 1 - len(held)


def tokens_for(rng: random.Random, prefixes) -> list[int]:
    head = list(rng.choice(prefixes))
    return head[: rng.randint(0, len(head))] + [rng.randrange(50) for _ in range(rng.randint(1, 40))]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("block_size,window", [(1, 4), (4, 5), (4, 8), (16, 7), (3, 1)])
def test_window_frees_exactly_the_blocks_no_query_reads(seed, block_size, window):
    rng = random.Random(f"{seed}/{block_size}/{window}")
    pool = BlockPool(400)
    (null,) = pool.allocate(1)
    sw = SlidingWindowManager(pool, block_size, window, null)
    prefixes = [[rng.randrange(50) for _ in range(30)] for _ in range(3)]
    running: dict[str, list] = {}
    for step in range(60):
        if len(running) < 4:
            rid, toks = f"r{step}", tokens_for(rng, prefixes)
            hashes = block_hashes(toks, block_size)
            hit = sw.find_longest_cache_hit(hashes, len(toks) - 1)
            assert sw.allocate_slots(rid, len(toks), hit) is not None
            computed = len(hit) * block_size
            sw.cache_blocks(rid, hashes, len(toks))
            running[rid] = [toks, hashes, len(toks), rng.randint(1, 12)]
            table = sw.block_tables[rid]
            assert all(b != null for i, b in enumerate(table)
                       if i in needed_entries(computed, len(table) * block_size, window, block_size))
        for rid, (toks, _, num_computed, _) in list(running.items()):
            sw.remove_skipped_blocks(rid, num_computed)
            table = sw.block_tables[rid]
            need = needed_entries(num_computed, len(table) * block_size, window, block_size)
            assert {i for i, b in enumerate(table) if b != null} == need
            state = running[rid]
            if state[3] == 0:
                sw.free(rid)
                del running[rid]
                continue
            toks.append(rng.randrange(50))
            state[1] = block_hashes(toks, block_size)
            assert sw.allocate_slots(rid, len(toks)) is not None
            state[2], state[3] = len(toks), state[3] - 1
            sw.cache_blocks(rid, state[1], len(toks))
        check_refs(pool, sw.block_tables.values(), null)
    for rid in list(running):
        sw.free(rid)
    assert pool.num_free() == pool.num_blocks - 1


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("block_size,window", [(1, 4), (4, 5), (4, 9), (2, 2)])
def test_hit_is_the_longest_prefix_whose_window_is_cached(seed, block_size, window):
    rng = random.Random(f"hit/{seed}/{block_size}/{window}")
    index = BlockHashIndex()
    pool = BlockPool(200)
    (null,) = pool.allocate(1)
    sw = SlidingWindowManager(pool, block_size, window, null, index)
    toks = [rng.randrange(9) for _ in range(60)]
    hashes = block_hashes(toks, block_size)
    for i, h in enumerate(hashes):                 # a random subset of the blocks is cached
        if rng.random() < 0.6:
            index.insert(0, h, 1 + i)
    max_length = rng.randint(0, len(toks))
    hit = sw.find_longest_cache_hit(hashes, max_length)
    lengths = [L for L in range(0, max_length + 1, block_size)
               if L // block_size <= len(hashes) and servable(hashes, index, 0, L, window, block_size)]
    assert len(hit) * block_size == max(lengths)
    for i, b in enumerate(hit):
        if i in needed_entries(len(hit) * block_size, len(hit) * block_size, window, block_size):
            assert b == index.get(0, hashes[i])


@pytest.mark.parametrize("block_size,window", [(1, 4), (4, 6), (16, 33)])
def test_coordinator_tables_match_the_reference_and_the_reference_catches_an_off_by_one(block_size, window,
                                                                                       monkeypatch):
    assert sum(table_mismatches(seed, block_size, window, steps=40) for seed in range(3)) == 0
    monkeypatch.setattr(SlidingWindowManager, "num_skipped_blocks",
                        lambda self, n: max(0, n - self.sliding_window + 2) // self.block_size)
    assert sum(table_mismatches(seed, block_size, window, steps=40) for seed in range(3)) > 0


def test_a_shared_block_leaving_one_window_stays_with_the_other_sequence():
    pool = BlockPool(20)
    (null,) = pool.allocate(1)
    sw = SlidingWindowManager(pool, 4, 4, null)
    toks = list(range(12))
    hashes = block_hashes(toks, 4)
    sw.allocate_slots("a", 12)
    sw.cache_blocks("a", hashes, 12)
    hit = sw.find_longest_cache_hit(hashes, 11)        # 8 tokens: blocks 1 .. of "a", block 0 null
    assert hit == [null, sw.block_tables["a"][1]]
    sw.allocate_slots("b", 12, hit)
    shared = sw.block_tables["a"][1]
    assert pool.ref_count(shared) == 2
    first = sw.block_tables["a"][0]
    assert sw.remove_skipped_blocks("a", 12) == [shared, first]       # positions 0..8 left the window
    assert pool.ref_count(shared) == 1 and pool.ref_count(first) == 0
    assert sw.remove_skipped_blocks("a", 13) == []      # nothing freed twice


def test_hybrid_hit_is_the_agreement_of_all_groups():
    rng = random.Random(3)
    for _ in range(30):
        window, block_size = rng.choice([(4, 2), (8, 4), (5, 1)])
        coord = KVCacheCoordinator(300, block_size, [KVCacheGroupSpec("full_attention"),
                                                      KVCacheGroupSpec("sliding_window", window)])
        full, sw = coord.managers
        toks = [rng.randrange(5) for _ in range(40)]
        hashes = block_hashes(toks, block_size)
        for i, h in enumerate(hashes):
            if rng.random() < 0.85:
                coord.index.insert(0, h, 1 + i)
            if rng.random() < 0.7:
                coord.index.insert(1, h, 100 + i)
        hits, length = coord.find_longest_cache_hit(hashes, len(toks) - 1)
        full_hit = len(full.find_longest_cache_hit(hashes, len(toks) - 1)) * block_size
        best = max(L for L in range(0, len(toks), block_size)
                   if L <= full_hit and servable(hashes, coord.index, 1, L, window, block_size))
        assert length == best <= full_hit
        assert [len(h) * block_size for h in hits] == [length, length]


def test_without_the_rule_a_sliding_group_needs_every_block_of_the_prefix():
    spec = [KVCacheGroupSpec("full_attention"), KVCacheGroupSpec("sliding_window", 4)]
    coords = [KVCacheCoordinator(100, 2, spec, sliding_window_rule=rule) for rule in (True, False)]
    toks = list(range(20))
    hashes = block_hashes(toks, 2)
    for coord in coords:
        for i, h in enumerate(hashes):
            coord.index.insert(0, h, 1 + i)
            if i >= 3:                               # the sliding group lost its first three blocks
                coord.index.insert(1, h, 50 + i)
    assert coords[0].find_longest_cache_hit(hashes, 19)[1] == 18
    assert coords[1].find_longest_cache_hit(hashes, 19)[1] == 0


def test_state_group_holds_one_block_and_gives_no_hit():
    coord = KVCacheCoordinator(50, 4, [KVCacheGroupSpec("full_attention"), KVCacheGroupSpec("state")])
    toks = list(range(30))
    hashes = block_hashes(toks, 4)
    assert coord.allocate_slots("a", 30)
    coord.cache_blocks("a", hashes, 30)
    assert coord.num_blocks_held("a") == [8, 1]
    assert coord.find_longest_cache_hit(hashes, 29)[1] == 0
    assert isinstance(coord.managers[1], StateManager) and isinstance(coord.managers[0], FullAttentionManager)


def test_allocation_that_does_not_fit_changes_nothing():
    coord = KVCacheCoordinator(6, 4, [KVCacheGroupSpec("full_attention"),
                                      KVCacheGroupSpec("sliding_window", 4)])
    assert coord.allocate_slots("a", 8)                  # 2 + 2 of the 5 usable blocks
    before = list(coord.pool.ref_counts)
    assert not coord.allocate_slots("b", 8)
    assert coord.pool.ref_counts == before and "b" not in coord.managers[0].block_tables


def test_one_groups_fresh_block_never_takes_another_groups_untouched_hit():
    # block size 4, [full, window 5]: a's window frees its blocks 4 and 5 while the pool is full, so they
    # lead the free queue; b's window hit is block 5, and the full group's fresh block must not take it
    coord = KVCacheCoordinator(7, 4, [KVCacheGroupSpec("full_attention"),
                                      KVCacheGroupSpec("sliding_window", 5)])
    toks = list(range(12))
    assert coord.allocate_slots("a", 12)
    coord.cache_blocks("a", block_hashes(toks, 4), 12)
    assert coord.managers[1].block_tables["a"] == [4, 5, 6]
    coord.remove_skipped_blocks("a", 12)
    coord.free("a")
    assert list(coord.pool.free_block_ids) == [5, 4, 3, 2, 1, 6]
    b = toks[:8] + [99]
    hashes = block_hashes(b, 4)
    hits, length = coord.find_longest_cache_hit(hashes, 8)
    assert (hits, length) == ([[1, 2], [coord.null_block, 5]], 8)
    assert coord.allocate_slots("b", 9, hits)
    full, window = (m.block_tables["b"] for m in coord.managers)
    assert window[:2] == [coord.null_block, 5] and full[:2] == [1, 2]
    assert not set(full) & set(window), f"a block in both groups' tables: {full}, {window}"
    check_refs(coord.pool, [full, window], coord.null_block)


def test_without_the_rule_full_attentions_search_runs_on_a_full_attention_manager(monkeypatch):
    # the rule is chosen by the group's kind (vLLM maps a spec to its manager class), never by calling one
    # class's method on another class's instance
    searched_by = []
    full_search = FullAttentionManager.find_longest_cache_hit

    def spy(self, hashes, max_length):
        searched_by.append(type(self))
        return full_search(self, hashes, max_length)

    monkeypatch.setattr(FullAttentionManager, "find_longest_cache_hit", spy)
    coord = KVCacheCoordinator(20, 2, [KVCacheGroupSpec("full_attention"),
                                       KVCacheGroupSpec("sliding_window", 4)], sliding_window_rule=False)
    hashes = block_hashes(list(range(8)), 2)
    coord.find_longest_cache_hit(hashes, 7)
    assert searched_by and set(searched_by) == {FullAttentionManager}


def test_under_a_tight_pool_the_replay_finds_no_block_in_two_groups_and_catches_one_group_at_a_time(
        monkeypatch):
    tight = [(4, 5, 24), (16, 16, 12)]                 # block size, window, blocks in the pool
    assert sum(table_mismatches(seed, bs, w, num_blocks=n) for bs, w, n in tight for seed in range(6)) == 0

    def one_group_at_a_time(self, request_id, num_tokens, computed_blocks=None):
        if self.num_blocks_to_allocate(request_id, num_tokens, computed_blocks) > self.pool.num_free():
            return False
        for manager, blocks in zip(self.managers, computed_blocks or [[] for _ in self.managers]):
            manager.add_computed_blocks(request_id, blocks)
            manager.allocate_new_blocks(request_id, num_tokens)
        return True

    monkeypatch.setattr(KVCacheCoordinator, "allocate_slots", one_group_at_a_time)
    assert sum(table_mismatches(seed, bs, w, num_blocks=n) for bs, w, n in tight for seed in range(6)) > 0
