"""Cases of exercise 139, the sliding-window group of a hybrid KV cache: scripts checked step by step.

After every op the harness records the return value and a snapshot: every request's block table
(`block_tables`), the pool's free queue (in order) and reference counts. Block 0 of the pool is taken as the
null block before the manager is made. A hit is found for a request before its first allocation, which
brings it; the ops of a request whose first allocation returned None are skipped. Block hashes are chained
(BlockManager.compute_hash), computed here from the op's token ids.

Clauses of the contract -> the fixed script that holds each (ex139_data.FIXED):
    allocate: ceil(num_tokens / block_size) entries, fresh blocks     worked_example, window_edge_*
        from the front of the queue; the hit starts a new table
    allocate: each hit block gains a reference (touch)               shared_block_leaves_one_window
    allocate: None and no change without room (free hits count)      refused_allocation_changes_nothing,
                                                                     hit_of_free_blocks_needs_room
    skip: frees blocks wholly below num_computed - W + 1, newest      window_edge_token_by_token,
        first, the null block in their place                          window_edge_block_size_1
    skip: one reference per block (a shared block stays)             shared_block_leaves_one_window
    skip: never a block twice, never the null block                  never_twice
    hit: from the right, the last ceil((W - 1) / block_size) blocks   hit_from_the_right,
        cached, null left of them                                     hit_needs_the_window_only
    hit: a run from the first block is a hit however short           short_run_from_the_first_block
    hit: at most max_length tokens (the full-attention group's)      hit_at_most_max_length
    cache: a reused block no longer holds its old hash               stale_hash_after_reuse
    cache: a duplicate is registered too; a hit takes the first      duplicate_serves_after_the_first_goes
        registered, the duplicate once the first is reused
    cache: null entries are never registered                         null_block_never_registered
    hit: changes no reference count and no free queue                every script with a hit of real blocks
    free: last block first, never the null block                     worked_example
"""
from __future__ import annotations

import random

from pagedkv_lib.core.block_manager import BlockManager
from pagedkv_lib.core.block_pool import BlockPool
from pagedkv_lib.judge.cases.compare import show
from pagedkv_lib.judge.outcome import Outcome

from . import Case
from .ex139_data import FIXED, fuzz
from .script import compare_steps, run_script

MAY_RAISE = {"skip": ValueError, "free": ValueError}   # the pool's double free (class taken at import)
KEYS = ("raised", "ret", "tables", "free", "refs")
MISSING = {"__opaque__": "missing attribute"}
SKIPPED = "skipped: its first allocation was refused"


def build(seed: int, device: str = "cpu") -> list[Case]:
    rng = random.Random(f"139/{seed}")
    scripts = [(f"fixed/{name}", ops) for name, ops in FIXED]
    scripts += [(f"random/{i}", fuzz(rng, 40)) for i in range(6)]
    return [Case(name, {"ops": ops}, [f"block_size {ops[0][2]}, sliding_window {ops[0][3]}, "
                                      f"BlockPool({ops[0][1]}), null block 0"]) for name, ops in scripts]


def chained_hashes(token_ids: list[int], block_size: int) -> list[int]:
    hashes, h = [], -1
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        h = BlockManager.compute_hash(token_ids[start:start + block_size], h)
        hashes.append(h)
    return hashes


def run(ns, case: Case) -> dict:
    def apply(state, op):
        kind = op[0]
        if kind == "manager":
            state["pool"], state["S"], state["hits"], state["out"] = BlockPool(op[1]), op[2], {}, set()
            (null,) = state["pool"].allocate(1)
            state["m"] = ns["SlidingWindowManager"](state["pool"], op[2], op[3], null)
            return None
        m, rid = state["m"], op[1]
        if rid in state["out"]:
            return SKIPPED
        if kind == "hit":
            hit = m.find_longest_cache_hit(chained_hashes(op[2], state["S"]), op[3])
            state["hits"][rid] = list(hit) if isinstance(hit, list) else hit
            return hit
        if kind == "allocate":
            new = rid not in state.setdefault("admitted", set())
            fresh = m.allocate_slots(rid, op[2], state["hits"].pop(rid, []) if new else [])
            if new and fresh is None:
                state["out"].add(rid)
            elif new:
                state["admitted"].add(rid)
            return fresh
        if kind == "cache":
            return m.cache_blocks(rid, chained_hashes(op[2], state["S"]), op[3])
        if kind == "skip":
            return m.remove_skipped_blocks(rid, op[2])
        return m.free(rid)

    def snapshot(state, op):
        pool, tables = state["pool"], getattr(state["m"], "block_tables", None)
        shown = {k: list(v) for k, v in tables.items()} if isinstance(tables, dict) else MISSING
        return {"tables": shown, "free": list(pool.free_block_ids), "refs": list(pool.ref_counts)}

    return run_script(case.args["ops"], apply, snapshot, may_raise=MAY_RAISE)


def render(op, step) -> str:
    kind = op[0]
    line = {"manager": lambda: f"pool = BlockPool({op[1]}); null = pool.allocate(1)[0]; "
                               f"m = SlidingWindowManager(pool, {op[2]}, {op[3]}, null)",
            "hit": lambda: f"hit[{op[1]!r}] = m.find_longest_cache_hit(hashes of {show(op[2])}, {op[3]})",
            "allocate": lambda: f"m.allocate_slots({op[1]!r}, {op[2]}, hit[{op[1]!r}] if new)",
            "cache": lambda: f"m.cache_blocks({op[1]!r}, hashes of {len(op[2])} tokens, {op[3]})",
            "skip": lambda: f"m.remove_skipped_blocks({op[1]!r}, {op[2]})",
            "free": lambda: f"m.free({op[1]!r})"}[kind]()
    if step is not None:
        if "raised" in step:
            line += f"  -> raises {step['raised']}"
        elif kind in ("hit", "allocate", "skip"):
            line += f"  -> {show(step['ret'])}"
    return line


