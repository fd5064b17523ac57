"""Cases of exercise 141, the two-tier prefix cache: scripts checked step by step (cases/script.py).

An op is ("cache", num_gpu_blocks, num_cpu_blocks), ("allocate", name, block_hashes) (the table is kept
under `name` when one comes back), ("free", name), ("lookup", block_hashes) or ("take",) (take_transfers).
Block hashes are small ints; in the random scripts each names a path in a tree of prompts (a chained hash).
After every op the harness records the return value and the state the contract names: gpu_free,
gpu_ref_counts, gpu_hash_to_block, cpu_lru as [hash, slot] pairs in order, cpu_free, saves and loads. This
module imports nothing of the library: the graded class is pure Python, and so is the harness.

Clauses of the contract -> the fixed script that holds each:
    lookup: "gpu" before "cpu"; changes nothing                          evicted_blocks_come_back
    lookup: the prefix ends at the first block neither tier holds        the_chain_breaks_at_a_miss
    allocate: a GPU hit is shared (one reference more)                  gpu_hits_are_shared
    allocate: a GPU hit in the free queue leaves it first               a_free_hit_leaves_the_queue
    allocate: every hit taken before any fresh block                    a_cpu_hit_ahead_of_a_free_gpu_hit
        (else the first fresh block can be a later block's GPU hit)
    allocate: None and nothing changed when too few blocks are free     too_few_free_blocks
        (hits in the free queue counted; an exact fit allocates)
    fresh blocks from the front of gpu_free                             gpu_hits_are_shared
    an evicted cached block is written out, a free slot first           evicted_blocks_come_back
    ... unless the CPU holds it already                                 written_out_once
    a CPU hit is loaded into a fresh block and stays on the CPU          evicted_blocks_come_back
    CPU hits refreshed last block first (the first ends newest)         evicted_blocks_come_back
    the CPU evicts its least recently used block                        lru_order_on_the_cpu
    ... never a slot a queued load reads; none left: nothing saved       a_pinned_slot_survives
    free: last block first, to the END of gpu_free, hash kept           gpu_hits_are_shared
    take_transfers: the queues handed over, emptied, slots unpinned      a_pinned_slot_survives
"""
from __future__ import annotations

import random

from pagedkv_lib.judge.cases.compare import show
from pagedkv_lib.judge.outcome import Outcome

from . import Case
from .script import compare_steps, run_script

KEYS = ("ret", "gpu_free", "gpu_ref_counts", "gpu_hash_to_block", "saves", "loads", "cpu_lru", "cpu_free")
MISSING = {"__opaque__": "missing attribute"}
N = None

FIXED = [
    ("gpu_hits_are_shared", [("cache", 5, 2), ("allocate", "a", [1, 2, N]), ("allocate", "b", [1, 2, N]),
                             ("lookup", [1, 2, 3]), ("free", "a"), ("free", "b"), ("allocate", "c", [1, 4])]),
    ("evicted_blocks_come_back", [("cache", 3, 4), ("allocate", "a", [1, 2, N]), ("free", "a"),
                                  ("allocate", "b", [7, 8, N]), ("take",), ("free", "b"),
                                  ("lookup", [1, 2, N]), ("allocate", "c", [1, 2, N]), ("take",),
                                  ("lookup", [1, 2]), ("lookup", [7, 8])]),
    ("the_chain_breaks_at_a_miss", [("cache", 8, 4), ("allocate", "a", [1, 2, 3, N]), ("free", "a"),
                                    ("lookup", [1, 9, 3]), ("lookup", [1, 2, 3, 4]), ("lookup", [1, N, 3]),
                                    ("allocate", "b", [1, 9, 3])]),
    ("written_out_once", [("cache", 2, 4), ("allocate", "a", [1, N]), ("free", "a"),
                          ("allocate", "b", [5, N]), ("take",), ("free", "b"), ("allocate", "c", [1, N]),
                          ("take",), ("free", "c"), ("allocate", "d", [9, N]), ("take",)]),
    ("lru_order_on_the_cpu", [("cache", 1, 3), ("allocate", "a", [1]), ("free", "a"), ("allocate", "b", [2]),
                              ("free", "b"), ("allocate", "c", [3]), ("free", "c"), ("allocate", "d", [4]),
                              ("free", "d"), ("take",), ("allocate", "e", [1]), ("take",), ("free", "e"),
                              ("lookup", [2]), ("lookup", [3])]),
    ("a_pinned_slot_survives", [("cache", 2, 1), ("allocate", "a", [1, N]), ("free", "a"),
                                ("allocate", "b", [4, N]), ("free", "b"), ("take",),
                                ("allocate", "c", [1, N]), ("take",), ("free", "c"),
                                ("allocate", "d", [6, N]), ("free", "d"), ("allocate", "e", [7, N]),
                                ("take",)]),
    ("too_few_free_blocks", [("cache", 3, 2), ("allocate", "a", [1, 2, N]), ("allocate", "b", [1, 5, N]),
                             ("free", "a"), ("allocate", "c", [1, 2, 3, 4]), ("allocate", "d", [1, 2, N])]),
    ("a_free_hit_leaves_the_queue", [("cache", 3, 2), ("allocate", "a", [1, N]), ("free", "a"),
                                     ("allocate", "b", [1, 7, N]), ("allocate", "c", [1])]),
    # hash 1 leaves the GPU while a table that starts with hash 2 keeps block 1: [1, 2] is then ["cpu",
    # "gpu"], and hash 2's free block sits at the front of gpu_free
    ("a_cpu_hit_ahead_of_a_free_gpu_hit", [("cache", 3, 4), ("allocate", "a", [1, 2]), ("allocate", "x", [2]),
                                           ("free", "a"), ("allocate", "y", [N]), ("allocate", "z", [N]),
                                           ("take",), ("free", "x"), ("free", "y"), ("free", "z"),
                                           ("lookup", [1, 2]), ("allocate", "c", [1, 2]), ("take",)]),
]


