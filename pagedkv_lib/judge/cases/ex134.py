"""Cases of exercise 134, FP8 KV cache: `store_kvcache_fp8` (every cache byte compared exactly) and
`gather_kv_dequant` (compared at atol 0, rtol torch.finfo(dtype).eps).

Caches start as random bytes, NaN encodings (0x7F, 0xFF) included, so that a byte written by mistake or a
garbage row read by mistake shows; they are drawn as uint8, which `run` views as float8_e4m3fn. Keys and
values are drawn so that x / scale spans e4m3's whole range: subnormals, the top binade, past +-448
(saturation), and the rounding boundaries where x * (1 / scale) lands on the neighbouring byte. On a failure
the check recomputes the usual wrong variants (multiply instead of divide, by the reciprocal, the scale twice
or not at all, divided in bf16, saturated at 240 or before dividing, -1 followed, K and V swapped) in plain
torch and names the one the submission matches.

Clauses of the contract -> the fixed case that holds each:
    store: x / scale, saturated at +-448 after it      store/saturation_at_448_times_scale
           divided in float32, not in key's dtype      store/scale_not_1_bf16
           divided, not multiplied by 1 / scale        store/x_over_scale_at_rounding_boundaries
           slot -1 skipped, other bytes untouched      store/slot_minus_one_skipped (every byte compared)
           k_scale for keys, v_scale for values        store/k_and_v_scales_differ
           views into a fused qkv                      store/*_qkv_slices_not_contiguous
           inputs read-only                            store/fp32_qkv_slices_not_contiguous (a view)
           ValueError for a scale <= 0, NaN or inf,    store/negative_k_scale_raises, zero_v_scale_raises,
           before anything is written                  nan_k_scale_raises, inf_v_scale_raises
    gather: byte * scale, rounded to dtype             gather/last_partial_block, one_token (bf16)
           context_len rows through the table          gather/last_partial_block (garbage after them)
           ValueError for a scale <= 0, NaN or inf     gather/zero_, negative_, nan_, inf_scale_raises
Shapes: docs/conventions.md.
"""
from __future__ import annotations

import random

import torch

from pagedkv_lib.judge.cases.compare import show
from pagedkv_lib.judge.outcome import Outcome, clip

