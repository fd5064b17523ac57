"""Cases of exercise 133, paged prefill (varlen) attention in Triton: exercise 126's cases and checks, with
guards, and a benchmark.

Device "cpu": exercise 126's fixed cases, Triton cases (decode rows next to prefills, a chunk whose tile
crosses into the next sequence, a last block with a NaN tail, tiles running into the -1 padding, blocks
larger than a tile, odd groups and head dims, scores that overflow exp without the running max, sums past
fp16's range, a p . v that cancels) and short random ones, in Triton's interpreter; "cuda": long
prefills, chunks and decode rows, natively.
Every cache is a view into a buffer with a NaN block before and after it (block -1 lands in the first),
every block table a view into a wider one (rows M + 3 apart) with -1 rows after it, and the output buffer
(the caller's, as engines pass it) a view into one with NaN rows before and after it: a write outside its T
rows is caught, and so is a row left unwritten.

Clauses of the contract -> the fixed case that first catches its plant (exercise 126's cases come first):
    the work done by a Triton kernel launched here   every case (kernel_harness.call counts the launches)
    query i at position seq_len - q_len + i          course_decode_prefill_chunk (a chunk of 8 of 20)
    keys past the context masked, never loaded       all_decodes (NaN tails), course_decode_prefill_chunk
                                                     (block -1 through the padding is the NaN guard)
    table rows table_stride apart, not M             every case (the table is a view into a wider one)
    a tile's rows past q_len are not its own         course_decode_prefill_chunk (out's NaN guard rows)
    online softmax: rescale by exp(m_old - m_new)    course_decode_prefill_chunk (37 keys: two tiles)
    GQA: query head h reads KV head h // G           course_decode_prefill_chunk (G = 4)
    the scale argument                               scale_is_an_argument
    m, l and acc in fp32                             sums_past_fp16_range (context x 250 > 65504)
    p . v on fp32 operands                           p_v_cancels (V = +-20000: the answer near 0); on
                                                     the CPU bf16 (tl.dot on raw bits in the interpreter)
    out written in place and returned                every case (out between NaN guard rows)
    every element of out stored by the kernel        every case on the CPU (kernel_harness.recording_stores;
                                                     CPU_ONLY)
Shapes: docs/conventions.md.
"""
from __future__ import annotations

import random
import sys

import torch

from pagedkv_lib.judge import registry
from pagedkv_lib.judge.outcome import Outcome, wrong
from pagedkv_lib.testing.sdpa_reference import sdpa_contiguous

from . import Case, ex126, fresh, observe
from .attention_cases import make_case
from .kernel_harness import CPU_ONLY as CPU_ONLY  # the clause only the CPU cases check (the report reads it)
from .kernel_harness import (
    attention_kernel_hint,
    bench_submission,
    call,
    every_element,
    fingerprint,
    guard_attention_inputs,
    loaded,
    not_launched,
    random_attention_options,
    speed_clause,
    stored_elements,
    time_us,
    to_device,
    unjudged,
    where,
    wild_writes,
    written_outside_the_kernel,
    wrote_outside,
)