def fuzz(rng: random.Random, num_ops: int = 40) -> list:
    """Prompts drawn from a small tree (three roots, two children a level), each path one chained hash;
    allocations, frees, lookups and takes at random on small tiers."""
    ids: dict[tuple, int] = {}
    ops = [("cache", rng.randint(3, 8), rng.randint(1, 5))]
    live, names = [], iter(f"r{i}" for i in range(999))

    def prompt() -> list:
        path, hashes = (), []
        for depth in range(rng.randint(1, 4)):
            path += (rng.randrange(3 if depth == 0 else 2),)
            hashes.append(ids.setdefault(path, len(ids) + 1))
        return hashes + ([None] if rng.random() < 0.5 else [])

    for _ in range(num_ops):
        r = rng.random()
        if live and r < 0.35:
            ops.append(("free", live.pop(rng.randrange(len(live)))))
        elif r < 0.5:
            ops.append(("lookup", prompt()))
        elif r < 0.65:
            ops.append(("take",))
        else:
            name = next(names)
            ops.append(("allocate", name, prompt()))
            live.append(name)
    return ops + [("take",)]


def build(seed: int, device: str = "cpu") -> list[Case]:
    rng = random.Random(f"141/{seed}")
    scripts = [(f"fixed/{name}", ops) for name, ops in FIXED]
    scripts += [(f"random/{i}", fuzz(rng)) for i in range(8)]
    return [Case(name, {"ops": ops}, [f"TwoTierCache({ops[0][1]}, {ops[0][2]})"]) for name, ops in scripts]


def _pairs(value) -> list:
    """A list of 2-item tuples or lists as [[a, b], ...] (either spelling of a pair is accepted)."""
    if not isinstance(value, (list, tuple)):
        return value
    return [list(v) if isinstance(v, (list, tuple)) and len(v) == 2 else v for v in value]


def run(ns, case: Case) -> dict:
    def apply(state, op):
        kind = op[0]
        if kind == "cache":
            state["cache"], state["tables"] = ns["TwoTierCache"](op[1], op[2]), {}
            return None
        cache, tables = state["cache"], state["tables"]
        if kind == "allocate":
            table = cache.allocate(list(op[2]))
            if isinstance(table, list):
                tables[op[1]] = list(table)
            return table
        if kind == "free":
            return cache.free(list(tables.pop(op[1], [])))
        if kind == "lookup":
            return cache.lookup(list(op[1]))
        saves, loads = cache.take_transfers()
        return [_pairs(saves), _pairs(loads)]

    def snapshot(state, op):
        cache = state["cache"]
        lru = getattr(cache, "cpu_lru", MISSING)
        return {"gpu_free": list(getattr(cache, "gpu_free", MISSING)),
                "gpu_ref_counts": list(getattr(cache, "gpu_ref_counts", MISSING)),
                "gpu_hash_to_block": dict(getattr(cache, "gpu_hash_to_block", MISSING)),
                "cpu_lru": [list(kv) for kv in lru.items()] if hasattr(lru, "items") else MISSING,
                "cpu_free": list(getattr(cache, "cpu_free", MISSING)),
                "saves": _pairs(list(getattr(cache, "saves", MISSING))),
                "loads": _pairs(list(getattr(cache, "loads", MISSING)))}

    return run_script(case.args["ops"], apply, snapshot)


