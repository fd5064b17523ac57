"""Cases of exercise 121, KV memory budget: one call per case, the answer an exact int.

Clauses of the contract -> the fixed case that holds each:
    kv_bytes = 2 x L x H_kv x D x dtype_bytes       fp32_mha (the 2, dtype_bytes), qwen2p5_7b_bf16 (all)
    paged: whole blocks, ceil(context / block_size)  course_342_paged, worst_case_waste_15_slots
    paged: ceil exact on a multiple of block_size   context_multiple_of_block
    a floor of requests, not a ceiling              budget_below_one_request, course_31_reserved
    exact integer arithmetic at 10**17 and beyond   huge_budget_exact, reserved_huge
    reserved: max_len slots per request             course_31_reserved, reserved_exact_fit
    an int, not a float                             every case
"""
from __future__ import annotations

import random

from pagedkv_lib.judge.cases.compare import kind
from pagedkv_lib.judge.outcome import Outcome, wrong

from . import Case, call_text, observe

GiB = 2**30
PARAMS = {
    "kv_bytes_per_token": ("num_layers", "num_kv_heads", "head_dim", "dtype_bytes"),
    "paged_concurrency": ("budget_bytes", "context_len", "block_size", "bytes_per_token"),
    "reserved_concurrency": ("budget_bytes", "max_len", "bytes_per_token"),
}
FIXED = [
    ("fp32_mha", "kv_bytes_per_token", (12, 12, 64, 4)),
    ("llama2_7b_fp16", "kv_bytes_per_token", (32, 32, 128, 2)),
    ("qwen3_0p6b_bf16", "kv_bytes_per_token", (28, 8, 128, 2)),
    ("qwen2p5_7b_bf16", "kv_bytes_per_token", (28, 4, 128, 2)),
    ("all_ones", "kv_bytes_per_token", (1, 1, 1, 1)),
    ("budget_below_one_request", "paged_concurrency", (1000, 100, 16, 64)),
    ("worst_case_waste_15_slots", "paged_concurrency", (GiB, 17, 16, 524288)),
    ("course_342_paged", "paged_concurrency", (55 * GiB, 3000, 16, 57344)),
    ("context_multiple_of_block", "paged_concurrency", (55 * GiB, 3008, 16, 57344)),
    ("context_one_more_than_block", "paged_concurrency", (10**9, 17, 16, 1000)),
    ("context_one_less_than_block", "paged_concurrency", (10**9, 15, 16, 1000)),
    ("one_token_block_256", "paged_concurrency", (10**9, 1, 256, 1000)),
    ("block_size_1", "paged_concurrency", (10**9, 777, 1, 1000)),
    ("huge_budget_exact", "paged_concurrency", (3 * 10**17 - 1, 1, 1, 3)),
    ("huge_budget_rounding", "paged_concurrency", (2**62 - 1, 100, 4, 57344)),
    ("course_31_reserved", "reserved_concurrency", (55 * GiB, 32768, 57344)),
    ("reserved_exact_fit", "reserved_concurrency", (4 * 4096 * 524288, 4096, 524288)),
    ("reserved_below_one", "reserved_concurrency", (4095 * 524288, 4096, 524288)),
    ("reserved_huge", "reserved_concurrency", (3 * 10**17 - 1, 1, 3)),
]

NOTES = {"worst_case_waste_15_slots": "LLaMA-2-7B in FP16 (512 KiB a token), 17 tokens at block size 16: "
         "each request pays for 2 blocks, 32 slots, and leaves 15 empty: 15 x 512 KiB = 7.5 MiB wasted, the "
         "worst case (block_size - 1 slots)"}


def build(seed: int, device: str = "cpu") -> list[Case]:
    rng = random.Random(f"121/{seed}")
    cases = [_case(f"fixed/{name}", fn, args, NOTES.get(name)) for name, fn, args in FIXED]
    for i in range(12):
        shape = (rng.randint(1, 96), rng.randint(1, 64), rng.choice([64, 80, 128, 256]),
                 rng.choice([1, 2, 4]))
        bpt = 2 * _prod(shape)
        budget = rng.choice([rng.randint(1, 2**40), rng.randint(2**55, 2**63), rng.randint(1, 10**7)])
        fn = list(PARAMS)[i % 3]
        if fn == "kv_bytes_per_token":
            args = shape
        elif fn == "paged_concurrency":
            args = (budget, rng.randint(1, 40000), rng.choice([1, 4, 16, 64, 256]), bpt)
        else:
            args = (budget, rng.choice([2048, 4096, 32768, rng.randint(1, 10**5)]), bpt)
        cases.append(_case(f"random/{i}", fn, args))
    return cases


def _case(name: str, fn: str, args: tuple, note: str | None = None) -> Case:
    return Case(name, {"fn": fn, "args": args},
                [call_text(fn, **dict(zip(PARAMS[fn], args))), *([note] if note else [])])


def run(ns, case: Case) -> dict:
    return {"ret": observe(ns[case.args["fn"]](*case.args["args"]))}


def check(case: Case, expected: dict, got: dict) -> Outcome:
    e, g = expected["ret"], got["ret"]
    if type(g) is not int:
        return wrong(f"expected the int {e}, got {kind(g)}",
                     "return an int: integer division `//`, not `/` (floats round above 2**53)")
    if g == e:
        return Outcome()
    return wrong(f"expected {e}, got {g}", _hint(case.args["fn"], case.args["args"], g))


def _hint(fn: str, args: tuple, got: int) -> str:
    if fn == "kv_bytes_per_token":
        layers, _, _, dtype_bytes = args
        if got == _prod(args):
            return "K and V: a token stores a key AND a value, the factor 2"
        if got * dtype_bytes == 2 * _prod(args):
            return "each element takes dtype_bytes bytes (2 for fp16/bf16, 4 for fp32): multiply by it"
        if got * layers == 2 * _prod(args):
            return "the cache of the WHOLE model: every layer stores its own K and V, multiply by num_layers"
        return "2 (K and V) x num_layers x num_kv_heads x head_dim x dtype_bytes"
    if fn == "reserved_concurrency":
        budget, max_len, bpt = args
        if got == int(budget / (max_len * bpt)):
            return "float division rounds at this size: use integer `//`"
        if got == -(-budget // (max_len * bpt)):
            return "the count of requests that fit is a floor, not a ceiling"
        return "each request reserves max_len slots: budget // (max_len * bytes_per_token)"
    budget, ctx, bs, bpt = args
    guesses = {
        "a request pays for whole blocks: ceil(context_len / block_size) blocks of block_size tokens":
            budget // (ctx * bpt),
        "ceil(c / bs) is -(-c // bs); c // bs + 1 is one block too many when block_size divides c":
            budget // ((ctx // bs + 1) * bs * bpt),
        "float division rounds at this size: use integer `//`":
            int(budget / (-(-ctx // bs) * bs * bpt)),
        "the count of requests that fit is a floor, not a ceiling": -(-budget // (-(-ctx // bs) * bs * bpt)),
    }
    for hint, value in guesses.items():
        if got == value:
            return hint
    return "budget_bytes // (ceil(context_len / block_size) * block_size * bytes_per_token)"


def _prod(args) -> int:
    out = 1
    for a in args:
        out *= a
    return out
