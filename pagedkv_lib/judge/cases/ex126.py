"""Cases of exercise 126, varlen paged attention: decodes, prefills and chunks of prefills in one batch.

Clauses of the contract -> the fixed case that holds each (attention_cases.py names the mistake):
    query i of b at position seq_len - q_len + i     course_decode_prefill_chunk (finite garbage: off-by-ones
                                                     show as such), second_half_of_a_chunk
    causal: keys 0..its position, itself included    course_decode_prefill_chunk, full_prefills
    garbage rows (NaN) never reach the output        all_decodes (NaN garbage after the contexts)
    cu_seqlens_q: rows cu[b]:cu[b+1] of sequence b   course_decode_prefill_chunk, one_cached_token
    GQA: head h reads KV head h // G                 course_decode_prefill_chunk, gqa_8, mha
    any scale, scores of any size and sign           scale_is_an_argument, all_scores_far_below_zero
    block sizes 1, 256; M longer than needed         chunk_block_size_1, chunk_block_size_256
    the output has q's shape and dtype               fp16, bf16
    every argument read-only                         course_decode_prefill_chunk
"""
from __future__ import annotations

import random

from pagedkv_lib.judge.outcome import Outcome

from . import Case
from .attention_cases import make_case, run_attention

FIXED = [  # name, seq_lens, q_lens, block_size, H, H_kv, D, options
    ("course_decode_prefill_chunk", [37, 5, 20], [1, 5, 8], 4, 8, 2, 64,
     {"round_robin": True, "garbage": "huge"}),
    ("all_decodes", [6, 13, 1], [1, 1, 1], 4, 8, 2, 8, {}),
    ("full_prefills", [5, 9], [5, 9], 4, 4, 2, 8, {}),
    ("second_half_of_a_chunk", [20], [8], 16, 4, 1, 8, {}),
    ("chunk_block_size_1", [11, 4], [3, 2], 1, 4, 2, 4, {}),
    ("chunk_block_size_256", [300, 40], [129, 40], 256, 4, 2, 4, {}),
    ("one_cached_token", [9], [8], 4, 8, 4, 8, {}),
    ("lengths_127_128_129", [127, 128, 129], [127, 1, 64], 16, 8, 2, 8, {"extra_padding": 1}),
    ("gqa_8", [12, 7], [4, 7], 4, 16, 2, 8, {}),
    ("mha", [12, 7], [4, 2], 4, 4, 4, 8, {}),
    ("scale_is_an_argument", [10, 6], [3, 6], 4, 4, 2, 8, {"scale": 0.3}),
    ("all_scores_far_below_zero", [10, 7], [4, 7], 4, 4, 2, 16, {"scale": -200.0, "positive": True,
                                                                 "garbage": "huge"}),
    ("huge_finite_garbage", [9, 14], [2, 5], 4, 8, 2, 8, {"garbage": "huge", "exact_pool": True,
                                                        "extra_padding": 2}),
    ("fp16", [20, 9], [8, 9], 16, 8, 2, 16, {"dtype": "fp16"}),
    ("bf16", [20, 9], [8, 9], 16, 8, 2, 16, {"dtype": "bf16"}),
]


def build(seed: int, device: str = "cpu") -> list[Case]:
    rng = random.Random(f"126/{seed}")
    cases = [make_case(f"fixed/{n}", lens, q_lens, bs, H, H_kv, D, seed=i, **opt)
             for i, (n, lens, q_lens, bs, H, H_kv, D, opt) in enumerate(FIXED)]
    for i in range(8):
        bs = rng.choice([1, 4, 16, 256])
        H_kv = rng.choice([1, 2, 4])
        lens = [rng.randint(1, 140) for _ in range(rng.randint(1, 4))]
        q_lens = [rng.choice([1, n, rng.randint(1, n)]) for n in lens]
        opt = {"dtype": rng.choice(["fp32", "fp32", "fp16", "bf16"]), "garbage": rng.choice(["nan", "huge"]),
               "extra_padding": rng.randint(0, 2), "exact_pool": rng.random() < 0.5,
               "scale": rng.choice([None, rng.uniform(0.05, 1.0)])}
        cases.append(make_case(f"random/{i}", lens, q_lens, bs, H_kv * rng.choice([1, 2, 4, 8]), H_kv,
                               rng.choice([4, 8, 16]), seed=100 + i, **opt))
    for case in cases:
        case.show.insert(0, "paged_attention_varlen(q, k_cache, v_cache, block_tables, seq_lens, "
                            "cu_seqlens_q, scale):")
    return cases


def run(ns, case: Case) -> dict:
    return run_attention(ns["paged_attention_varlen"], case, varlen=True)


def check(case: Case, expected: dict, got: dict) -> Outcome:
    from .attention_checks import check_attention  # the judge's only (the answer is in it)

    return check_attention(case, expected, got)