NAME = "paged_attention_varlen_triton"
EXTRA = [  # name, seq_lens, q_lens, block_size, H, H_kv, D, options (make_case's)
    ("decode_rows_next_to_prefills", [50, 1, 77, 9, 40], [50, 1, 1, 9, 1], 8, 4, 2, 8, {}),
    ("chunk_tile_crosses_into_the_next_sequence", [70, 45], [21, 20], 16, 4, 2, 8, {"extra_padding": 2}),
    ("last_block_with_a_nan_tail", [13, 30], [13, 7], 8, 4, 1, 8, {"extra_padding": 3, "exact_pool": True}),
    ("tile_runs_into_the_padding", [8, 16, 5], [8, 5, 5], 4, 4, 2, 8, {"extra_padding": 3,
                                                                       "exact_pool": True}),
    ("block_bigger_than_a_tile", [100, 64], [37, 64], 64, 4, 2, 8, {"extra_padding": 1}),
    ("odd_group_and_head_dim", [13, 30], [13, 17], 4, 6, 2, 12, {"extra_padding": 2}),
    ("scores_overflow_without_the_max", [50, 9], [20, 9], 16, 4, 1, 16, {"scale": 4.0}),
    ("sums_past_fp16_range", [400, 30], [64, 1], 16, 2, 1, 16, {"dtype": "fp16", "sums": "large"}),
    ("p_v_cancels", [96, 200, 64, 2], [1, 1, 1, 1], 16, 2, 1, 16, {"dtype": "fp16", "sums": "cancelling"}),
]
CUDA = [  # long contexts natively: name, seq_lens, q_lens, block_size, H, H_kv, D, options
    ("bf16_gqa4_cold_prefills", [1024, 777], [1024, 777], 16, 32, 8, 128, {"dtype": "bf16",
                                                                           "extra_padding": 2}),
    ("bf16_chunks_and_decode_rows", [2560, 4097, 300, 1], [512, 1, 300, 1], 16, 32, 8, 128,
     {"dtype": "bf16"}),
    ("fp16_block_size_256", [3000, 257], [700, 257], 256, 32, 8, 128, {"dtype": "fp16", "extra_padding": 1}),
    ("fp32_gqa8_block_size_1", [700, 33], [300, 33], 1, 16, 2, 64, {"extra_padding": 3}),
    ("bf16_no_gqa_head_dim_80", [1500, 17], [1500, 3], 64, 8, 8, 80, {"dtype": "bf16"}),
    ("bf16_huge_garbage", [2000, 5], [129, 5], 16, 32, 8, 128, {"dtype": "bf16", "garbage": "huge",
                                                                "exact_pool": True, "extra_padding": 4}),
    ("bf16_sums_past_fp16_range", [3000, 700], [300, 1], 16, 32, 8, 128, {"dtype": "bf16",
                                                                          "sums": "large"}),
    ("bf16_p_v_cancels", [4096, 1000, 64], [1, 1, 1], 16, 32, 8, 128, {"dtype": "bf16",
                                                                      "sums": "cancelling"}),
]
RANDOM = 4
TABLE_GUARD = 512   # entries of -1 after the last table row (a tile of up to 512 keys reads -1 there)
OUT_GUARD = 128     # NaN rows before and after out: a tile of up to 128 queries that overruns lands there


def build(seed: int, device: str = "cpu") -> list[Case]:
    fixed = CUDA if device == "cuda" else ex126.FIXED + EXTRA
    prefix = "cuda" if device == "cuda" else "fixed"
    cases = [make_case(f"{prefix}/{n}", lens, q_lens, bs, H, H_kv, D, seed=600 + i, **opt)
             for i, (n, lens, q_lens, bs, H, H_kv, D, opt) in enumerate(fixed)]
    rng = random.Random(f"133/{seed}/{device}")
    longest = 3000 if device == "cuda" else 70
    for i in range(RANDOM):
        H_kv = rng.choice([1, 2, 4, 8] if device == "cuda" else [1, 2])
        lens = [rng.randint(1, longest) for _ in range(rng.randint(1, 4))]
        q_lens = [rng.choice([1, n, rng.randint(1, n)]) for n in lens]
        opt = random_attention_options(rng)
        D = rng.choice([64, 128] if device == "cuda" else [4, 8, 16])
        cases.append(make_case(f"random/{i}", lens, q_lens, rng.choice([1, 4, 16, 256]),
                               H_kv * rng.choice([1, 2, 3, 4]), H_kv, D, seed=700 + i, **opt))
    for case in cases:
        M = case.args["block_tables"].shape[1]
        guard_attention_inputs(case.args, device, row_pad=3, table_guard=TABLE_GUARD)  # rows M + 3 apart
        case.show.insert(0, f"{NAME}(q, k_cache, v_cache, block_tables, seq_lens, cu_seqlens_q, scale, out):")
        case.show.append("the caches lie between NaN guard blocks (block -1 is the one before); the table is "
                         f"a view, rows {M + 3} apart (block_tables.stride(0)), followed by rows of -1; out "
                         f"lies between {OUT_GUARD} NaN rows on each side")
    return cases


def out_buffer(q: torch.Tensor) -> torch.Tensor:
    """A NaN [T, H, D] view with OUT_GUARD NaN rows before and after it in its storage."""
    T, H, D = q.shape
    buf = torch.full((T + 2 * OUT_GUARD, H, D), float("nan"), dtype=q.dtype)   # [T + 2 * guard, H, D]
    return buf[OUT_GUARD : OUT_GUARD + T]


