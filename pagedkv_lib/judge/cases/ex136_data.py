"""The scripts of exercise 136: fixed ones, one per rule of the radix cache, and a seeded random fuzz.

An op is ("cache", num_blocks, block_size); ("insert", token_ids): the harness allocates the blocks from the
pool, inserts, and frees the ones the tree did not take (blocks[:returned // block_size], as a request
does); ("insert_bad", token_ids, num_blocks): an insert with the wrong number of blocks; ("match", token_ids,
name): the node returned is kept under `name`; ("lock", name), ("unlock", name); ("evict", num_blocks).
Scripts lock a node only right after the match that returned it, and unlock only what they locked.
"""
from __future__ import annotations

from pagedkv_lib.core.block_pool import BlockPool
from pagedkv_lib.core.radix_cache import RadixCache

FIXED = [  # name, ops
    ("insert_then_match", [
        ("cache", 16, 1), ("insert", [1, 2, 3, 4, 5]), ("match", [1, 2, 3, 4, 5, 6], "a"),
        ("match", [7, 8], "miss"), ("insert", [1, 2, 3, 4, 5]), ("insert", [1, 2, 3, 4, 5, 6, 7]),
        ("insert", [8, 9]), ("match", [1, 2, 3, 4, 5, 6, 7], "b")]),
    ("match_splits_a_node", [
        ("cache", 16, 1), ("insert", [1, 2, 3, 4, 5]), ("match", [1, 2, 3, 9], "head"),
        ("match", [1, 2, 3, 4, 5], "tail"), ("match", [1, 2], "top")]),
    ("insert_splits_a_node", [
        ("cache", 16, 1), ("insert", [1, 2, 3, 4, 5]), ("insert", [1, 2, 7, 8]),
        ("match", [1, 2, 7, 8, 9], "a"), ("match", [1, 2, 3, 4, 5], "b")]),
    ("whole_blocks_at_block_size_4", [
        ("cache", 12, 4), ("insert", list(range(12))), ("match", list(range(11)), "a"),
        ("match", [0, 1, 2, 3, 4, 5, 99, 7], "b"), ("insert", [0, 1, 2, 3, 20, 21, 22, 23]),
        ("match", [0, 1, 2, 3, 20, 21, 22, 23, 24], "c"), ("insert_bad", [1, 2, 3, 4, 5, 6], 2),
        ("insert", list(range(40, 52))),
        ("insert_bad", [40, 41, 42, 43, 44, 45, 46, 47, 99, 99, 99, 99], 2)]),   # a walk first would split
    ("lru_insert_refreshes", [
        ("cache", 16, 1), ("insert", [1, 2]), ("insert", [3, 4]), ("insert", [1, 2]), ("evict", 1),
        ("match", [1, 2], "a"), ("evict", 1)]),
    ("lru_match_refreshes", [
        ("cache", 16, 1), ("insert", [1, 2]), ("insert", [3, 4]), ("match", [1, 2, 9], "a"), ("evict", 1)]),
    ("evict_leaves_then_their_parent", [
        ("cache", 16, 1), ("insert", [1, 2, 3]), ("insert", [1, 2, 4]), ("evict", 0), ("evict", 1),
        ("evict", 2), ("evict", 5)]),
    ("locked_path_survives", [
        ("cache", 16, 1), ("insert", [1, 2, 3]), ("insert", [5, 6]), ("match", [1, 2], "a"), ("lock", "a"),
        ("evict", 100), ("unlock", "a"), ("evict", 100)]),
    ("lock_walks_to_the_root", [
        ("cache", 16, 1), ("insert", [1, 2, 3, 4]), ("insert", [1, 2, 5]), ("match", [1, 2, 3, 4], "a"),
        ("lock", "a"), ("evict", 100), ("unlock", "a"), ("evict", 1)]),
    ("split_of_a_locked_node", [
        ("cache", 16, 1), ("insert", [1, 2, 3, 4]), ("match", [1, 2, 3, 4], "a"), ("lock", "a"),
        ("match", [1, 2], "b"), ("evict", 100), ("unlock", "a"), ("evict", 100)]),
    ("unlock_without_lock_raises", [
        ("cache", 16, 1), ("insert", [1, 2]), ("match", [1, 2], "a"), ("lock", "a"), ("unlock", "a"),
        ("unlock", "a"), ("evict", 100)]),
    # x is locked while the leaf [2] goes, so that the next evict weighs u's stamp (from the match of
    # [1, 2], which passed through u) against x's older one
    ("match_stamps_its_whole_path", [
        ("cache", 16, 1), ("insert", [1, 2]), ("match", [1], "u"), ("insert", [5]), ("match", [5], "x"),
        ("lock", "x"), ("match", [1, 2], "c"), ("evict", 1), ("unlock", "x"), ("evict", 1)]),
    # the match of [1, 2] splits [1..4] (stamped first) and is newer than [9, 10]: the upper half [1, 2], a
    # leaf once [3, 4] goes, must outlive [9, 10]; a split that kept the old stamp above evicts it first
    ("split_stamps_its_upper_half", [
        ("cache", 16, 1), ("insert", [1, 2, 3, 4]), ("insert", [9, 10]), ("match", [1, 2], "u"), ("evict", 1),
        ("evict", 1), ("evict", 1)]),
    # a 0 below a locked node (e under c, which d's lock holds), then above one (c unlocked under d)
    ("unlock_finds_a_zero_partway", [
        ("cache", 16, 1), ("insert", [1, 2, 3]), ("match", [1, 2], "c"), ("insert", [1, 2, 4]),
        ("match", [1, 2, 3], "d"), ("lock", "d"), ("match", [1, 2, 4], "e"), ("unlock", "e"),
        ("unlock", "c"), ("unlock", "d"), ("evict", 100)]),
    ("inputs_are_read_only", [
        ("cache", 12, 4), ("insert", list(range(8))), ("match", list(range(11)), "a"),
        ("insert", list(range(12))), ("match", [0, 1, 2, 3, 9], "b")]),
]


