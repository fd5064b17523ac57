"""Cases of exercise 131, paged decode attention in Triton: exercise 125's cases and checks, with guards.

Device "cpu": exercise 125's fixed cases, Triton cases (a tile that runs past a full last block into the -1
padding, blocks larger than a tile, odd groups and head dims, scores large enough to overflow exp without
the running max, sums past fp16's range, a p . v that cancels) and short random ones, in Triton's
interpreter; "cuda": long contexts, natively.
Every cache is a view into a buffer with a NaN block before and after it (block -1 lands in the first), and
every block table a view into a wider one (rows table_stride = M + 3 apart) with -1 rows after it, so a
kernel that follows the -1 padding or reads past a table row gets NaN, and the check names the mistake
(`attention_cases.check_attention`).

Clauses of the contract -> the fixed case that holds each (exercise 125's list, and):
    the work done by a Triton kernel launched here   every case (kernel_harness.call counts the launches)
    tokens past context_len masked, never loaded     notebook_a_and_b (finite garbage: one token too many),
                                                     tile_runs_into_the_padding (block -1 is NaN guard)
    their scores -inf (the last tile's tail)         notebook_a_and_b (a tile of 16..128 holds 6 keys)
    every key in a tile: a context of 1 too          lengths_around_a_block (else 0 / 0)
    table rows table_stride apart, not M             every case (the table is a view into a wider one)
    online softmax: rescale by exp(m_old - m_new)    lengths_127_128_129 (many tiles)
    any scale: a running max that starts at -inf     all_scores_far_below_zero, scores_overflow_...
    the scale applied once                           notebook_a_and_b
    m, l and acc in fp32                             sums_past_fp16_range (context x 250 > 65504)
    p . v on fp32 operands                           p_v_cancels (V = +-20000: the answer near 0); on
                                                     the CPU bf16 (bf16 products on raw bits there)
    G not a power of two, D not a power of two       odd_group_and_head_dim
    the output has q's dtype                         fp16, bf16, many_tiles_fp16
    stores masked: nothing written past out          odd_group_and_head_dim (out made in guard memory)
    every element of out stored by the kernel        every case on the CPU (kernel_harness.recording_stores;
                                                     CPU_ONLY)
    G = 4 (a GPU needs tl.dot's M >= 16 up to        cuda/bf16_gqa4_4096
    triton 3.4, only its K from 3.5)
Shapes: docs/conventions.md.
"""
from __future__ import annotations

import contextlib
import random
import sys

import torch

from pagedkv_lib.judge import registry
from pagedkv_lib.judge.outcome import Outcome

from . import Case, ex125, fresh, observe
from .attention_cases import GARBAGE, make_case
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
    stored_elements,
    to_device,
    where,
    wild_writes,
    written_outside_the_kernel,
    wrote_outside,
)
from .kernel_harness import bench_report as _bench_report

NAME = "paged_attention_decode_triton"
EXTRA = [  # name, context_lens, block_size, H, H_kv, D, options (make_case's)
    ("tile_runs_into_the_padding", [8, 16, 4], 4, 4, 2, 8, {"extra_padding": 3, "exact_pool": True}),
    ("block_bigger_than_a_tile", [40, 100, 64], 64, 4, 2, 8, {"extra_padding": 1}),
    ("odd_group_and_head_dim", [13, 30], 4, 6, 2, 12, {"extra_padding": 2}),
    ("scores_overflow_without_the_max", [50, 9], 16, 4, 1, 64, {"scale": 4.0}),
    ("many_tiles_fp16", [300], 16, 4, 2, 16, {"dtype": "fp16", "extra_padding": 2}),
    ("sums_past_fp16_range", [400, 30, 1], 16, 2, 1, 16, {"dtype": "fp16", "sums": "large"}),
    ("p_v_cancels", [96, 200, 64, 2], 16, 2, 1, 16, {"dtype": "fp16", "sums": "cancelling"}),
]
CUDA = [  # long contexts natively: name, context_lens, block_size, H, H_kv, D, options; the first has G = 4,
          # where a tl.dot with BLOCK_G = 4 rows fails to compile up to triton 3.4 (Outcome.of_exception names
          # the cause); from 3.5 NVIDIA's compiler pads M and N itself and needs only K >= 16
    ("bf16_gqa4_4096", [4096, 4095, 4097, 1], 16, 32, 8, 128, {"dtype": "bf16", "extra_padding": 2}),
    ("fp16_block_size_256", [3000, 257, 1024], 256, 32, 8, 128, {"dtype": "fp16", "extra_padding": 1}),
    ("fp32_gqa8_block_size_1", [700, 33], 1, 16, 2, 64, {"extra_padding": 3}),
    ("bf16_no_gqa_head_dim_80", [1500, 17, 2048], 64, 8, 8, 80, {"dtype": "bf16"}),
    ("bf16_huge_garbage", [2000, 5], 16, 32, 8, 128, {"dtype": "bf16", "garbage": "huge", "exact_pool": True,
                                                      "extra_padding": 4}),
    ("bf16_sums_past_fp16_range", [3000, 700], 16, 32, 8, 128, {"dtype": "bf16", "sums": "large"}),
    ("bf16_p_v_cancels", [4096, 1000, 64], 16, 32, 8, 128, {"dtype": "bf16", "sums": "cancelling"}),
]
RANDOM = 4
TABLE_GUARD = 512   # entries of -1 after the last table row: a tile of up to 512 tokens that runs past the
                    # end of the last row reads -1 there (then NaN), rather than memory outside the table