def render(op, step) -> str:
    kind = op[0]
    if kind == "cache":
        line = f"cache = TwoTierCache(num_gpu_blocks={op[1]}, num_cpu_blocks={op[2]})"
    elif kind == "allocate":
        line = f"{op[1]} = cache.allocate({show(op[2])})"
    elif kind == "free":
        line = f"cache.free({op[1]})"
    elif kind == "lookup":
        line = f"cache.lookup({show(op[1])})"
    else:
        line = "saves, loads = cache.take_transfers()"
    if step is not None and kind in ("allocate", "lookup", "take"):
        line += f"   # -> {show(step['ret'])}"
    return line


def check(case: Case, expected: dict, got: dict) -> Outcome:
    ops, steps = case.args["ops"], expected["steps"]
    return compare_steps(ops, expected, got, KEYS, render, _hints(ops, steps),
                         error_hint=_error_hint(ops)) or Outcome()


def _tiers(state: dict, block_hashes: list) -> list:
    """lookup(block_hashes) on the state a snapshot recorded."""
    on_cpu = {pair[0] for pair in state["cpu_lru"]}
    tiers = []
    for h in block_hashes:
        if h is not None and h in state["gpu_hash_to_block"]:
            tiers.append("gpu")
        elif h is not None and h in on_cpu:
            tiers.append("cpu")
        else:
            break
    return tiers


def _error_hint(ops):
    """The hint for a call that raised: for an allocate, the clause that the state before it and the oracle's
    answer point at (refused: the room was miscounted; served: a hit was evicted by a fresh block)."""
    def hint(i: int, steps: list) -> str:
        if ops[i][0] != "allocate" or i == 0:
            return ""
        before, block_hashes = steps[i - 1], ops[i][2]
        tiers = _tiers(before, block_hashes)
        if _free_gpu_hits(before, block_hashes, tiers) and steps[i]["ret"] is None:
            return ("allocate ran out of free blocks: count the room before taking any: GPU hits sitting in "
                    "gpu_free need a block each too (a hit takes it out of the queue); too few, return None")
        if _cpu_hit_ahead_of_a_free_gpu_hit(before, block_hashes, tiers):
            return _TAKE_HITS_FIRST
        return ""                                   # no clause known to end in an exception here

    return hint


_TAKE_HITS_FIRST = ("take every hit before any fresh block: a CPU hit's fresh block comes from the front of "
                    "gpu_free, which can be a later block's GPU hit (evicted before it is taken)")


def _free_gpu_hits(before: dict, block_hashes: list, tiers: list) -> list:
    """The prompt's positions whose GPU hit sits in gpu_free (reference count 0) in the state `before`."""
    return [j for j, (h, t) in enumerate(zip(block_hashes, tiers))
            if t == "gpu" and before["gpu_ref_counts"][before["gpu_hash_to_block"][h]] == 0]


def _cpu_hit_ahead_of_a_free_gpu_hit(before: dict, block_hashes: list, tiers: list) -> bool:
    """Whether a fresh block taken in prompt order could be a later block's GPU hit (one in gpu_free)."""
    return any("cpu" in tiers[:j] for j in _free_gpu_hits(before, block_hashes, tiers))


def _hints(ops, steps):
    def hint(i: int, key: str, e: dict, g: dict) -> str:
        kind = ops[i][0]
        if any(g.get(k) == MISSING for k in KEYS):
            return ("keep the attributes the judge reads: gpu_free, gpu_ref_counts, gpu_hash_to_block, "
                    "cpu_lru, cpu_free, saves, loads")
        if kind == "lookup" and key != "ret":
            return ("lookup changes nothing, not even the CPU's LRU order: only allocate refreshes a CPU hit "
                    "(a lookup may be a question the scheduler asks and drops)")
        if kind == "lookup":
            return _lookup_hint(e["ret"], g["ret"])
        if kind == "take":
            return ("take_transfers returns (saves, loads) queued since the last call, in order, and empties "
                    "both queues")
        if kind == "free":
            return ("free drops one reference per block, the LAST block of the table first; a block reaching "
                    "0 goes to the END of gpu_free and keeps its hash")
        if key == "ret" and (e["ret"] is None) != (g["ret"] is None):
            return ("allocate needs one free block per block the GPU does not serve, plus one per GPU hit "
                    "that sits in gpu_free; None only when fewer are free, and then nothing changes")
        if kind == "allocate" and e["ret"] is None:
            return "a refused allocate (None) changes nothing: check the free blocks before touching anything"
        return _allocate_hint(key, e, g, steps[i - 1], ops[i][2])

    return hint