def check(case: Case, expected: dict, got: dict) -> Outcome:
    ops = case.args["ops"]
    return compare_steps(ops, expected, got, KEYS, render, _hints(case.name, ops)) or Outcome()


EDGE = ("the next query, at position num_computed_tokens, reads positions num_computed_tokens - "
        "sliding_window + 1 onward: free the blocks wholly below that, no more and no fewer")
SHARED = ("remove_skipped_blocks and free drop only this request's reference (pool.free, once per block): a "
          "block another request shares stays allocated")
TOUCH = ("a hit's blocks are shared: pool.touch each one that is not the null block (one more reference, "
         "out of the free queue if it was free)")
ORDER = ("free the blocks that left the window newest first: walk from the window's edge back toward the "
         "first block, so that the oldest block reaches the free queue last and stays cached longest")
REFUSED = ("a refused allocate_slots returns None and changes nothing: decide first whether the pool has "
           "room (the fresh blocks plus the hit's free blocks), then touch the hit and take the fresh blocks")
LOOK = ("find_longest_cache_hit only looks: it changes no reference count and no free queue (allocate_slots "
        "touches the hit's blocks when the request is admitted)")
NULL = ("the null block holds no tokens: cache_blocks skips null entries, so no hash ever names it and a hit "
        "never counts it as a cached block")
DUPLICATE = ("register every full block, a duplicate too (a second block with the same tokens under the same "
             "hash): when the first is taken from the pool for other tokens, the one registered after it "
             "still serves hits")
WHICH = ("the hit took another block for the same hash. Two causes look alike here: a hit takes the block "
         "registered FIRST among those the hash still names (not the latest duplicate), and a block taken "
         "from the pool for other tokens is no longer named by its old hash")
WINDOW = ("a hit of L tokens needs only the blocks of its window: the query at position L reads tokens "
          "L - sliding_window + 1 .. L - 1, so ceil((sliding_window - 1) / block_size) cached blocks in a "
          "row before L, no more")


def _hints(case_name: str, ops):
    def hint(i: int, key: str, e: dict, g: dict) -> str:
        kind = ops[i][0]
        if g.get("tables") == MISSING:
            return "keep the attribute the judge reads: block_tables, request id -> list of block ids"
        if kind == "hit" and key != "ret":
            return LOOK
        if kind == "hit":
            return _hit_hint(case_name, ops[i], ops[0], e.get("ret"), g.get("ret"))
        if kind == "skip" and key == "raised":
            return ("never free a block twice: the null block takes a freed block's place in the table, and "
                    "the walk stops at the first null entry")
        if kind == "skip":
            return _skip_hint(e, g)
        if kind == "allocate":
            if key == "ret" and (e.get("ret") is None) != (g.get("ret") is None):
                return ("allocate_slots returns None, changing nothing, when the pool has fewer free blocks "
                        "than the fresh blocks plus the hit's free blocks")
            if e.get("ret") is None:
                return REFUSED
            if key in ("refs", "free") and e.get("tables") == g.get("tables"):
                return TOUCH
            return ("extend the table to ceil(num_tokens / block_size) entries with fresh blocks from "
                    "pool.allocate; a new request's table starts with its hit")
        if kind == "free":
            if key == "refs":
                return SHARED
            return "free drops the table's blocks last block first, never the null block"
        return "cache_blocks registers full blocks only and changes no table"

    return hint


def _skip_hint(e: dict, g: dict) -> str:
    """remove_skipped_blocks differs: which blocks (the window's edge), their order, or the references."""
    e_ret, g_ret = e.get("ret"), g.get("ret")
    same_blocks = (isinstance(g_ret, list) and len(g_ret) == len(e_ret)
                   and all(g_ret.count(b) == e_ret.count(b) for b in e_ret))
    if e.get("tables") != g.get("tables") or not same_blocks:
        return EDGE
    if e_ret != g_ret or e.get("refs") == g.get("refs"):
        return ORDER                   # the same blocks, returned or given to pool.free in another order
    return SHARED


def _hit_hint(case_name: str, op, manager_op, e, g) -> str:
    block_size, sliding_window = manager_op[2], manager_op[3]
    null = 0                                     # the harness takes block 0 as the null block
    if not isinstance(g, list) or not isinstance(e, list):
        return "find_longest_cache_hit returns a list of block ids (the hit's table)"
    if "stale" in case_name and len(g) > len(e):
        return ("a block taken from the pool for other tokens no longer holds its hash: forget the hash when "
                "allocate_slots takes the block")
    if len(g) * block_size > op[3]:
        return ("a hit is at most max_length tokens (the full-attention group's hit, or num_tokens - 1): "
                f"here max_length is {op[3]}")
    num_window_blocks = -(-(sliding_window - 1) // block_size)
    if len(g) > len(e) and num_window_blocks and null in g[-num_window_blocks:]:
        return NULL                              # the run the hit ends with counted the null block as cached
    if len(g) > len(e):
        return WINDOW
    if "duplicate" in case_name and len(g) < len(e):
        return DUPLICATE
    if len(g) == len(e) and any(x != y and null not in (x, y) for x, y in zip(e, g)):
        return WHICH
    if null in e and null not in g:
        return ("search from the right: a sliding-window hit needs only the blocks of its window, the "
                "last ceil((sliding_window - 1) / block_size) before its end, cached; the null block stands "
                "in for the blocks before them")
    if len(g) < len(e):
        return WINDOW
    return "the hit holds the cached blocks of its window and the null block left of them"