from . import Case, fresh, observe
from .ex124 import split_qkv

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
_VALUE_ERROR = ValueError     # the class, taken before any submission loads: an instance of it is the promise
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
SATURATION = [448.0, 449.0, 460.0, 465.0, 500.0, 1000.0, 240.0, 300.0, 447.0, 0.3]   # x / scale, each +-
STORE = [  # name, N, S, H_kv, D, slot_mapping, dtype, qkv slices, k_scale, v_scale, values
    ("saturation_at_448_times_scale", 4, 4, 2, 10, [0, 5, 9, 14], "fp32", False, 0.25, 2.0, "saturate"),
    ("scale_not_1_bf16", 8, 4, 2, 8, [28, 29, 30, 31, 8, 9], "bf16", False, 0.037, 0.011, "wide"),
    ("slot_minus_one_skipped", 6, 4, 2, 4, [3, -1, 17, -1, 22], "fp32", False, 0.05, 0.02, "wide"),
    ("minus_one_and_the_last_row_free", 5, 4, 2, 4, [-1, 0, 7], "fp32", False, 0.3, 0.7, "wide"),
    ("k_and_v_scales_differ", 4, 4, 2, 8, [1, 2, 3, 12], "fp32", False, 0.01, 3.0, "wide"),
    ("fp16_keys", 8, 4, 2, 8, [28, 29, -1, 4, 5], "fp16", False, 0.125, 0.0625, "wide"),
    ("bf16_qkv_slices_not_contiguous", 8, 4, 2, 8, [1, 2, 3, 17, -1], "bf16", True, 0.2, 0.6, "saturate"),
    ("fp32_qkv_slices_not_contiguous", 8, 4, 2, 4, [3, 7, 11, -1, 30], "fp32", True, 1.7, 0.9, "wide"),
    ("tiny_values_subnormal", 4, 4, 2, 8, [0, 1, 2, 3, 4], "fp32", False, 0.5, 0.25, "tiny"),
    ("scale_1", 4, 4, 1, 8, [6, 2, 9], "bf16", False, 1.0, 1.0, "saturate"),
    ("block_size_1", 9, 1, 2, 4, [8, 3, 0, 5], "fp16", False, 0.02, 0.03, "wide"),
    ("block_size_256", 3, 256, 1, 4, [767, 256, 0, 255, 512, -1], "bf16", False, 0.4, 0.05, "wide"),
    ("x_over_scale_at_rounding_boundaries", 8, 4, 2, 8, [5, 30, 2, 17, 8, 11, 23, 0, 19], "fp32", False,
     1.301726222038269, 0.011, "boundary"),
    ("negative_k_scale_raises", 4, 4, 2, 4, [1, 2], "fp32", False, -0.5, 0.5, "wide"),
    ("zero_v_scale_raises", 4, 4, 2, 4, [1, 2], "fp32", False, 0.5, 0.0, "wide"),
    ("nan_k_scale_raises", 4, 4, 2, 4, [1, 2], "fp32", False, float("nan"), 0.5, "wide"),
    ("inf_v_scale_raises", 4, 4, 2, 4, [1, 2], "fp32", False, 0.5, float("inf"), "wide"),
]
GATHER = [  # name, N, S, H_kv, D, context_len, extra -1 padding, dtype, scale
    ("last_partial_block", 6, 4, 2, 4, 7, 1, "fp32", 0.37),
    ("exact_block_boundary", 6, 4, 2, 4, 8, 2, "fp32", 0.37),
    ("one_token", 4, 4, 2, 4, 1, 3, "bf16", 0.05),
    ("block_size_1", 12, 1, 2, 4, 9, 2, "fp16", 0.02),
    ("block_size_16_129_tokens", 12, 16, 2, 4, 129, 1, "bf16", 0.011),
    ("block_size_256", 3, 256, 1, 4, 257, 1, "fp32", 3.0),
    ("fp16_scale_not_1", 8, 4, 2, 8, 13, 2, "fp16", 0.0625),
    ("bf16_scale_not_1", 8, 4, 3, 5, 10, 0, "bf16", 2.5),
    ("scale_1", 5, 4, 2, 4, 6, 1, "fp32", 1.0),
    ("zero_scale_raises", 4, 4, 2, 4, 5, 1, "fp32", 0.0),
    ("negative_scale_raises", 4, 4, 2, 4, 5, 1, "fp32", -0.25),
    ("nan_scale_raises", 4, 4, 2, 4, 5, 1, "fp32", float("nan")),
    ("inf_scale_raises", 4, 4, 2, 4, 5, 1, "fp32", float("inf")),
]


