"""Cases of exercise 136, the radix cache: scripts checked step by step (cases/script.py).

After every op the harness records the return value, the lists it passed to match_prefix or insert as
they are after the call (arguments are read-only), and a snapshot: the tree read from root_node (depth,
key, value, lock_ref of every node, depth first, children in the order of their keys), the root's lock_ref,
the pool's free queue and reference counts, and (evictable_size(), protected_size()). A failure shows the
script so far as lines of Python that replay it, to paste below the learner's RadixCache. An insert's
blocks come from the pool, and the harness frees those the tree did not take, as a request does.

Clauses of the contract -> the fixed script that holds each (ex136_data.FIXED):
    match: blocks along the path, the node where it ends; root if none    insert_then_match
    match: a match ending inside a node splits it, keeping the tail       match_splits_a_node
    match and split whole blocks; key cut to a multiple of block_size     whole_blocks_at_block_size_4
    insert: returns the tokens already cached; a leaf adopts the rest     insert_then_match,
                                                                          insert_splits_a_node
    insert: ValueError on a wrong number of blocks, nothing changed       whole_blocks_at_block_size_4 (its
        (checked before the walk: the last insert_bad would split a node)  last op)
    insert and match stamp their path: LRU by access, not creation        lru_insert_refreshes,
                                                                          lru_match_refreshes
    evict: least recently used unlocked leaves, whole nodes, pool.free    lru_insert_refreshes,
        in key order; stops once num_blocks are freed; evict(0) frees     evict_leaves_then_their_parent
        nothing
    evict: a parent left without children joins in the same call         evict_leaves_then_their_parent
    evict: never a locked node                                            locked_path_survives
    locks: inc / dec_lock_ref from the node up to the root                lock_walks_to_the_root
    the root's lock_ref stays 1                                           lock_walks_to_the_root
    a split hands the child's lock_ref to the new upper node              split_of_a_locked_node
    dec_lock_ref: ValueError and no change when a node holds no lock      unlock_without_lock_raises,
        (a 0 below a locked node, or above one)                           unlock_finds_a_zero_partway
    match stamps every node of its path, not only the last                match_stamps_its_whole_path
    a split stamps its upper half (matched), the lower keeps its time     split_stamps_its_upper_half
    arguments are read-only: token_ids and blocks as they were given      inputs_are_read_only
    evictable_size / protected_size: blocks in unlocked / locked nodes    whole_blocks_at_block_size_4
"""
from __future__ import annotations

import random

from pagedkv_lib.core.block_pool import BlockPool
from pagedkv_lib.judge.outcome import Outcome

from . import Case
from .script import compare_steps, run_script, wrong_class_hint

MAY_RAISE = {"unlock": ValueError, "insert_bad": ValueError}   # taken before any submission loads
KEYS = ("raised", "ret", "inputs", "tree", "root_lock_ref", "free", "refs", "sizes")
MISSING = {"__opaque__": "missing attribute"}


def build(seed: int, device: str = "cpu") -> list[Case]:
    from .ex136_data import FIXED, fuzz  # simulated on the library: in the judge only

    rng = random.Random(f"136/{seed}")
    scripts = [(f"fixed/{name}", ops) for name, ops in FIXED]
    scripts += [(f"random/{i}", fuzz(rng, 30)) for i in range(5)]
    return [Case(name, {"ops": ops}, [f"block_size {ops[0][2]}, BlockPool({ops[0][1]})"])
            for name, ops in scripts]


