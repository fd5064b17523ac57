"""pagedkv_lib.core.radix_cache and radix_block_manager: SGLang's radix tree over the course's block pool.

Worked examples for each rule (split, ownership on insert, LRU by access, leaf-only eviction, locks), then a
brute-force reference driven by hypothesis: a dict from every cached block-aligned prefix to its block and
its last access time. A match must return exactly the reference's blocks of the longest cached prefix (the
longest common prefix over all cached sequences); an eviction must remove only unlocked prefixes, free
exactly their blocks, and never keep a leaf older than one it removed. Then the manager: a repeated prompt's
copy of its last block back in the pool after its prefill, a preempted sequence inserting nothing and a
finished one what it computed (figures derived by hand), no block lost or freed twice over an engine's
schedule, and the mini engine's greedy outputs unchanged with it.
"""
from __future__ import annotations

import random
from collections import deque

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pagedkv_lib.core.block_pool import BlockPool
from pagedkv_lib.core.radix_block_manager import RadixBlockManager
from pagedkv_lib.core.radix_cache import RadixCache
from pagedkv_lib.core.sequence import Sequence, SequenceStatus
from pagedkv_lib.engine import LLM, EngineConfig, ModelConfig, SamplingParams, greedy_reference
from pagedkv_lib.engine.model import Qwen3ForCausalLM
from pagedkv_lib.engine.scheduler import schedule


def cache_with(block_size: int = 1, num_blocks: int = 64) -> RadixCache:
    return RadixCache(BlockPool(num_blocks), block_size)