def run(ns, case: Case) -> dict:
    oracle = loaded(registry.get(133).oracle[NAME])              # None in the child
    device = where(ns, NAME, oracle, case.args["device"])
    a = fresh(case.args)
    q, lens, cu = (a[k].to(device) for k in ("q", "seq_lens", "cu_seqlens_q"))
    k_cache, v_cache, tables = (to_device(a[k], device) for k in ("k_cache", "v_cache", "block_tables"))
    out = to_device(out_buffer(a["q"]), device)
    if ns[NAME] is oracle:                                          # the reference returns a new tensor
        returned, launches = out.copy_(oracle(q, k_cache, v_cache, tables, lens, cu, a["scale"])), None
        stored = None
    else:
        returned, launches, _, stores = call(ns, NAME, oracle, q, k_cache, v_cache, tables, lens, cu,
                                             a["scale"], out)
        stored = {"out": stored_elements(stores, out)}
    inputs = [fingerprint(t) for t in (q, k_cache, v_cache, tables, lens, cu)]   # read-only: unchanged?
    return {"out": observe(out), "returned_out": returned is out, "wild_writes": wild_writes("out", out),
            "inputs": inputs, "launches": launches, "stored": stored}


def check(case: Case, expected: dict, got: dict) -> Outcome:
    """Exercise 126's check, after the kernel's launch, the guard rows around out and the returned buffer;
    with the kernel's side of its hints (kernel_harness.attention_kernel_hint); last, on the CPU, that the
    kernel stored every element of out."""
    no_kernel = not_launched(got)
    if no_kernel is not None:
        return no_kernel
    outside_out = wrote_outside(got, "a tile's rows past its sequence's q_len are the next sequence's rows "
                                "(or lie past the end of out): mask them in the store as in the load, so "
                                "that every row is written by its own sequence's program only")
    if outside_out is not None:
        return outside_out
    if got.get("returned_out") is not True:
        return wrong("did not return out", "write the result into the `out` buffer given, and return it")
    from .attention_checks import check_attention  # the judge's only (the answer is in it)

    outcome = check_attention(case, expected, got)
    if outcome.passed:
        return written_outside_the_kernel(got, every_element("out", expected["out"])) or outcome
    if outcome.hint:
        outcome.hint = attention_kernel_hint(case.args, expected["out"], got["out"], outcome.hint,
                                             GARBAGE_IN_A_KERNEL)
    return outcome


GARBAGE_IN_A_KERNEL = ("NaN in the output: a cache row past the context was read (the last block's tail, or "
                       "block -1 through the table's padding, which lies just before the cache), or a row of "
                       "out was never written. Mask the K/V loads, and the block-table load, at positions >= "
                       "seq_len; masking only the scores is not enough, since 0 * NaN = NaN.")


# ----------------------------------------------------------------------------------------------------------
# the benchmark (kernel_harness): the submission timed in the child, the library's kernel in the parent

BENCH = {"cold 4 x 2048": ([2048] * 4, [2048] * 4), "chunked 8 x (2048 + 512)": ([2560] * 8, [512] * 8),
         "decode rows beside prefills": ([2048, 1024] + [4096] * 32, [2048, 1024] + [1] * 32)}


def bench(ns, device: str, mark=None) -> dict:
    """Prefill batches, bf16, H = 32, H_kv = 8, D = 128, block size 16."""
    return bench_submission(ns, device, sys.modules[__name__], 133, mark)


