"""Cases of exercise 125, paged decode attention: one query per sequence, compared at stated tolerances.

Clauses of the contract -> the fixed case that holds each (attention_cases.py names the mistake):
    the context is positions 0..context_len-1        notebook_a_and_b (finite garbage: one token too many
                                                     or too few, the last block's tail read, show as such)
    garbage rows (NaN) never reach the output        lengths_around_a_block (NaN garbage after the context)
    -1 padding is never followed                     padding_reads_a_used_block
    GQA: head h reads KV head h // G                 notebook_a_and_b, gqa_8, gqa_2
    any scale, scores of any size and sign           scale_is_an_argument, all_scores_far_below_zero
    block sizes 1, 256; M longer than needed         block_size_1, block_size_256, lengths_127_128_129
    the output has q's shape and dtype               fp16, bf16
    every argument read-only                         notebook_a_and_b
"""
from __future__ import annotations

import random

from pagedkv_lib.judge.outcome import Outcome

from . import Case
from .attention_cases import make_case, run_attention

FIXED = [  # name, context_lens, block_size, H, H_kv, D, options
    ("notebook_a_and_b", [6, 3], 4, 8, 2, 16, {"block_tables": [[7, 2], [5]], "garbage": "huge"}),
    ("lengths_around_a_block", [1, 3, 4, 5], 4, 4, 4, 8, {}),
    ("lengths_127_128_129", [127, 128, 129], 16, 8, 2, 8, {"extra_padding": 2}),
    ("block_size_256", [1, 255, 257], 256, 4, 1, 8, {}),
    ("block_size_1", [1, 5, 9], 1, 8, 8, 4, {}),
    ("gqa_8", [9, 17], 4, 16, 2, 8, {}),
    ("gqa_2", [10, 3], 4, 8, 4, 8, {}),
    ("scale_is_an_argument", [7, 12], 4, 4, 2, 8, {"scale": 0.5}),
    ("all_scores_far_below_zero", [7, 20], 4, 4, 2, 16, {"scale": -200.0, "positive": True,
                                                          "garbage": "huge"}),
    ("huge_finite_garbage", [5, 9, 2], 4, 8, 2, 8, {"garbage": "huge"}),
    ("padding_reads_a_used_block", [6, 13, 3], 4, 8, 2, 8, {"exact_pool": True, "extra_padding": 3,
                                                             "garbage": "huge"}),
    ("fp16", [7, 33], 16, 8, 2, 16, {"dtype": "fp16"}),
    ("bf16", [7, 33], 16, 8, 2, 16, {"dtype": "bf16"}),
    ("one_sequence_one_token", [1], 16, 4, 2, 8, {}),
]


def build(seed: int, device: str = "cpu") -> list[Case]:
    rng = random.Random(f"125/{seed}")
    cases = [make_case(f"fixed/{n}", lens, None, bs, H, H_kv, D, seed=i, **opt)
             for i, (n, lens, bs, H, H_kv, D, opt) in enumerate(FIXED)]
    for i in range(8):
        bs = rng.choice([1, 4, 16, 256])
        H_kv = rng.choice([1, 2, 4])
        H = H_kv * rng.choice([1, 2, 4, 8])
        lens = [rng.randint(1, 150) for _ in range(rng.randint(1, 4))]
        opt = {"dtype": rng.choice(["fp32", "fp32", "fp16", "bf16"]), "garbage": rng.choice(["nan", "huge"]),
               "extra_padding": rng.randint(0, 2), "exact_pool": rng.random() < 0.5,
               "scale": rng.choice([None, rng.uniform(0.05, 1.0)])}
        cases.append(make_case(f"random/{i}", lens, None, bs, H, H_kv, rng.choice([4, 8, 16]), seed=100 + i,
                               **opt))
    for case in cases:
        case.show.insert(0, "paged_attention_decode(q, k_cache, v_cache, block_tables, context_lens, scale):")
    return cases


def run(ns, case: Case) -> dict:
    return run_attention(ns["paged_attention_decode"], case, varlen=False)


def check(case: Case, expected: dict, got: dict) -> Outcome:
    from .attention_checks import check_attention  # the judge's only (the answer is in it)

    return check_attention(case, expected, got)