def _tree(cache) -> list:
    """[{"depth", "key", "value", "lock_ref"}, ...] depth first, children in the order of their keys (the
    root not listed: its lock_ref is the snapshot's "root_lock_ref")."""
    root = getattr(cache, "root_node", None)
    if root is None:
        return MISSING
    out, stack = [], [(0, c) for c in _children(root)[::-1]]
    while stack:
        if len(out) > 10_000:
            return {"__opaque__": "a tree of more than 10,000 nodes (a cycle?)"}
        depth, node = stack.pop()
        key, value = getattr(node, "key", MISSING), getattr(node, "value", MISSING)
        out.append({"depth": depth, "key": list(key) if isinstance(key, list) else key,
                    "value": list(value) if isinstance(value, list) else value,
                    "lock_ref": getattr(node, "lock_ref", MISSING)})
        stack.extend((depth + 1, c) for c in _children(node)[::-1])
    return out


def _children(node) -> list:
    children = getattr(node, "children", None)
    values = list(children.values()) if isinstance(children, dict) else []
    return sorted(values, key=lambda c: tuple(getattr(c, "key", ())) if isinstance(getattr(c, "key", None),
                                                                                     list) else ())


def run(ns, case: Case) -> dict:
    def apply(state, op):
        kind = op[0]
        if kind == "cache":
            state["pool"] = BlockPool(op[1])
            state["cache"], state["S"], state["nodes"] = ns["RadixCache"](state["pool"], op[2]), op[2], {}
            return None
        cache, pool, S = state["cache"], state["pool"], state["S"]
        if kind == "insert":
            blocks = pool.allocate(len(op[1]) // S)
            state["inputs"] = [list(op[1]), list(blocks)]
            cached = cache.insert(*state["inputs"])
            if type(cached) is int and 0 <= cached <= len(op[1]) and cached % S == 0:
                pool.free(blocks[: cached // S])              # the caller's duplicates
            return cached
        if kind == "insert_bad":
            return cache.insert(list(op[1]), [0] * op[2])
        if kind == "match":
            state["inputs"] = [list(op[1])]
            blocks, node = cache.match_prefix(*state["inputs"])
            state["nodes"][op[2]] = node
            key = getattr(node, "key", MISSING)
            return [list(blocks), list(key) if isinstance(key, list) else key]
        if kind == "lock":
            return cache.inc_lock_ref(state["nodes"][op[1]])
        if kind == "unlock":
            return cache.dec_lock_ref(state["nodes"][op[1]])
        return cache.evict(op[1])

    def snapshot(state, op):
        cache, pool = state["cache"], state["pool"]
        sizes = [cache.evictable_size(), cache.protected_size()]
        root = getattr(cache, "root_node", None)
        inputs = {"inputs": [list(a) for a in state.pop("inputs")]} if "inputs" in state else {}
        return {**inputs, "tree": _tree(cache), "root_lock_ref": getattr(root, "lock_ref", MISSING),
                "free": list(pool.free_block_ids), "refs": list(pool.ref_counts), "sizes": sizes}

    return run_script(case.args["ops"], apply, snapshot, may_raise=MAY_RAISE)


def render(op, step) -> str:
    """One op as a line of Python that replays it (what the harness does), then what the library returned,
    as a comment: the lines of a failing script paste and run as they are (see `_script`)."""
    kind, raised = op[0], step is not None and "raised" in step
    line = {"cache": lambda: f"S = {op[2]}; pool = BlockPool({op[1]}); cache = RadixCache(pool, "
                             "block_size=S)",
            "insert": lambda: f"blocks = pool.allocate({len(op[1])} // S); cached = cache.insert("
                              f"{list(op[1])}, blocks); pool.free(blocks[: cached // S])",
            "insert_bad": lambda: f"cache.insert({list(op[1])}, [0] * {op[2]})",
            "match": lambda: f"matched, {op[2]} = cache.match_prefix({list(op[1])})",
            "lock": lambda: f"cache.inc_lock_ref({op[1]})",
            "unlock": lambda: f"cache.dec_lock_ref({op[1]})",
            "evict": lambda: f"cache.evict({op[1]})"}[kind]()
    if raised:
        line = f"with contextlib.suppress({step['raised']}): {line}  # raises {step['raised']}"
    elif step is not None and kind in ("insert", "evict"):
        line += f"  # -> {step['ret']}"
    elif step is not None and kind == "match":
        line += f"  # -> matched {step['ret'][0]}, {op[2]}.key {step['ret'][1]}"
    return line


def _script(ops, steps, upto: int) -> list:
    """The ops up to step `upto` as a script to paste below your RadixCache, with what the library returned
    as comments (every op from the start: a radix tree is the sum of its history)."""
    lines = ["# the script so far; paste it below your RadixCache (a notebook cell, or python -i your file):",
             "import contextlib", "from pagedkv_lib.core.block_pool import BlockPool"]
    return lines + [render(ops[j], steps[j] if j < upto else None) for j in range(upto + 1)]


def check(case: Case, expected: dict, got: dict) -> Outcome:
    ops = case.args["ops"]
    return compare_steps(ops, expected, got, KEYS, render, _hints(case.name, ops), _script) or Outcome()


def _blocks_held(tree) -> int:
    return sum(len(r["value"]) for r in tree if isinstance(r["value"], list)) if isinstance(tree, list) else 0


def _rows(tree, *fields) -> list:
    """The tree's rows cut to `fields` (to compare two trees on some of them)."""
    return [[r[f] for f in fields] for r in tree] if isinstance(tree, list) else []


def _hints(case_name: str, ops):
    num_blocks = ops[0][1]

    def hint(i: int, key: str, e: dict, g: dict) -> str:
        kind = ops[i][0]
        rows = g.get("tree") if isinstance(g.get("tree"), list) else []
        if MISSING in (g.get("tree"), g.get("ret"), g.get("root_lock_ref")) or \
                any(MISSING in row.values() for row in rows):
            return ("keep the attributes the judge reads: root_node, and each node's key, value, children, "
                    "lock_ref")
        if key == "raised" and wrong_class_hint(g.get("raised")):
            return wrong_class_hint(g.get("raised"))
        if key == "raised" and kind == "unlock":
            return ("dec_lock_ref raises ValueError when a node on the path (the node up to the root) holds "
                    "no lock, and then changes nothing")
        if key == "inputs":
            return ("arguments are read-only: match_prefix and insert leave the lists they are given as they "
                    "were (cut or slice a copy: the caller's list is still the request's prompt)")
        if kind == "unlock" and "raised" in e:
            return ("dec_lock_ref checks every node of the path BEFORE it changes any: a 0 below a locked "
                    "node, or above one, refuses the whole call and leaves every lock_ref as it was")
        if key == "raised" and kind == "insert_bad":
            return ("insert raises ValueError when len(token_ids) != len(blocks) * block_size, changing "
                    "nothing")
        if kind == "insert_bad":
            return ("insert raised, but the tree had changed first: check len(token_ids) == len(blocks) * "
                    "block_size BEFORE the walk (which splits nodes), so that the ValueError leaves "
                    "everything as it was")
        if key == "root_lock_ref":
            return ("the root's lock_ref is 1 from the start and never changes: inc_lock_ref and "
                    "dec_lock_ref stop below the root (node is not root_node)")
        leaked = isinstance(g.get("free"), list) and isinstance(g.get("tree"), list) and \
            len(g["free"]) + _blocks_held(g["tree"]) < num_blocks
        if kind == "evict":
            return _evict_hint(case_name, key, e, g, leaked)
        if kind in ("lock", "unlock"):
            return ("inc_lock_ref and dec_lock_ref change every node from `node` up to (not including) the "
                    "root")
        if key == "sizes":
            return ("evictable_size and protected_size count BLOCKS (not tokens) in unlocked / locked nodes, "
                    "kept up to date by insert, evict and the locks")
        if kind == "match":
            return _match_hint(case_name, key, e, g, leaked)
        if kind == "insert" and key == "ret":
            return "insert returns the number of tokens that were already cached, before it adds the rest"
        if kind == "insert" and leaked:
            return _TAIL
        if kind == "insert" and isinstance(g.get("tree"), list) and \
                _rows(e["tree"], "depth", "key") == _rows(g["tree"], "depth", "key"):
            return ("the new leaf holds only blocks[cached // block_size:]: the tree adopts the blocks of "
                    "the tokens it did not hold, the caller keeps the others")
        return ("insert walks like match_prefix, splits a node where the cached part ends inside it, and "
                "adds one leaf for the tokens left")

    return hint


_TAIL = ("a split keeps the tail: the cut node, with the rest of its key and blocks, hangs below the new "
         "upper node (else its tokens and blocks are lost)")


def _match_hint(case_name: str, key: str, e: dict, g: dict, leaked: bool) -> str:
    if "whole_blocks" in case_name:
        return ("match whole blocks only: cut token_ids to a multiple of block_size and compare block_size "
                "tokens at a time (a split falls on a block boundary)")
    if key == "ret":
        return ("a match that ends inside a node splits it there: return the blocks up to that point and "
                "the new upper node, not the whole node")
    if leaked:
        return _TAIL
    if key == "tree" and isinstance(g.get("tree"), list) and \
            _rows(e["tree"], "depth", "key", "value") == _rows(g["tree"], "depth", "key", "value"):
        return ("the upper node of a split inherits the child's lock_ref (every lock on the child passes "
                "through it)")
    return "split at the block where the match ends: the new node takes key[:n] and value[:n // block_size]"


def _evict_hint(case_name: str, key: str, e: dict, g: dict, leaked: bool) -> str:
    if leaked:
        return ("evict only leaves (nodes without children): freeing an inner node orphans its subtree and "
                "loses its blocks")
    e_locked = {tuple(r["key"]) for r in e["tree"] if r["lock_ref"] > 0}
    g_tree = g["tree"] if isinstance(g.get("tree"), list) else []
    g_keys = {tuple(r["key"]) for r in g_tree if isinstance(r["key"], list)}
    if e_locked - g_keys:
        return "never evict a locked node (lock_ref > 0): a request is reading its blocks"
    if key == "ret" and isinstance(g.get("ret"), int) and g["ret"] > e["ret"] == 0:
        return ("nothing to free was asked (or nothing was evictable): evict frees while fewer than "
                "num_blocks are freed, so evict(0) frees nothing")
    if key == "ret" and isinstance(g.get("ret"), int) and g["ret"] > e["ret"]:
        return "stop as soon as at least num_blocks blocks are freed (whole nodes: it may be a few more)"
    if key == "ret" and isinstance(g.get("ret"), int) and g["ret"] < e["ret"]:
        return ("a parent left without children (and unlocked) becomes a leaf: it can be evicted in the same "
                "call")
    if key == "free" and isinstance(g.get("tree"), list) and e["tree"] == g["tree"]:
        return "give a node's blocks back with pool.free(node.value), in key order"
    if key == "sizes":
        return ("evictable_size and protected_size count BLOCKS (not tokens) in unlocked / locked nodes, "
                "kept up to date by insert, evict and the locks")
    if case_name == "fixed/lru_insert_refreshes":
        return ("evict by last ACCESS, not by creation: an insert of cached tokens stamps every node on its "
                "path (a logical clock, one tick per call)")
    if case_name == "fixed/match_stamps_its_whole_path":
        return ("match_prefix stamps every node on its path, not only the node where it ends: the inner "
                "nodes it passed through were read too")
    if case_name == "fixed/split_stamps_its_upper_half":
        return ("the upper half of a split was matched: the call stamps it with the clock; only the lower "
                "half keeps the old last_access_time")
    if case_name == "fixed/lru_match_refreshes":
        return ("match_prefix stamps last_access_time on every node it matches, so a prefix just matched is "
                "evicted last")
    return "evict the least recently used unlocked leaf first (smallest last_access_time)"