def build(seed: int, device: str = "cpu") -> list[Case]:
    rng = random.Random(f"134/{seed}")
    cases = [_store_case(f"fixed/store/{name}", *rest, seed=i) for i, (name, *rest) in enumerate(STORE)]
    cases += [_gather_case(f"fixed/gather/{name}", *rest, seed=50 + i)
              for i, (name, *rest) in enumerate(GATHER)]
    for i in range(6):
        N, S = rng.randint(2, 10), rng.choice([1, 4, 16, 256])
        slots = rng.sample(range(N * S), rng.randint(1, min(N * S, 30)))
        slots = [-1 if rng.random() < 0.15 else s for s in slots]
        cases.append(_store_case(f"random/store/{i}", N, S, rng.randint(1, 4), rng.choice([4, 8, 16]), slots,
                                 rng.choice(list(DTYPES)), rng.random() < 0.3, round(rng.uniform(0.01, 3), 4),
                                 round(rng.uniform(0.01, 3), 4), rng.choice(["wide", "saturate"]),
                                 seed=100 + i))
    for i in range(6):
        S = rng.choice([1, 4, 16, 256])
        n = rng.randint(1, 3 * S + 5)
        N = -(-n // S) + rng.randint(0, 3)
        cases.append(_gather_case(f"random/gather/{i}", N, S, rng.randint(1, 4), rng.choice([4, 8, 16]), n,
                                  rng.randint(0, 3), rng.choice(list(DTYPES)), round(rng.uniform(0.01, 3), 4),
                                  seed=200 + i))
    return cases


def _garbage(shape, g) -> torch.Tensor:
    """Random bytes (uint8; viewed as fp8 they are every e4m3 value, NaN encodings included)."""
    return torch.randint(0, 256, shape, generator=g, dtype=torch.uint8)


def _store_case(name, N, S, H_kv, D, slots, dtype, strided, k_scale, v_scale, values, seed) -> Case:
    g = torch.Generator().manual_seed(seed)
    T, H = len(slots), 2 * H_kv
    qkv = torch.randn(T, (H + 2 * H_kv) * D, generator=g)                     # [T, (H + 2 H_kv) D] fp32
    k_part, v_part = qkv[:, H * D : (H + H_kv) * D], qkv[:, (H + H_kv) * D :]  # [T, H_kv D] views
    for part, scale in ((k_part, k_scale), (v_part, v_scale)):
        s = abs(scale) if 0 < abs(scale) < float("inf") else 1.0
        if values == "boundary":                                               # x / scale at boundaries
            found = rounding_boundaries(scale)                                 # [n] fp32, > 0
            signs = torch.tensor([1.0, -1.0]).repeat(found.numel())[: found.numel()]   # [n] +-, alternating
            idx = torch.arange(found.numel())                                  # [n] the first n elements
            part[idx // part.shape[1], idx % part.shape[1]] = found * signs
            continue
        if values == "tiny":
            part.mul_(0.01 * s)                                                # x / scale in the subnormals
        else:
            part.mul_(150 * s)                                                 # x / scale up to ~600
        if values == "saturate":                                               # the boundary values
            special = torch.tensor(SATURATION + [-v for v in SATURATION]) * s  # [20]
            idx = torch.randperm(part.numel(), generator=g)[: special.numel()]
            part[idx // part.shape[1], idx % part.shape[1]] = special[: idx.numel()]
    args = {"fn": "store_kvcache_fp8", "qkv": qkv.to(DTYPES[dtype]), "H": H, "H_kv": H_kv, "D": D,
            "strided": strided, "k_cache": _garbage((N, S, H_kv, D), g),
            "v_cache": _garbage((N, S, H_kv, D), g),
            "slot_mapping": torch.tensor(slots, dtype=torch.int32), "k_scale": k_scale, "v_scale": v_scale}
    layout = " (views into a fused qkv tensor, not contiguous)" if strided else ""
    reach = [float(p.abs().max()) / (abs(sc) if 0 < abs(sc) < float("inf") else 1.0)
             for p, sc in ((k_part, k_scale), (v_part, v_scale))]
    lines = [f"store_kvcache_fp8(key, value, k_cache, v_cache, slot_mapping, k_scale={k_scale}, "
             f"v_scale={v_scale}), block_size {S}:",
             f"key, value: shape [{T}, {H_kv}, {D}] {dtype}{layout}; largest |key / k_scale| {reach[0]:.4g}, "
             f"|value / v_scale| {reach[1]:.4g}",
             f"k_cache, v_cache: shape {[N, S, H_kv, D]} float8_e4m3fn (random bytes, NaN encodings "
             "included)",
             f"slot_mapping = {show(slots)}"]
    if values == "boundary":
        lines.insert(2, "the first elements of key and value, either sign: x / scale at e4m3 rounding "
                        "boundaries, where x * (1 / scale) rounds to the neighbouring byte")
    return Case(name, args, lines)


def rounding_boundaries(scale: float) -> torch.Tensor:
    """fp32 values x > 0 where x / scale and x * (1 / scale) quantize to different e4m3 bytes: the fp32
    neighbours of each midpoint between two e4m3 values, times the scale, where the reciprocal (rounded to
    fp32 first) lands on the other side of the midpoint."""
    codes = torch.arange(0, 0x7F, dtype=torch.uint8).view(FP8).float()        # [127] every finite e4m3 >= 0
    x = (codes[1:] + codes[:-1]) / 2 * scale                                  # [126] midpoints, times scale
    up, down = torch.tensor(float("inf")), torch.tensor(float("-inf"))
    near, above, below = [x], x, x
    for _ in range(3):                                                        # 3 fp32 steps either side
        above, below = torch.nextafter(above, up), torch.nextafter(below, down)
        near += [above, below]
    x = torch.stack(near, 1)                                                  # [126, 7]

    def byte(y):
        return y.clamp(-FP8_MAX, FP8_MAX).to(FP8).view(torch.uint8)

    return x[byte(x / scale) != byte(x * (1 / scale))]                        # [n]


def _gather_case(name, N, S, H_kv, D, context_len, padding, dtype, scale, seed) -> Case:
    g = torch.Generator().manual_seed(seed)
    need = -(-context_len // S)
    table = torch.randperm(N, generator=g)[:need].tolist() + [-1] * padding
    cache = _garbage((N, S, H_kv, D), g)                                        # [N, S, H_kv, D]
    finite = torch.randint(0, 127, (need * S, H_kv, D), generator=g, dtype=torch.uint8)   # 0x00..0x7E
    finite |= torch.randint(0, 2, finite.shape, generator=g, dtype=torch.uint8) << 7        # either sign
    cache[table[:need]] = finite.view(need, S, H_kv, D)
    args = {"fn": "gather_kv_dequant", "cache": cache, "block_table": torch.tensor(table, dtype=torch.int32),
            "context_len": context_len, "scale": scale, "dtype": dtype}
    lines = [f"gather_kv_dequant(cache, block_table, context_len={context_len}, scale={scale}, "
             f"dtype={DTYPES[dtype]}), block_size {S}:",
             f"cache: shape {[N, S, H_kv, D]} float8_e4m3fn (rows outside the context: random bytes, NaN "
             "encodings included)",
             f"block_table = {show(table)}"]
    return Case(name, args, lines)


def run(ns, case: Case) -> dict:
    a = fresh(case.args)
    raised = None
    if a["fn"] == "store_kvcache_fp8":
        key, value = split_qkv(a)
        try:
            ns["store_kvcache_fp8"](key, value, a["k_cache"].view(FP8), a["v_cache"].view(FP8),
                                    a["slot_mapping"], k_scale=a["k_scale"], v_scale=a["v_scale"])
        except Exception as exc:
            if not issubclass(type(exc), _VALUE_ERROR):       # another error: the case's runtime error
                raise
            raised = clip(f"ValueError: {exc}", 300)
        return {"raised": raised, "caches": observe([a["k_cache"], a["v_cache"]]),
                "inputs": observe([a["qkv"], a["slot_mapping"]])}
    out = None
    try:
        out = ns["gather_kv_dequant"](a["cache"].view(FP8), a["block_table"], a["context_len"], a["scale"],
                                      DTYPES[a["dtype"]])
    except Exception as exc:
        if not issubclass(type(exc), _VALUE_ERROR):
            raise
        raised = clip(f"ValueError: {exc}", 300)
    return {"raised": raised, "out": observe(out), "inputs": observe([a["cache"], a["block_table"]])}


def check(case: Case, expected: dict, got: dict) -> Outcome:
    from .ex134_checks import check_fp8  # the judge's only: its variants without a mistake are the answer

    return check_fp8(case, expected, got)