def fuzz(rng, steps: int) -> list:
    """Random scripts over a few shared stems, checked as they are built on the library so that every op is
    one the contract covers (locks only right after their match, unlocks only of what is locked)."""
    S = rng.choice([1, 2, 4])
    N = rng.randint(12, 24)
    pool = BlockPool(N)
    cache, ops = RadixCache(pool, S), [("cache", N, S)]
    stems = [[rng.randrange(6) for _ in range(rng.randint(1, 3) * S)] for _ in range(3)]
    nodes, locked, names = {}, [], iter(f"n{i}" for i in range(10**6))

    def tokens():
        return rng.choice(stems) + [rng.randrange(6) for _ in range(rng.randint(0, 3) * S + rng.randrange(S))]

    for _ in range(steps):
        r = rng.random()
        if r < 0.35:
            t = tokens()
            t = t[: len(t) // S * S]
            if pool.num_free() < len(t) // S:
                continue
            blocks = pool.allocate(len(t) // S)
            pool.free(blocks[: cache.insert(t, blocks) // S])
            ops.append(("insert", t))
        elif r < 0.65:
            name, t = next(names), tokens()
            nodes[name] = cache.match_prefix(t)[1]
            ops.append(("match", t, name))
            if rng.random() < 0.5 and nodes[name] is not cache.root_node:
                cache.inc_lock_ref(nodes[name])
                locked.append(name)
                ops.append(("lock", name))
        elif r < 0.8 and locked:
            name = locked.pop(rng.randrange(len(locked)))
            cache.dec_lock_ref(nodes[name])
            ops.append(("unlock", name))
        else:
            n = rng.randint(1, 6)
            cache.evict(n)
            ops.append(("evict", n))
    return ops