def put(cache: RadixCache, tokens: list[int]) -> int:
    """Insert tokens with fresh blocks, freeing the ones the tree did not take (as a request would)."""
    blocks = cache.pool.allocate(len(tokens) // cache.block_size)
    cached = cache.insert(tokens, blocks)
    cache.pool.free(blocks[: cached // cache.block_size])
    return cached


def shape(cache: RadixCache) -> list[tuple[int, list[int], int]]:
    return [(d, n.key, n.lock_ref) for d, n in cache.nodes()]


# ------------------------------------------------------------------------------------------------------------
# worked examples

def test_a_match_that_ends_inside_a_node_splits_it_and_keeps_the_tail():
    cache = cache_with()
    put(cache, [1, 2, 3, 4, 5])
    blocks, node = cache.match_prefix([1, 2, 3, 9])
    assert blocks == [0, 1, 2] and node.key == [1, 2, 3]
    assert shape(cache) == [(0, [1, 2, 3], 0), (1, [4, 5], 0)]
    assert cache.match_prefix([1, 2, 3, 4, 5, 6])[0] == [0, 1, 2, 3, 4]      # the tail is still reachable


def test_insert_returns_the_cached_length_and_adopts_only_the_new_blocks():
    cache = cache_with()
    assert put(cache, [1, 2, 3, 4]) == 0
    blocks = cache.pool.allocate(4)                                          # [4, 5, 6, 7]
    assert cache.insert([1, 2, 7, 8], blocks) == 2
    assert cache.match_prefix([1, 2, 7, 8])[0] == [0, 1, 6, 7]              # its own 6, 7; the tree's 0, 1
    assert shape(cache) == [(0, [1, 2], 0), (1, [3, 4], 0), (1, [7, 8], 0)]
    assert cache.insert([1, 2, 3, 4], [9, 9, 9, 9]) == 4 and cache.total_size() == 6


def test_block_size_above_one_matches_whole_blocks_only():
    cache = cache_with(block_size=4)
    assert put(cache, list(range(12))) == 0
    assert cache.match_prefix(list(range(11)))[0] == [0, 1]                 # 11 tokens: two whole blocks
    assert cache.match_prefix([0, 1, 2, 3, 4, 5, 99, 7])[0] == [0]          # a difference inside block 1
    with pytest.raises(ValueError, match="len\\(token_ids\\) == len\\(blocks\\) \\* 4"):
        cache.insert(list(range(6)), [1, 2])


def test_eviction_frees_the_least_recently_used_leaf_and_a_match_refreshes():
    cache = cache_with()
    put(cache, [1, 2])                       # t=1
    put(cache, [3, 4])                       # t=2
    cache.match_prefix([1, 2])               # t=3: [1, 2] is now the most recent
    assert cache.evict(1) == 2 and cache.cached_sequences() == [[1, 2]]
    assert cache.pool.num_free() == 64 - 2


def test_only_leaves_go_and_a_parent_left_childless_follows():
    cache = cache_with()
    put(cache, [1, 2, 3])
    put(cache, [1, 2, 4])                     # [1, 2] -> {[3], [4]}
    assert cache.evict(1) == 1 and cache.cached_sequences() == [[1, 2, 4]]
    assert cache.evict(2) == 3 and cache.cached_sequences() == []           # [4], then its parent [1, 2]


def test_a_locked_path_is_never_evicted_until_unlocked():
    cache = cache_with()
    put(cache, [1, 2, 3])
    put(cache, [5, 6])
    _, node = cache.match_prefix([1, 2])                                    # splits [1, 2] | [3]
    cache.inc_lock_ref(node)
    assert (cache.protected_size(), cache.evictable_size()) == (2, 3)
    assert cache.evict(100) == 3 and cache.cached_sequences() == [[1, 2]]
    cache.dec_lock_ref(node)
    assert cache.evictable_size() == 2 and cache.evict(100) == 2
    with pytest.raises(ValueError, match="holds no lock"):
        cache.dec_lock_ref(node)


def test_a_split_hands_the_locks_to_the_new_parent():
    cache = cache_with()
    put(cache, [1, 2, 3, 4])
    _, node = cache.match_prefix([1, 2, 3, 4])
    cache.inc_lock_ref(node)
    _, head = cache.match_prefix([1, 2])                                    # split a locked node
    assert head.lock_ref == 1 and node.parent is head
    cache.dec_lock_ref(node)
    assert head.lock_ref == 0 and cache.protected_size() == 0 and cache.evictable_size() == 4


# ------------------------------------------------------------------------------------------------------------
# against a brute-force reference

class BruteRadix:
    """Every cached block-aligned prefix -> [block, last access, locks]; no tree at all."""

    def __init__(self, block_size: int):
        self.S, self.prefixes, self.clock = block_size, {}, 0

    def pages(self, tokens):
        return [tuple(tokens[: i * self.S]) for i in range(1, len(tokens) // self.S + 1)]

    def match(self, tokens) -> list[tuple]:
        """The longest cached prefix: the longest common prefix with any cached sequence, in whole blocks."""
        self.clock += 1
        hit = []
        for p in self.pages(tokens):
            if p not in self.prefixes:
                break
            hit.append(p)
            self.prefixes[p][1] = self.clock
        return hit

    def insert(self, tokens, blocks) -> int:
        self.clock += 1
        cached = 0
        for i, p in enumerate(self.pages(tokens)):
            if p in self.prefixes:
                cached = len(p)
            else:
                self.prefixes[p] = [blocks[i], 0, 0]
            self.prefixes[p][1] = self.clock
        return cached


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), block_size=st.sampled_from([1, 2, 4]))
def test_matches_inserts_and_evictions_agree_with_a_brute_force_reference(seed, block_size):
    rng = random.Random(seed)
    S = block_size
    cache, ref = cache_with(S, num_blocks=200), BruteRadix(S)
    stems = [[rng.randrange(5) for _ in range(rng.randint(0, 4) * S)] for _ in range(3)]
    locks = []                                                   # (node, its path's prefixes)

    def seq():
        return rng.choice(stems) + [rng.randrange(5) for _ in range(rng.randint(0, 3) * S + rng.randrange(S))]

    for _ in range(40):
        op = rng.random()
        if op < 0.4:
            tokens = seq()
            tokens = tokens[: len(tokens) // S * S]
            if cache.pool.num_free() < len(tokens) // S:
                continue
            blocks = cache.pool.allocate(len(tokens) // S)
            cached = cache.insert(tokens, blocks)
            assert cached == ref.insert(tokens, blocks)
            cache.pool.free(blocks[: cached // S])
        elif op < 0.7:
            tokens = seq()
            blocks, node = cache.match_prefix(tokens)
            hit = ref.match(tokens)
            assert blocks == [ref.prefixes[p][0] for p in hit]              # exactly the reference's blocks
            assert node is cache.root_node if not hit else len(hit[-1]) == sum(
                len(n.key) for n in _path(cache, node))
            if rng.random() < 0.5 and hit:
                cache.inc_lock_ref(node)
                for p in hit:
                    ref.prefixes[p][2] += 1
                locks.append((node, hit))
        elif op < 0.85 and locks:
            node, hit = locks.pop(rng.randrange(len(locks)))
            cache.dec_lock_ref(node)
            for p in hit:
                ref.prefixes[p][2] -= 1
        else:
            before = dict(ref.prefixes)
            free_before, want = cache.pool.num_free(), rng.randint(0, 6)
            freed = cache.evict(want)
            after = {tuple(s[:i * S]) for s in cache.cached_sequences() for i in range(1, len(s) // S + 1)}
            gone = set(before) - after
            assert after <= set(before) and freed == len(gone) == cache.pool.num_free() - free_before
            assert all(before[p][2] == 0 for p in gone), "a locked prefix was evicted"
            for p in gone:
                del ref.prefixes[p]
            leaves = [p for p in ref.prefixes if ref.prefixes[p][2] == 0
                      and not any(len(q) > len(p) and q[: len(p)] == p for q in ref.prefixes)]
            if gone and leaves:                                      # LRU: nothing kept is older than removed
                assert max(before[p][1] for p in gone) <= min(ref.prefixes[p][1] for p in leaves)
            if freed < want:
                assert leaves == [], "stopped before freeing enough while unlocked leaves remained"
        cached = sum(1 for _ in ref.prefixes)
        assert cache.total_size() == cached and cache.pool.num_free() == 200 - cached
        assert cache.protected_size() == sum(1 for v in ref.prefixes.values() if v[2] > 0)


def _path(cache, node):
    while node is not cache.root_node:
        yield node
        node = node.parent


# ------------------------------------------------------------------------------------------------------------
# the block manager

def test_a_prompt_the_tree_already_holds_gives_its_copy_back_after_its_prefill():
    """SGLang's cache_unfinished_req: the duplicate of the tree's block is freed once it was computed, and
    the request reads the tree's block instead. Block size 4, a pool of 8: the free queue starts 0, 1, ..."""
    bm = RadixBlockManager(8, 4)
    a, b = Sequence(list(range(1, 9)), 4, seq_id=0), Sequence(list(range(1, 9)), 4, seq_id=1)
    bm.allocate(a)                                   # two fresh blocks, both full: the tree takes 0 and 1
    bm.allocate(b)                                   # matches 7 tokens, cut to one block; its last is its own
    assert (a.block_table, b.block_table, b.num_cached_tokens) == ([0, 1], [0, 2], 4)
    assert bm.pool.num_free() == 5 and bm.private[1] == [2]          # b's prefill writes block 2
    for s in (a, b):
        s.append_token(9)                            # the prefill step ran
    bm.may_append(a)                                 # block 2 goes back (queue 3..7, 2); a takes 3
    bm.may_append(b)
    assert (a.block_table, b.block_table) == ([0, 1, 3], [0, 1, 4])
    assert bm.pool.num_free() == 4 and bm.private == {0: [3], 1: [4]} and not bm.duplicates
    for s in (a, b):
        s.status = SequenceStatus.FINISHED
        bm.deallocate(s)
    assert bm.pool.num_free() + bm.cache.total_size() == 8 and bm.cache.protected_size() == 0


def test_the_next_admission_can_use_the_block_a_copy_gave_back():
    """A pool of 4, block size 4: A and B share one 8-token prompt (3 blocks, the tree's two locked), so C's
    two blocks fit only once B's copy is back, right after the step that prefilled A and B."""
    bm = RadixBlockManager(4, 4)
    a, b = Sequence(list(range(1, 9)), 4, seq_id=0), Sequence(list(range(1, 9)), 4, seq_id=1)
    c = Sequence(list(range(20, 28)), 4, seq_id=2)
    bm.allocate(a)
    bm.allocate(b)
    assert not bm.can_allocate(c)                    # 1 free, nothing evictable
    for s in (a, b):
        s.append_token(9)
    assert bm.can_allocate(c)
    bm.allocate(c)
    assert (b.block_table, c.block_table, bm.pool.num_free()) == ([0, 1], [3, 2], 0)


def test_a_copy_whose_prefill_never_ran_is_freed_with_its_sequence():
    bm = RadixBlockManager(4, 1)
    a, b = Sequence([5, 6, 7], 1, seq_id=0), Sequence([5, 6, 7], 1, seq_id=1)
    bm.allocate(a)
    bm.allocate(b)                                   # 2 tokens matched, its own block 3 for the last
    assert b.block_table == [0, 1, 3] and bm.pool.num_free() == 0
    bm.deallocate(b)
    assert bm.pool.num_free() == 1 and not bm.duplicates and a.block_table == [0, 1, 2]


def _decoded(bm: RadixBlockManager, prompt: list[int], output: list[int]) -> Sequence:
    """A sequence admitted and run as the engine runs it: the prefill, then may_append before each token."""
    seq = Sequence(prompt, bm.block_size, seq_id=0)
    bm.allocate(seq)
    seq.status = SequenceStatus.RUNNING
    seq.append_token(output[0])
    for token in output[1:]:
        bm.may_append(seq)
        seq.append_token(token)
    return seq


def test_a_preempted_sequence_leaves_only_its_prompt_in_the_tree_and_a_finished_one_all_it_computed():
    """SGLang retracts with release_kv_cache(..., is_insert=False); a finish inserts. Block size 4: a prompt
    of 6 tokens and 4 generated ones, 9 computed (the last was sampled, never run): 2 full blocks."""
    bm = RadixBlockManager(8, 4)
    seq = _decoded(bm, [1, 2, 3, 4, 5, 6], [7, 8, 9, 10])
    assert seq.block_table == [0, 1, 2]              # block 0 in the tree since admission
    bm.deallocate(seq)                               # the scheduler preempts while it is RUNNING
    assert bm.cache.cached_sequences() == [[1, 2, 3, 4]] and bm.pool.num_free() == 7
    seq.status = SequenceStatus.WAITING
    bm.allocate(seq)                                 # recomputed from token 4 on
    assert seq.num_cached_tokens == 4

    bm = RadixBlockManager(8, 4)
    seq = _decoded(bm, [1, 2, 3, 4, 5, 6], [7, 8, 9, 10])
    seq.status = SequenceStatus.FINISHED
    bm.deallocate(seq)
    assert bm.cache.cached_sequences() == [[1, 2, 3, 4, 5, 6, 7, 8]] and bm.pool.num_free() == 6


@pytest.mark.parametrize("block_size", [1, 4])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_no_block_is_lost_or_freed_twice_over_a_schedule_with_preemptions(block_size, seed):
    rng = random.Random(seed)
    num_blocks = 96 // block_size
    bm = RadixBlockManager(num_blocks, block_size)
    system = [rng.randrange(50) for _ in range(rng.randint(5, 20))]
    outputs = {}
    waiting, running = deque(), deque()
    for i in range(12):
        suffix = [rng.randrange(50) for _ in range(rng.randint(1, 20))]
        prompt = (system if rng.random() < 0.7 else []) + suffix
        outputs[i] = rng.randint(1, 20)
        waiting.append(Sequence(prompt, block_size, seq_id=i))
    done = preempted = 0
    while waiting or running:
        n = len(waiting)
        seqs, is_prefill = schedule(waiting, running, bm, 6, 256)
        preempted += 0 if is_prefill else len(waiting) - n
        assert seqs
        for s in seqs:
            s.append_token(rng.randrange(50))
            if s.num_completion_tokens >= outputs[s.seq_id]:
                s.status = SequenceStatus.FINISHED
                running.remove(s)
                bm.deallocate(s)
                done += 1
        private = sum(len(p) for p in bm.private.values())
        assert bm.pool.num_free() + bm.cache.total_size() + private == num_blocks
        for s in running:
            mine = set(bm.private[s.seq_id])
            tree = [b for b in s.block_table if b not in mine]
            assert s.block_table[: len(tree)] == tree, "the tree's blocks are a prefix of the table"
    assert done == 12 and bm.cache.protected_size() == 0 and not bm.private and not bm.locked
    assert preempted > 0


@pytest.mark.parametrize("block_size", [1, 4])
def test_the_engine_with_a_radix_cache_matches_the_full_recompute_reference(block_size):
    """The mini engine, its BlockManager swapped for a RadixBlockManager: same greedy tokens as a model that
    recomputes everything, through prefix hits and preemptions."""
    rng = random.Random(0)
    system = [rng.randrange(512) for _ in range(13)]
    prompts = [system + [rng.randrange(512) for _ in range(rng.randint(1, 9))] for _ in range(5)]
    prompts += [list(prompts[1]), [rng.randrange(512) for _ in range(20)]]
    max_tokens = [rng.randint(6, 16) for _ in prompts]
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(ModelConfig())
    expected = [greedy_reference(model, p, n) for p, n in zip(prompts, max_tokens, strict=True)]
    config = EngineConfig(block_size=block_size, num_kvcache_blocks=80 // block_size, max_num_seqs=8,
                          max_num_batched_tokens=128, max_model_len=64)
    llm = LLM(config)
    llm.scheduler.block_manager = RadixBlockManager(config.num_kvcache_blocks, block_size)
    got = llm.generate(prompts, [SamplingParams(max_tokens=n) for n in max_tokens], use_tqdm=False)
    assert got == expected
    assert sum(s.num_cached_tokens for s in llm.stats) > 0 and sum(s.num_preempted for s in llm.stats) > 0
