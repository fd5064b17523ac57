"""The scripts of exercise 139: fixed ones, one per clause of the sliding-window group, and a seeded fuzz.

An op is ("manager", num_blocks, block_size, sliding_window) (block 0 of a fresh BlockPool becomes the null
block), ("hit", rid, token_ids, max_length) (find_longest_cache_hit; its result is the hit that rid's first
allocate brings), ("allocate", rid, num_tokens), ("cache", rid, token_ids, num_tokens), ("skip", rid,
num_computed_tokens) (remove_skipped_blocks) or ("free", rid). The fuzz is built blind (it runs no manager):
the harness skips the ops of a request whose first allocation was refused.
"""
from __future__ import annotations

T16 = list(range(100, 116))


def admit(rid, tokens, max_length=None):
    """A new request as the engine runs it: hit, allocate with the hit, compute, cache, free the skipped."""
    n = len(tokens)
    return [("hit", rid, tokens, n - 1 if max_length is None else max_length), ("allocate", rid, n),
            ("cache", rid, tokens, n), ("skip", rid, n)]


def decode(rid, tokens):
    """One more token for `rid`, whose tokens are now `tokens`."""
    n = len(tokens)
    return [("allocate", rid, n), ("cache", rid, tokens, n), ("skip", rid, n)]


def _grow(rid, tokens, extra):
    ops = []
    for t in extra:
        tokens = tokens + [t]
        ops += decode(rid, tokens)
    return ops


FIXED = [
    ("worked_example", [("manager", 10, 4, 5), *admit("a", T16[:12]), ("skip", "a", 13),
                        *admit("b", T16[:12]), ("free", "a"), ("free", "b")]),
    ("window_edge_token_by_token", [("manager", 12, 4, 5), *admit("a", T16[:3]),
                                    *_grow("a", T16[:3], T16[3:16]), ("free", "a")]),
    ("window_edge_block_size_1", [("manager", 14, 1, 3), *admit("a", T16[:2]), *_grow("a", T16[:2], T16[2:9]),
                                  ("free", "a")]),
    ("never_twice", [("manager", 10, 2, 3), *admit("a", T16[:9]), ("skip", "a", 9), ("skip", "a", 9),
                     ("skip", "a", 10), ("skip", "a", 4), ("free", "a")]),
    ("shared_block_leaves_one_window", [("manager", 12, 4, 6), *admit("a", T16[:12]),
                                        *admit("b", T16[:12] + [7]), *_grow("a", T16[:12], [1, 2, 3, 4]),
                                        ("free", "b"), ("free", "a")]),
    ("hit_from_the_right", [("manager", 8, 2, 4), *admit("a", T16[:12]), ("free", "a"),
                            *admit("c", [7, 7, 7, 7]),                  # reuses a's first blocks
                            *admit("b", T16[:12] + [9]), ("free", "b")]),
    ("hit_needs_the_window_only", [("manager", 20, 4, 9), *admit("a", T16), ("free", "a"),
                                   *admit("c", [7] * 8), *admit("b", T16 + [1]), ("free", "b")]),
    ("short_run_from_the_first_block", [("manager", 12, 4, 16), *admit("a", T16[:8]), *admit("b", T16[:9]),
                                        ("free", "a"), ("free", "b")]),
    ("hit_at_most_max_length", [("manager", 16, 2, 3), *admit("a", T16[:12]),
                                *admit("b", T16[:12] + [5], max_length=6), ("free", "b"), ("free", "a")]),
    ("hit_of_free_blocks_needs_room", [("manager", 5, 4, 6), *admit("a", T16[:12]), ("free", "a"),
                                       *admit("c", [5] * 8), ("hit", "b", T16[:12] + [1], 12),
                                       ("allocate", "b", 13), ("free", "c"), *admit("d", T16[:12] + [1])]),
    ("stale_hash_after_reuse", [("manager", 5, 2, 2), *admit("a", T16[:6]), ("free", "a"),
                                *admit("c", [3] * 7), ("free", "c"), *admit("b", T16[:6] + [1])]),
    ("refused_allocation_changes_nothing", [("manager", 5, 4, 8), *admit("a", T16[:8]),
                                            *admit("b", [1] * 12), *_grow("a", T16[:8], [1, 2, 3, 4, 5])]),
    # b repeats a's prompt: its hit stops a block short (at most 7 tokens), so its last block is a fresh
    # duplicate of a's; c's hit takes the first; d takes a's copy from the pool; e's hit takes b's
    ("duplicate_serves_after_the_first_goes", [("manager", 5, 4, 16), *admit("a", T16[:8]),
                                               *admit("b", T16[:8]), ("hit", "c", T16[:8] + [1], 8),
                                               ("free", "a"), *admit("d", [9] * 8), ("free", "d"),
                                               *admit("e", T16[:8] + [1]), ("free", "b"), ("free", "e")]),
    # a's first blocks leave the window before they are cached: their entries are null by then
    ("null_block_never_registered", [("manager", 10, 2, 3), ("hit", "a", T16[:8], 7), ("allocate", "a", 8),
                                     ("skip", "a", 8), ("cache", "a", T16[:8], 8),
                                     *admit("b", T16[:2] + [5]), ("free", "b"), ("free", "a")]),
]


def fuzz(rng, steps: int) -> list:
    """Random requests over a few shared stems: admissions with hits, decode steps, repeated skips, frees."""
    S = rng.choice([1, 2, 4])
    W = rng.randint(1, 4 * S + 2)
    ops = [("manager", rng.randint(10, 30), S, W)]
    stems = [[rng.randrange(6) for _ in range(rng.randint(2, 5) * S)] for _ in range(3)]
    live: dict[str, list[int]] = {}
    names = iter(f"r{i}" for i in range(10**6))
    for _ in range(steps):
        r = rng.random()
        if r < 0.3 and len(live) < 3:
            stem = rng.choice(stems)
            tail = [rng.randrange(6) for _ in range(rng.randint(1, 2 * S))]
            tokens = stem[: rng.randint(0, len(stem))] + tail
            rid = next(names)
            cap = None if rng.random() < 0.8 else rng.randint(0, len(tokens) - 1)
            ops += admit(rid, tokens, cap)
            live[rid] = tokens
        elif r < 0.85 and live:
            rid = rng.choice(sorted(live))
            live[rid] = live[rid] + [rng.randrange(6)]
            ops += decode(rid, live[rid])
            if rng.random() < 0.15:
                ops.append(("skip", rid, len(live[rid])))          # again: nothing to free
        elif live:
            rid = rng.choice(sorted(live))
            ops.append(("free", rid))
            del live[rid]
    return ops