def build(seed: int, device: str = "cpu") -> list[Case]:
    fixed = CUDA if device == "cuda" else ex125.FIXED + EXTRA
    prefix = "cuda" if device == "cuda" else "fixed"
    cases = [make_case(f"{prefix}/{n}", lens, None, bs, H, H_kv, D, seed=400 + i, **opt)
             for i, (n, lens, bs, H, H_kv, D, opt) in enumerate(fixed)]
    rng = random.Random(f"131/{seed}/{device}")
    longest = 5000 if device == "cuda" else 70
    for i in range(RANDOM):
        H_kv = rng.choice([1, 2, 4, 8] if device == "cuda" else [1, 2])
        H = H_kv * rng.choice([1, 2, 3, 4, 8])
        opt = random_attention_options(rng)
        lens = [rng.randint(1, longest) for _ in range(rng.randint(1, 4))]
        D = rng.choice([64, 128] if device == "cuda" else [4, 8, 16])
        cases.append(make_case(f"random/{i}", lens, None, rng.choice([1, 4, 16, 256]), H, H_kv, D,
                               seed=500 + i, **opt))
    for case in cases:
        M = case.args["block_tables"].shape[1]
        guard_attention_inputs(case.args, device, row_pad=3, table_guard=TABLE_GUARD)  # rows M + 3 apart
        case.show.insert(0, f"{NAME}(q, k_cache, v_cache, block_tables, context_lens, scale):")
        case.show.append("the caches lie between NaN guard blocks (block -1 is the one before); the table "
                         f"is a view, rows {M + 3} apart (block_tables.stride(0)), followed by rows of -1")
    return cases


def run(ns, case: Case) -> dict:
    oracle = loaded(registry.get(131).oracle[NAME])              # None in the child
    device = where(ns, NAME, oracle, case.args["device"])
    a = fresh(case.args)
    q, lens = a["q"].to(device), a["seq_lens"].to(device)
    k_cache, v_cache, tables = (to_device(a[k], device) for k in ("k_cache", "v_cache", "block_tables"))
    with guarded_allocations():
        out, launches, _, stores = call(ns, NAME, oracle, q, k_cache, v_cache, tables, lens, a["scale"])
    inputs = [fingerprint(t) for t in (q, k_cache, v_cache, tables, lens)]   # read-only: unchanged?
    guarded_out = isinstance(out, torch.Tensor) and out.is_contiguous() and out.is_floating_point()
    wild = wild_writes("out", out) if guarded_out and ns[NAME] is not oracle else []
    stored = None if stores is None else {"out": stored_elements(stores, out)}
    return {"out": observe(out), "inputs": inputs, "wild_writes": wild, "launches": launches,
            "stored": stored}


OUT_GUARD = 4096    # NaN elements before and after a tensor the launcher makes: more than a tile overruns


@contextlib.contextmanager
def guarded_allocations():
    """While inside, torch.empty / empty_like / zeros / zeros_like make floating-point tensors as views into a
    buffer with OUT_GUARD NaN elements on each side (torch.empty's own contents: NaN), so that a kernel's
    store past the end of its output lands where `outside` sees it."""
    made = {name: getattr(torch, name) for name in ("empty", "empty_like", "zeros", "zeros_like")}

    def guarded(name):
        def make(*args, **kwargs):
            t = made[name](*args, **kwargs)
            if "out" in kwargs or not t.is_floating_point() or t.numel() == 0 or t.requires_grad:
                return t
            buf = made["empty"](t.numel() + 2 * OUT_GUARD, dtype=t.dtype, device=t.device)  # [numel + guards]
            buf.fill_(float("nan"))
            view = buf[OUT_GUARD : OUT_GUARD + t.numel()].view(t.shape)                       # t's shape
            return view.zero_() if name.startswith("zeros") else view
        return make

    try:
        for name in made:
            setattr(torch, name, guarded(name))
        yield
    finally:
        for name, fn in made.items():
            setattr(torch, name, fn)