def _lru_order_hint(exp: list, got: list, before: dict, block_hashes: list, tiers: list) -> str:
    """Which of the call's moves put the CPU's LRU order wrong, from the first place where it differs: a
    CPU hit's refresh, or a written-out block's entry."""
    hits = {h for h, t in zip(block_hashes, tiers) if t == "cpu"}
    written = {pair[0] for pair in exp} - {pair[0] for pair in before["cpu_lru"]}
    first = next(j for j, (a, b) in enumerate(zip(exp, got)) if a != b)
    involved = {exp[first][0], got[first][0]}
    if involved & written and not involved & hits:
        return ("a written-out block enters cpu_lru as the most recently used: at the END, after the CPU "
                "hits the same call refreshed")
    if involved & hits and not involved & written:
        return ("LRU order on the CPU: a CPU hit moves to the most recently used end (the prefix's last "
                "block first, so its first ends newest)")
    return ("LRU order on the CPU: a CPU hit moves to the most recently used end (the prefix's last block "
            "first), and a written-out block enters there after them; this call did both, and the order "
            "alone does not say which went wrong")


def _lookup_hint(e, g) -> str:
    if isinstance(g, list) and len(g) > len(e):
        return ("a prefix chain breaks at its first miss: stop at the first block that neither tier holds "
                "(or has no hash), even if a later block is cached")
    if isinstance(g, list) and len(g) == len(e):
        return "the GPU serves a block it holds, before the CPU (\"gpu\" first, then \"cpu\")"
    return ("a block is served by the GPU if gpu_hash_to_block holds its hash, else by the CPU if cpu_lru "
            "does; lookup changes nothing")


def _allocate_hint(key: str, e: dict, g: dict, before: dict, block_hashes: list) -> str:
    if key == "gpu_free" and isinstance(g["gpu_free"], list) and len(g["gpu_free"]) > len(e["gpu_free"]):
        return ("a GPU hit on a free block takes it OUT of gpu_free: left there, it is evicted and handed "
                "out again while a block table holds it")
    tiers = _tiers(before, block_hashes)
    if key in ("gpu_ref_counts", "ret") and e["ret"] != g["ret"] and \
            _cpu_hit_ahead_of_a_free_gpu_hit(before, block_hashes, tiers):
        return _TAKE_HITS_FIRST
    if key in ("gpu_ref_counts", "ret") and e["ret"] != g["ret"]:
        return ("GPU hits are shared (one reference more) and go in the table; the other blocks come from "
                "the FRONT of gpu_free")
    if key == "gpu_ref_counts" and isinstance(g["gpu_ref_counts"], list):
        hits = [before["gpu_hash_to_block"][h] for h, t in zip(block_hashes, tiers) if t == "gpu"]
        if any(g["gpu_ref_counts"][b] < e["gpu_ref_counts"][b] for b in hits):
            return ("a GPU hit gains one reference: raise its count by one, do not set it to 1 (other "
                    "tables may hold it already)")
    if key == "saves":
        got, exp = g["saves"], e["saves"]
        pinned = {pair[0] for pair in e["loads"]}                  # slots the queued loads read
        if isinstance(got, list) and len(got) > len(exp):
            extra = [p for p in got if p not in exp]
            if any(isinstance(p, list) and p[1:] and p[1] in pinned for p in extra):
                return ("eviction of a block still referenced: a CPU slot that a queued load reads cannot be "
                        "evicted until take_transfers; with every slot pinned the block is simply not saved")
            return ("write-out of a block already on the CPU: an evicted block whose hash cpu_lru holds is "
                    "not written again")
        if isinstance(got, list) and len(got) < len(exp) and e["cpu_free"] == [] and pinned == set():
            return ("the loads' slots stay pinned until take_transfers only: take_transfers unpins them, and "
                    "then they can be evicted again")
        if isinstance(got, list) and len(got) < len(exp):
            return ("a fresh block that still held a hash is EVICTED from the GPU: write it out (a slot, and "
                    "(gpu block, slot) appended to saves) unless the CPU holds it")
        return ("the CPU takes a slot from the front of cpu_free, else evicts its LEAST recently used block "
                "(the front of cpu_lru) whose slot no queued load reads")
    if key == "cpu_lru":
        got, exp = g["cpu_lru"], e["cpu_lru"]
        if isinstance(got, list) and sorted(map(tuple, got)) == sorted(map(tuple, exp)):
            return _lru_order_hint(exp, got, before, block_hashes, tiers)
        if isinstance(got, list) and {tuple(p)[0] for p in got} < {tuple(p)[0] for p in exp}:
            return ("a loaded-back block stays on the CPU (both tiers hold it): a CPU hit is copied, not "
                    "moved, so its later eviction from the GPU needs no write-out")
        return ("the CPU evicts its LEAST recently used unpinned block (the front of cpu_lru) when cpu_free "
                "is empty")
    if key == "loads":
        return ("a CPU hit is loaded: append (its slot, the fresh GPU block) to loads, one per CPU-served "
                "block, in prefix order")
    if key == "gpu_hash_to_block":
        return ("an evicted block's hash leaves gpu_hash_to_block; a fresh block takes its block's hash (CPU "
                "hits included: the block is on the GPU again)")
    return ("follow the contract's order: lookup, take every hit (last block first), then fresh blocks in "
            "order")