def bench_inputs(label: str, device: str = "cuda", scale_down: int = 1, seed: int | None = None):
    """(arguments, bytes moved) of one benchmark shape, the same in every process for one seed (default: the
    label's length; drawn on the device)."""
    seq_lens, q_lens = ([max(1, n // scale_down) for n in v] for v in BENCH[label])
    H, H_kv, D, S = 32, 8, 128, 16
    M = -(-max(seq_lens) // S)
    B, T = len(seq_lens), sum(q_lens)
    gen = torch.Generator(device=device).manual_seed(len(label) if seed is None else seed)
    q = torch.randn(T, H, D, device=device, generator=gen).bfloat16()                      # [T, H, D]
    k_cache = torch.randn(B * M, S, H_kv, D, device=device, generator=gen).bfloat16()      # [N, S, H_kv, D]
    v_cache = torch.randn(B * M, S, H_kv, D, device=device, generator=gen).bfloat16()
    tables = torch.randperm(B * M, device=device, generator=gen).view(B, M).to(torch.int32)  # [B, M]
    lens = torch.tensor(seq_lens, dtype=torch.int32, device=device)                        # [B]
    cu = torch.tensor([0] + q_lens, device=device).cumsum(0).to(torch.int32)               # [B + 1]
    out = torch.empty_like(q)                                                               # [T, H, D]
    nbytes = 2 * sum(seq_lens) * H_kv * D * 2 + 2 * T * H * D * 2
    return (q, k_cache, v_cache, tables, lens, cu, D**-0.5, out), nbytes


def work(label: str) -> int:
    """FLOPs of one call on a benchmark shape (speed.py's bar: against the bf16 matmul rate)."""
    return flops(label)


def flops(label: str) -> int:
    """Causal work, each visible (query, key) pair once: 4 * D * H per pair."""
    seq_lens, q_lens = BENCH[label]
    return 4 * 128 * 32 * sum(q * (n - q) + q * (q + 1) // 2 for n, q in zip(seq_lens, q_lens))


def bench_correct(fn, args) -> bool:
    """`fn`'s output against SDPA on each sequence's gathered K/V, relative error under 2e-2. It runs in
    the child, where the library's paged attention (the oracle) refuses to work: SDPA does not."""
    *inputs, out = args
    q, k_cache, v_cache, tables, lens, cu, scale = inputs
    got = fn(*inputs, out).float()                                   # [T, H, D]
    S = k_cache.shape[1]
    keys, values = [], []
    for b, n in enumerate(lens.tolist()):
        blocks = tables[b, : -(-n // S)].long()                      # [ceil(n / S)]
        keys.append(k_cache[blocks].flatten(0, 1)[:n])                # [n, H_kv, D]
        values.append(v_cache[blocks].flatten(0, 1)[:n])
    ref = sdpa_contiguous(q, keys, values, cu.tolist(), scale).float()   # [T, H, D]
    return bool((got - ref).norm() / ref.norm() < 2e-2)


def library_kernel():
    """The library's unchecked launcher, its configuration chosen once per head shape."""
    from pagedkv_lib.kernels.triton_prefill_attention import choose_prefill_config, launch_prefill_attention

    configs = {}

    def launch(q, k_cache, v_cache, tables, lens, cu, scale, out):
        shape = (q.shape[1], k_cache.shape[2], q.shape[2], q.dtype)
        if shape not in configs:
            configs[shape] = choose_prefill_config(*shape[:3], q.dtype, interpreted=False)
        return launch_prefill_attention(q, k_cache, v_cache, tables, lens, cu, scale, configs[shape], out)

    return launch


def bench_report(figures: dict, device: str) -> dict:
    """In the parent, after every child exited: the library's kernel on the same shapes, in TFLOP/s (prefill
    is bound by arithmetic, so the fraction of the copy bandwidth says little here)."""
    if device != "cuda" or "skipped" in figures or "error" in figures:
        return unjudged(figures)
    fn = library_kernel()
    out = {"device": figures["device"], "times": "do_bench medians, L2 flushed, launch included; the library "
           "through its unchecked launcher; TFLOP/s count each causal (query, key) pair once"}
    for label in BENCH:
        mine = figures.get(label)
        if not isinstance(mine, dict):
            out[label] = f"missing from the submission's figures: {mine!r}"[:200]
            continue
        args, _ = bench_inputs(label)
        lib = time_us(lambda args=args: fn(*args))
        work = flops(label)
        out[label] = (f"yours {mine['us']:.0f} us = {work / mine['us'] / 1e6:.0f} TFLOP/s; library "
                      f"{lib:.0f} us = {work / lib / 1e6:.0f} TFLOP/s; yours/library time "
                      f"{mine['us'] / lib:.2f}; correct: {mine['correct']}")
        del args
    out["speed"] = speed_clause(figures, sys.modules[__name__], 133, fn)
    return out
