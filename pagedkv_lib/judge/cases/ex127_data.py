"""The scripts of exercise 127: fixed ones, one per line of the contract, and a seeded random fuzz.

An op is ("pool", N), ("allocate", n, name), ("free", name), ("free_ids", [ids]), ("fork", src, dst) or
("append", name, num_tokens, block_size). Each script comes with its kv_cache shape (L, N, S).
"""
from __future__ import annotations

import torch

from pagedkv_lib.core.block_pool import BlockPool
from pagedkv_lib.core.copy_on_write import append_slot

FIXED = [
    ("course_worked_example", (1, 8, 4), [
        ("pool", 8), ("allocate", 3, "a"), ("allocate", 2, "b"), ("free", "a"), ("allocate", 4, "c")]),
    ("failed_allocate_changes_nothing", (1, 4, 4), [
        ("pool", 4), ("allocate", 3, "a"), ("allocate", 2, "b"), ("allocate", 1, "c"), ("allocate", 1, "d"),
        ("allocate", 0, "e"), ("free", "a"), ("allocate", 3, "f")]),
    ("freed_blocks_join_the_end_in_order", (1, 6, 4), [
        ("pool", 6), ("allocate", 6, "a"), ("free_ids", [4, 1]), ("free_ids", [5]), ("allocate", 3, "b"),
        ("free_ids", [0, 2, 3]), ("allocate", 3, "c")]),
    ("double_free_raises_and_changes_nothing", (1, 4, 4), [
        ("pool", 4), ("allocate", 2, "a"), ("free", "a"), ("free_ids", [0]), ("free_ids", [2]),
        ("allocate", 1, "b"), ("free_ids", [2, 2]), ("free_ids", [3, 2]), ("free_ids", [2, 0]),
        ("allocate", 1, "c"), ("allocate", 2, "d")]),
    ("repeated_ids_drop_one_reference_each", (1, 4, 4), [
        ("pool", 4), ("allocate", 2, "a"), ("fork", "a", "b"), ("free_ids", [1, 1]), ("free_ids", [0]),
        ("allocate", 2, "c"), ("free_ids", [0, 2, 0])]),
    ("fork_shares_and_counts", (1, 6, 4), [
        ("pool", 6), ("allocate", 2, "a"), ("fork", "a", "b"), ("fork", "b", "c"), ("free", "a"),
        ("free", "b"), ("free", "c"), ("allocate", 6, "d")]),
    ("copy_on_write_two_layers", (2, 6, 4), [
        ("pool", 6), ("allocate", 2, "a"), ("append", "a", 5, 4), ("fork", "a", "b"), ("append", "b", 6, 4),
        ("append", "a", 6, 4), ("append", "b", 7, 4), ("append", "a", 7, 4)]),
    ("new_block_when_the_position_starts_one", (1, 4, 4), [
        ("pool", 4), ("allocate", 2, "a"), ("fork", "a", "b"), ("append", "b", 8, 4), ("append", "a", 8, 4),
        ("append", "a", 9, 4)]),
    ("failed_append_changes_nothing", (2, 3, 4), [
        ("pool", 3), ("allocate", 2, "a"), ("append", "a", 5, 4), ("fork", "a", "b"), ("allocate", 1, "c"),
        ("append", "b", 6, 4), ("free", "c"), ("append", "b", 6, 4), ("append", "a", 6, 4),
        ("append", "a", 7, 4), ("append", "a", 8, 4)]),
    ("block_size_1", (1, 5, 1), [
        ("pool", 5), ("allocate", 2, "a"), ("fork", "a", "b"), ("append", "a", 2, 1), ("append", "b", 2, 1),
        ("append", "b", 3, 1), ("append", "a", 3, 1)]),
    ("empty_table_first_token", (1, 3, 4), [
        ("pool", 3), ("allocate", 0, "a"), ("append", "a", 0, 4), ("append", "a", 1, 4)]),
    ("three_way_fork_copies_twice", (2, 6, 4), [
        ("pool", 6), ("allocate", 1, "a"), ("append", "a", 2, 4), ("fork", "a", "b"), ("fork", "a", "c"),
        ("append", "b", 3, 4), ("append", "c", 3, 4), ("append", "a", 3, 4)]),
    ("block_size_16_three_layers", (3, 4, 16), [
        ("pool", 4), ("allocate", 1, "a"), ("append", "a", 14, 16), ("fork", "a", "b"),
        ("append", "b", 15, 16), ("append", "b", 16, 16), ("append", "a", 15, 16), ("free", "b"),
        ("allocate", 3, "c")]),
]


def fuzz(rng, steps: int):
    """((L, N, S), ops): random valid ops, plus deliberate double frees, simulated on the library."""
    L, N, S = rng.randint(1, 3), rng.randint(4, 16), rng.choice([1, 2, 4, 16])
    pool, kv_cache = BlockPool(N), torch.zeros(2, 1, N, S, 1, 1)
    ops, tables, tokens, names = [("pool", N)], {}, {}, iter(f"s{i}" for i in range(10**6))
    for _ in range(steps):
        r, live = rng.random(), sorted(tables)
        if r < 0.2 or not live:
            n, name = rng.randint(0, 4), next(names)
            ops.append(("allocate", n, name))
            blocks = pool.allocate(n)
            if blocks is not None:
                tables[name], tokens[name] = blocks, rng.randint((n - 1) * S + 1, n * S) if n else 0
        elif r < 0.35:
            src, dst = rng.choice(live), next(names)
            ops.append(("fork", src, dst))
            tables[dst], tokens[dst] = pool.fork(tables[src]), tokens[src]
        elif r < 0.75:
            name = rng.choice(live)
            ops.append(("append", name, tokens[name], S))
            if append_slot(pool, kv_cache, tables[name], tokens[name], S) is not None:
                tokens[name] += 1
        elif r < 0.92:
            name = rng.choice(live)
            ops.append(("free", name))
            pool.free(tables.pop(name))
        else:
            free = [b for b in range(N) if pool.ref_count(b) == 0]
            once = [b for b in range(N) if pool.ref_count(b) == 1]
            if free:
                ops.append(("free_ids", [rng.choice(free)]))
            elif once:
                ops.append(("free_ids", [rng.choice(once)] * 2))
    return (L, N, S), ops
