"""The independent reference of a sliding-window KV cache group: positions, not blocks.

It knows no manager: which slots a query at or after a position can read or write, which prefix lengths a
window can resume from, and a replay of random requests that compares a `KVCacheCoordinator`'s tables with
those answers after every step. Tests and notebook 19 check the library against it.
"""
from __future__ import annotations

import random

from pagedkv_lib.core.block_manager import block_hashes
from pagedkv_lib.core.kv_cache_coordinator import KVCacheCoordinator, KVCacheGroupSpec


def needed_entries(num_computed: int, num_slots: int, window: int, block_size: int) -> set[int]:
    """Table entries holding one of the first `num_slots` slots that a query at or after position
    `num_computed` reads or writes: every slot from num_computed - window + 1 on."""
    return {p // block_size for p in range(num_slots) if p >= num_computed - window + 1}


def window_is_cached(is_cached, length: int, window: int, block_size: int) -> bool:
    """Whether a hit of `length` tokens can serve a window: positions length - window + 1 .. length - 1 all
    lie in blocks for which is_cached(block index) holds."""
    return all(is_cached(p // block_size) for p in range(max(0, length - window + 1), length))


def table_mismatches(seed: int, block_size: int, window: int, steps: int = 80, vocab: int = 9,
                     num_blocks: int = 2000) -> int:
    """Replay random requests sharing two stems (hits, decode steps, frees) through a full-attention plus a
    sliding-window coordinator of `num_blocks` blocks; count the steps where a sliding table holds other
    entries than `needed_entries`, where a pool reference count differs from the tables that hold the block,
    or where one block sits in both groups' tables (each group's blocks hold its own layers). A decode step
    the pool cannot serve waits for the next step."""
    rng = random.Random(seed)
    coord = KVCacheCoordinator(num_blocks, block_size, [KVCacheGroupSpec("full_attention"),
                                                        KVCacheGroupSpec("sliding_window", window)])
    stems = [[rng.randrange(vocab) for _ in range(40)] for _ in range(2)]
    live: dict[str, list[int]] = {}
    bad = 0
    for step in range(steps):
        if len(live) < 4:
            tokens = rng.choice(stems)[: rng.randint(0, 40)] + [rng.randrange(vocab)
                                                                for _ in range(rng.randint(1, 9))]
            hits, _ = coord.find_longest_cache_hit(block_hashes(tokens, block_size), len(tokens) - 1)
            if coord.allocate_slots(f"r{step}", len(tokens), hits):
                live[f"r{step}"] = tokens
        for rid, tokens in list(live.items()):
            coord.cache_blocks(rid, block_hashes(tokens, block_size), len(tokens))
            coord.remove_skipped_blocks(rid, len(tokens))
            table = coord.managers[1].block_tables[rid]
            held = {i for i, b in enumerate(table) if b != coord.null_block}
            bad += held != needed_entries(len(tokens), len(table) * block_size, window, block_size)
            if rng.random() < 0.1:
                coord.free(rid)
                del live[rid]
            else:
                tokens.append(rng.randrange(vocab))
                if not coord.allocate_slots(rid, len(tokens)):
                    tokens.pop()
        bad += _reference_counts_differ(coord) + _block_in_two_groups(coord)
    return bad


def _reference_counts_differ(coord: KVCacheCoordinator) -> bool:
    held: dict[int, int] = {}
    for manager in coord.managers:
        for table in manager.block_tables.values():
            for b in table:
                if b != coord.null_block:
                    held[b] = held.get(b, 0) + 1
    return any(coord.pool.ref_count(b) != held.get(b, 0) for b in range(coord.pool.num_blocks)
               if b != coord.null_block)


def _block_in_two_groups(coord: KVCacheCoordinator) -> bool:
    owners: dict[int, int] = {}
    for group_id, manager in enumerate(coord.managers):
        for table in manager.block_tables.values():
            for b in table:
                if b != coord.null_block and owners.setdefault(b, group_id) != group_id:
                    return True
    return False
