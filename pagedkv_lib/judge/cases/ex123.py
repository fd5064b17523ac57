"""Cases of exercise 123, slots of positions start..end-1 computed by block ranges.

Clauses of the contract -> the fixed case that holds each:
    item i is the slot of start + i                  course_worked_example
    the first block may start mid-block              chunked_second_half_mid_block
    the last block may be partial, cut at end        course_worked_example (end exclusive too)
    end on a block boundary: the last block is full  end_on_block_boundary, length_128
    start == end gives []                            empty_range, empty_at_zero
    a table of exactly ceil(end / S) entries         length_128 (no block past the end is read)
    more blocks or -1 padding after them             padded_table_and_spare_blocks
    block_size any int >= 1 (1, not a power of 2)     block_size_1, block_size_6_not_a_power_of_2
    block_table read-only                            course_worked_example
"""
from __future__ import annotations

import random

from pagedkv_lib.judge.cases.compare import int_list
from pagedkv_lib.judge.outcome import Outcome

from . import Case, call_text, fresh, observe
from .ex122 import read_only, slot_hint

FIXED = [  # name, block_table, start, end, block_size
    ("course_worked_example", [5, 6, 7, 0], 0, 14, 4),
    ("prefix_hit_block_aligned", [7, 2, 5], 4, 11, 4),
    ("chunked_second_half_mid_block", [7, 2, 5], 6, 10, 4),
    ("same_block", [3, 9], 5, 7, 4),
    ("empty_range", [3, 9], 5, 5, 4),
    ("empty_at_zero", [3], 0, 0, 4),
    ("end_on_block_boundary", [1, 8, 6], 2, 8, 4),
    ("start_bs_minus_1_end_bs_plus_1", [4, 0, 2], 3, 5, 4),
    ("block_size_1", [9, 3, 7, 1, 0], 1, 5, 1),
    ("block_size_256", [3, 0, 9], 100, 600, 256),
    ("block_size_6_not_a_power_of_2", [4, 1, 3, 7, 9, 2], 5, 17, 6),
    ("length_127", list(range(30, 38)), 0, 127, 16),
    ("length_128", list(range(30, 38)), 0, 128, 16),
    ("length_129", list(range(30, 39)), 0, 129, 16),
    ("last_two_of_129", list(range(30, 39)), 127, 129, 16),
    ("padded_table_and_spare_blocks", [6, 2, 11, 4, -1, -1], 1, 6, 4),
]


def build(seed: int, device: str = "cpu") -> list[Case]:
    rng = random.Random(f"123/{seed}")
    cases = [_case(f"fixed/{n}", *rest) for n, *rest in FIXED]
    for i in range(10):
        bs = rng.choice([1, 2, 4, 16, 256])
        num = rng.randint(1, 10)
        table = rng.sample(range(2 * num + 30), num) + [-1] * rng.randint(0, 2)
        end = rng.randint((num - 1) * bs + 1, num * bs)
        start = rng.choice([0, rng.randint(0, end), (end - 1) // bs * bs, end])
        cases.append(_case(f"random/{i}", table, start, end, bs))
    return cases


def _case(name, block_table, start, end, block_size) -> Case:
    args = {"block_table": block_table, "start": start, "end": end, "block_size": block_size}
    return Case(name, args, [call_text("compute_slot_mapping", **args)])


def run(ns, case: Case) -> dict:
    a = fresh(case.args)
    ret = ns["compute_slot_mapping"](a["block_table"], a["start"], a["end"], a["block_size"])
    return {"ret": observe(ret), "inputs": observe([a["block_table"]])}


def check(case: Case, expected: dict, got: dict) -> Outcome:
    a = case.args
    table, start, end, bs = a["block_table"], a["start"], a["end"], a["block_size"]

    def hint(i, e, g):
        if i is None:
            n = len(g) if isinstance(g, list) else 0
            if n and start % bs and g[0] == table[start // bs] * bs:
                return f"the first block starts mid-block at offset start % block_size = {start % bs}, not 0"
            if start == end:
                return "start == end: no positions, return []"
            if n == end - start + 1:
                return "end is exclusive: the positions are start..end-1"
            if n > end - start:
                return "the last block is cut at end: it may be partial, blocks past end are not used"
            if end % bs == 0 and end > start:
                return (f"end = {end} is a multiple of block_size: the last block is full there "
                        "(end % block_size is 0, not the number of its slots used)")
            return "the last block may be partial: blocks start // block_size .. ceil(end / block_size) - 1"
        p = start + i
        if p // bs == start // bs and g == table[p // bs] * bs + i:
            return f"the first block starts mid-block at offset start % block_size = {start % bs}, not 0"
        return slot_hint(table, p, bs, g)

    return (read_only(expected, got, ("block_table",))
            or int_list("slots", expected["ret"], got["ret"], hint) or Outcome())
