"""Cases of exercise 127, block pool, fork and copy-on-write: scripts of operations checked step by step.

After every op the harness records the return value, num_free(), ref_count(b) of every block, every live
table, and (after append_slot) the whole kv_cache; after a successful append_slot it writes a marker into
the returned slot (K and V, every layer) as the model would, so later copies carry visible data.

Clauses of the contract -> the fixed script that holds each (ex127_data.FIXED):
    all free, 0 references, queue 0..N-1             course_worked_example
    allocate: FRONT of the queue, in order, 1 ref    course_worked_example
    allocate: None and nothing changed if too few    failed_allocate_changes_nothing (n = 0, exact fit too)
    free: one reference per id, repeats count        repeated_ids_drop_one_reference_each
    free: to the END at 0, in the order of blocks    freed_blocks_join_the_end_in_order
    free: ValueError on a double free, no change     double_free_raises_and_changes_nothing
    free: its argument read-only                     course_worked_example
    fork: a NEW list, one more reference each        repeated_ids_drop_one_reference_each, fork_shares_...
    append_slot: a new block at num_tokens % S == 0  new_block_when_the_position_starts_one, empty_table_...
    append_slot: copy-on-write of a shared last      copy_on_write_two_layers, three_way_fork_copies_twice
        block: K and V, every layer, old ref -1      block_size_16_three_layers
    append_slot: else nothing changes                copy_on_write_two_layers (steps 3, 7)
    append_slot: None and no change without a block  failed_append_changes_nothing
    the slot block_table[-1] * S + num_tokens % S    copy_on_write_two_layers, block_size_1
"""
from __future__ import annotations

import random
import re

import torch

from pagedkv_lib.judge.outcome import Outcome

from . import Case
from .script import compare_steps, run_script, wrong_class_hint

MAY_RAISE = {"free": ValueError, "free_ids": ValueError}    # the classes, taken before any submission loads
KEYS = ("raised", "ret", "same_object", "arg", "tables", "refs", "num_free", "kv")


def build(seed: int, device: str = "cpu") -> list[Case]:
    from .ex127_data import FIXED, fuzz  # simulated on the library: in the judge only

    rng = random.Random(f"127/{seed}")
    scripts = [(f"fixed/{name}", kv, ops) for name, kv, ops in FIXED]
    scripts += [(f"random/{i}", *fuzz(rng, 36)) for i in range(6)]
    cases = []
    for i, (name, (L, N, S), ops) in enumerate(scripts):
        g = torch.Generator().manual_seed(i if name.startswith("fixed/") else 1000 * seed + i)
        kv_cache = torch.randn(2, L, N, S, 2, 2, generator=g)             # [2, L, N, S, H_kv, D]
        show_lines = [f"kv_cache [2, L={L}, N={N}, S={S}, H_kv=2, D=2] float32 (random); block_size {S}"]
        cases.append(Case(name, {"ops": ops, "kv_cache": kv_cache}, show_lines))
    return cases


