"""Cases of exercise 122, slot mapping one token at a time: the slots as a list of ints.

Clauses of the contract -> the fixed case that holds each:
    slot = block_table[p // S] * S + p % S           course_worked_example
    positions in any order, repeats allowed          unordered_with_repeats
    the table may end with -1 padding                padded_table
    block_size any int >= 1 (1, not a power of 2)     block_size_1, block_size_6_not_a_power_of_2
    no positions: []                                 no_positions
    a new plain list of ints, one per position       course_worked_example, unordered_with_repeats
    block_table and positions read-only              unordered_with_repeats, padded_table
"""
from __future__ import annotations

import random

from pagedkv_lib.judge.cases.compare import diff, int_list, show
from pagedkv_lib.judge.outcome import Outcome, wrong

from . import Case, call_text, fresh, observe

FIXED = [  # name, block_table, positions, block_size
    ("course_worked_example", [5, 6, 7, 0], list(range(14)), 4),
    ("notebook_sequence_a", [7, 2], list(range(6)), 4),
    ("block_size_1", [3, 1, 4, 0], [0, 1, 2, 3], 1),
    ("unordered_with_repeats", [2, 9], [5, 0, 5, 3, 7, 4], 4),
    ("block_boundaries", [4, 0, 7], [15, 16, 17, 31, 32, 47, 0], 16),
    ("block_size_256_big_ids", [1000, 3], [0, 255, 256, 511], 256),
    ("padded_table", [6, 2, -1, -1], list(range(8)), 4),
    ("block_size_6_not_a_power_of_2", [4, 1, 3, 7, 9, 2], [0, 5, 6, 11, 12, 17], 6),
    ("no_positions", [1, 2], [], 4),
    ("one_decode_position", [3, 8, 5], [9], 4),
    ("lengths_127_128_129", list(range(20, 29)) + [0], [126, 127, 128], 16),
]


def build(seed: int, device: str = "cpu") -> list[Case]:
    rng = random.Random(f"122/{seed}")
    cases = [_case(f"fixed/{n}", t, p, bs) for n, t, p, bs in FIXED]
    for i in range(10):
        bs = rng.choice([1, 2, 4, 16, 256])
        num = rng.randint(1, 12)
        table = rng.sample(range(2 * num + 40), num) + [-1] * rng.randint(0, 2)
        positions = [rng.randrange(num * bs) for _ in range(rng.randint(1, 40))]
        positions.append(num * bs - 1)                        # the very last slot of the table
        cases.append(_case(f"random/{i}", table, positions, bs))
    return cases


def _case(name, block_table, positions, block_size) -> Case:
    args = {"block_table": block_table, "positions": positions, "block_size": block_size}
    return Case(name, args, [call_text("slot_mapping_for", **args)])


def run(ns, case: Case) -> dict:
    a = fresh(case.args)
    ret = ns["slot_mapping_for"](a["block_table"], a["positions"], a["block_size"])
    return {"ret": observe(ret), "inputs": observe([a["block_table"], a["positions"]])}


def check(case: Case, expected: dict, got: dict) -> Outcome:
    a = case.args
    positions = a["positions"]

    def hint(i, e, g):
        if i is None:
            return "one slot per position, in the order of `positions` (repeats included)"
        if _permuted(expected["ret"], got["ret"]):
            return "positions come in any order: slots[i] belongs to positions[i], so keep their order"
        return slot_hint(a["block_table"], positions[i], a["block_size"], g)

    return (read_only(expected, got, ("block_table", "positions"))
            or int_list("slots", expected["ret"], got["ret"], hint) or Outcome())


def _permuted(expected: list, got) -> bool:
    return isinstance(got, list) and got != expected and sorted(got, key=str) == sorted(expected, key=str)


def slot_hint(table: list, p: int, bs: int, got: int) -> str:
    """The usual mistake that turns position p's slot into `got`."""
    block = table[p // bs]
    shift = bs.bit_length() - 1
    guesses = {
        f"off by one at position {p}: the offset is p % block_size (did you add 1?)": block * bs + p % bs + 1,
        "look the physical block up in block_table; position p is not slot p": p,
        "the logical block is p // block_size, the offset p % block_size (swapped?)":
            table[p % bs] * bs + p // bs if p % bs < len(table) else None,
        "the logical block is p // block_size, not p % block_size":
            table[p % bs] * bs + p % bs if p % bs < len(table) else None,
        "multiply the physical block id by block_size": block + p % bs,
        "block_table may end with -1 padding: its last entry is not the last block of the sequence":
            table[-1] * bs + p % bs if table[-1] == -1 else None,
        f"block_size {bs} is not a power of two: use // and %, not shifts and masks":
            table[p >> shift] * bs + (p & (bs - 1)) if bs & (bs - 1) and p >> shift < len(table) else None,
    }
    for text, value in guesses.items():
        if got == value:
            return text
    return f"position {p}: slot = block_table[{p} // {bs}] * {bs} + {p} % {bs} = {block * bs + p % bs}"


def read_only(expected: dict, got: dict, names) -> Outcome | None:
    """The inputs the contract calls read-only must come back unchanged."""
    found = diff(expected["inputs"], got["inputs"])
    if found is None:
        return None
    path, e, g = found
    which = names[int(path[1:].split("]")[0])] if path.startswith("[") else "an input"
    return wrong(f"{which} was modified: expected it unchanged, {show(e)}, got {show(g)}",
                 f"{which} is read-only: work on a copy (sorted() or list(...), not .sort() or .append())")