def check(case: Case, expected: dict, got: dict) -> Outcome:
    """Exercise 125's check, with the kernel's side of its hints: masked loads, the table's stride, the online
    softmax; first, the kernel's launch and the guard memory around the output; last, on the CPU, that the
    kernel stored every element of out."""
    no_kernel = not_launched(got)
    if no_kernel is not None:
        return no_kernel
    outside_out = wrote_outside(got, "mask the store: query heads past G and dims past D are not this "
                                "program's (BLOCK_G and BLOCK_D are padded past them); the last head's extra "
                                "rows lie past out")
    if outside_out is not None:
        return outside_out
    from .attention_checks import check_attention  # the judge's only (the answer is in it)

    outcome = check_attention(case, expected, got)
    if outcome.passed:
        return written_outside_the_kernel(got, every_element("out", expected["out"])) or outcome
    if outcome.hint:
        outcome.hint = attention_kernel_hint(case.args, expected["out"], got["out"], outcome.hint,
                                             GARBAGE_IN_A_KERNEL)
    return outcome


GARBAGE_IN_A_KERNEL = GARBAGE + (". In a kernel: mask the K/V loads, and the block-table load, at positions "
                                 ">= context_len (block -1 lies just before the cache)")


# ----------------------------------------------------------------------------------------------------------
# the benchmark (kernel_harness): the submission timed in the child, the library's kernel in the parent

BENCH = {f"B={B} x 4096 tokens": B for B in (1, 8, 64)}


def bench(ns, device: str, mark=None) -> dict:
    """Decode of B sequences of 4096 tokens, bf16, H = 32, H_kv = 8, D = 128, block size 16."""
    return bench_submission(ns, device, sys.modules[__name__], 131, mark)


def bench_report(figures: dict, device: str) -> dict:
    return _bench_report(figures, device, sys.modules[__name__], 131)


def bench_inputs(label: str, device: str = "cuda", L: int = 4096, seed: int | None = None):
    """(arguments, bytes moved) of one benchmark shape, the same in every process for one seed (default B;
    drawn on the device)."""
    B, H, H_kv, D, S = BENCH[label], 32, 8, 128, 16
    M = L // S
    gen = torch.Generator(device=device).manual_seed(B if seed is None else seed)
    q = torch.randn(B, H, D, device=device, generator=gen).bfloat16()                      # [B, H, D]
    k_cache = torch.randn(B * M, S, H_kv, D, device=device, generator=gen).bfloat16()      # [N, S, H_kv, D]
    v_cache = torch.randn(B * M, S, H_kv, D, device=device, generator=gen).bfloat16()
    tables = torch.randperm(B * M, device=device, generator=gen).view(B, M).to(torch.int32)  # [B, M]
    lens = torch.full((B,), L, dtype=torch.int32, device=device)                           # [B]
    return (q, k_cache, v_cache, tables, lens, D**-0.5), bytes_moved(B, L, H, H_kv, D)


def work(label: str) -> int:
    """Bytes one call moves on a benchmark shape (speed.py's bar: against the copy bandwidth)."""
    return bytes_moved(BENCH[label])


def bytes_moved(B: int, L: int = 4096, H: int = 32, H_kv: int = 8, D: int = 128) -> int:
    """K and V read once, q read and out written, bf16."""
    return 2 * B * L * H_kv * D * 2 + 2 * B * H * D * 2


def bench_correct(fn, args) -> bool:
    """`fn`'s output against fp32 SDPA on the gathered K/V (full tables), relative error under 2e-2."""
    q, k_cache, v_cache, tables, lens, scale = args
    B, H, D = q.shape
    H_kv = k_cache.shape[2]
    out = fn(*args).float()                                          # [B, H, D]
    k, v = (c[tables.long()].flatten(1, 2).transpose(1, 2).float()   # [B, M, S, H_kv, D] -> [B, H_kv, L, D]
            for c in (k_cache, v_cache))
    qg = q.float().view(B, H_kv, H // H_kv, D)                       # [B, H_kv, G, D]: the group as queries
    ref = torch.nn.functional.scaled_dot_product_attention(qg, k, v, scale=scale).reshape(B, H, D)
    return bool((out - ref).norm() / ref.norm() < 2e-2)


def library_kernel():
    """The library's unchecked launcher, its configuration chosen once per shape."""
    from pagedkv_lib.kernels.triton_decode_attention import choose_config, launch_decode_attention

    num_sms, configs = torch.cuda.get_device_properties(0).multi_processor_count, {}

    def launch(q, k_cache, v_cache, tables, lens, scale):
        shape = (*q.shape, k_cache.shape[2], tables.shape[1] * k_cache.shape[1])  # B, H, D, H_kv, max tokens
        if shape not in configs:
            B, H, D, H_kv, tokens = shape
            configs[shape] = choose_config(B, H, H_kv, D, tokens, num_sms=num_sms, interpreted=False)
        return launch_decode_attention(q, k_cache, v_cache, tables, lens, scale, configs[shape])

    return launch