def run(ns, case: Case) -> dict:
    kv_cache = case.args["kv_cache"].clone()

    def apply(state, op):
        kind, tables = op[0], state.setdefault("tables", {})
        if kind == "pool":
            state["pool"], state["N"] = ns["BlockPool"](op[1]), op[1]
            return None
        pool = state["pool"]
        if kind == "allocate":
            ret = pool.allocate(op[1])
            if isinstance(ret, list):
                tables[op[2]] = ret
            return ret
        if kind in ("free", "free_ids"):
            arg = tables.pop(op[1]) if kind == "free" else list(op[1])
            state["arg"] = arg
            return pool.free(arg)
        if kind == "fork":
            ret = pool.fork(tables[op[1]])
            state["same_object"] = ret is tables[op[1]]
            tables[op[2]] = ret
            return ret
        name, num_tokens, block_size = op[1:]
        slot = ns["append_slot"](pool, kv_cache, tables[name], num_tokens, block_size)
        if type(slot) is int and 0 <= slot < kv_cache.shape[2] * block_size:
            marker = 1000.0 + len(state.setdefault("marks", [])) + torch.arange(kv_cache.shape[1]) / 10  # [L]
            kv_cache[0, :, slot // block_size, slot % block_size] = marker[:, None, None]
            kv_cache[1, :, slot // block_size, slot % block_size] = -marker[:, None, None]
            state["marks"].append(slot)
        return slot

    def snapshot(state, op):
        pool, snap = state["pool"], {}
        snap["num_free"] = pool.num_free()
        snap["refs"] = [pool.ref_count(b) for b in range(state["N"])]
        snap["tables"] = {k: list(v) if isinstance(v, list) else v for k, v in state["tables"].items()}
        if op[0] in ("free", "free_ids"):
            snap["arg"] = list(state.pop("arg"))
        if op[0] == "fork":
            snap["same_object"] = state.pop("same_object")
        if op[0] == "append":
            snap["kv"] = kv_cache.clone()
        return snap

    return run_script(case.args["ops"], apply, snapshot, may_raise=MAY_RAISE)


def render(op, step) -> str:
    kind = op[0]
    text = {"pool": lambda: f"pool = BlockPool({op[1]})",
            "allocate": lambda: f"{op[2]} = pool.allocate({op[1]})",
            "free": lambda: f"pool.free({op[1]})",
            "free_ids": lambda: f"pool.free({op[1]})",
            "fork": lambda: f"{op[2]} = pool.fork({op[1]})",
            "append": lambda: f"append_slot(pool, kv_cache, {op[1]}, num_tokens={op[2]}, block_size={op[3]})"}
    line = text[kind]()
    if step is not None:
        line += f"  -> raises {step['raised']}" if "raised" in step else \
            (f"  -> {step['ret']}" if step.get("ret") is not None or kind in ("allocate", "append") else "")
        if kind in ("allocate", "fork", "append"):
            line += f"   (num_free {step['num_free']})"
    return line


def check(case: Case, expected: dict, got: dict) -> Outcome:
    ops = case.args["ops"]
    outcome = compare_steps(ops, expected, got, KEYS, render, _hints(ops, expected["steps"])) or Outcome()
    outcome.message = re.sub(r"kv\[(\d+), (\d+), (\d+), (\d+), (\d+), (\d+)\]", _kv_where, outcome.message)
    return outcome


def _kv_where(m) -> str:
    kv, layer, block, offset, head, dim = m.groups()
    return f"kv_cache[{'KV'[int(kv)]}, layer {layer}, block {block}, offset {offset}, head {head}, dim {dim}]"


def _hints(ops, steps):
    def hint(i: int, key: str, e: dict, g: dict) -> str:
        kind, before = ops[i][0], steps[i - 1] if i else {}
        if key == "raised":
            if wrong_class_hint(g.get("raised")):
                return wrong_class_hint(g.get("raised"))
            if e.get("raised") and not g.get("raised"):
                return "a double free (a block with no reference left) must raise ValueError"
            return "raise ValueError, and only for a double free" if e.get("raised") else \
                "this free is valid: every block still has a reference to drop"
        if key == "same_object":
            return "fork must return a NEW list (list(block_table)): the child's table must not alias it"
        if key == "arg":
            return "free must not modify the list it is given"
        if kind == "allocate":
            return _allocate_hint(key, e, g)
        if kind in ("free", "free_ids"):
            if "raised" in e:
                return "a failed free changes nothing: check every block before dropping any reference"
            if key == "refs":
                return "free drops exactly one reference per block (a repeated id drops one per repeat)"
            return "a block joins the END of the free queue when its count reaches 0, not before"
        if kind == "fork":
            return "fork adds one reference to every block of the table and changes nothing else"
        if kind == "append":
            return _append_hint(key, ops[i], e, g, before)
        return "the pool starts with every block free, 0 references each"

    return hint


def _allocate_hint(key: str, e: dict, g: dict) -> str:
    ev, gv = e.get("ret"), g.get("ret")
    if key == "ret" and ev is None:
        return "allocate(n) returns None when fewer than n blocks are free"
    if key == "ret" and isinstance(gv, list) and sorted(gv) == sorted(ev):
        return "blocks leave from the FRONT of the free queue, in queue order"
    if key == "ret":
        return "blocks leave from the FRONT of the free queue; freed blocks joined at its END"
    if ev is None:
        return "a failed allocate changes nothing at all (no partial allocation)"
    return "each allocated block leaves the free queue with exactly 1 reference"


def _append_hint(key: str, op, e: dict, g: dict, before: dict) -> str:
    _, name, num_tokens, S = op
    ev, gv = e.get("ret"), g.get("ret")
    if ev is None:
        return "no free block: append_slot returns None and changes nothing (table, pool, kv_cache)"
    if key == "ret" and type(gv) is int and gv == ev + 1:
        return "off by one: the slot is block_table[-1] * block_size + num_tokens % block_size"
    new_block = num_tokens % S == 0
    old = before.get("tables", {}).get(name, [None])[-1] if before.get("tables", {}).get(name) else None
    shared = old is not None and before["refs"][old] > 1
    if new_block:
        return (f"position {num_tokens} starts a new block ({num_tokens} % {S} == 0): allocate one and "
                "append it; the shared blocks before it stay shared")
    if shared and key == "kv":
        return "copy-on-write copies K AND V of EVERY layer: kv_cache[:, :, new] = kv_cache[:, :, old]"
    if shared and key == "refs":
        return "after copying, drop one reference to the old block (pool.free([old]))"
    if shared:
        return (f"the last block {old} is shared (ref {before['refs'][old]}): copy-on-write into a new block "
                "and put it in the table's last place, in place")
    return (f"position {num_tokens} falls inside the last block ({num_tokens} % {S} = {num_tokens % S}) "
            "and that block is not shared: write there, allocate and copy nothing")
