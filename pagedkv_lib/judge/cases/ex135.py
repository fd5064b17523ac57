"""Cases of exercise 135, the Triton primer's puzzles: four launchers, each with its kernel, graded against
the PyTorch specs of pagedkv_lib.kernels.triton_primer.

Every `out` is a view between NaN guard rows (kernel_harness.guarded) and starts as NaN, so a write past it
and an element never written are both seen. Inputs are views into buffers whose guard rows and spare
columns hold POISON (-4096), so a read past a row, a read of row -1 and a read with the wrong stride each
leave a recognisable value (around the scores' q and k: NaN, which no zero in a dot cancels). Sizes are never
multiples of the blocks (W = 13, M x N = 37 x 21, ...).

Clauses of the contract -> the fixed case that holds each:
    gather_rows: out[t] = src[index[t]]                    gather/worked_example, gather/repeated_and_reversed
                 index -1 gives a row of zeros             gather/minus_one_rows_are_zeros
                 rows src.stride(0) apart                  gather/src_is_a_column_slice
                 nothing written past out (mask the row)   gather/row_of_13_ends_out (guard after out)
    scale_columns: x * w in fp32, rounded once             scale/contiguous_37x21, scale/bf16_transposed
                 any strides (a transposed view, a slice)  scale/transposed_view, scale/column_slice
                 every tile written (cdiv grid)            scale/contiguous_37x21, scale/short_and_wide
    row_softmax: softmax of x[r, :n] in fp32               softmax/worked_example, softmax/long_rows
                 masked lanes do not count (other=-inf)    softmax/worked_example, softmax/very_negative
                 nothing read past n (garbage NaN there)   softmax/garbage_after_the_length
                 zeros after n, a row of length 0 zeros    softmax/empty_rows
                 a loop to a bound loaded from memory      softmax/long_rows (rows longer than any block)
                 rows x.stride(0) apart                    softmax/row_stride_wider_than_the_row
    scores:      q @ k^T in fp32                           scores/worked_example, scores/gqa_group_of_4
                 any strides (k a transposed view)         scores/k_transposed
                 every tl.dot dimension >= 16              scores/gqa_group_of_4 (on the CPU every Triton
                                                           exercise runs under triton_primer.gpu_dot_rule:
                                                           triton_primer.DOT_RULE)
                 the tile made by tl.dot (a "how" clause)  scores/worked_example (the interpreter counts
                                                           the tl.dot it runs; on the CPU only)
                 q's and k's padding loaded as 0, not read scores/gqa_group_of_4 (the spare columns next
                                                           to q's rows and k's hold NaN: 0 x NaN is NaN)
    every element of out stored by the kernel              every case on the CPU (kernel_harness.
                                                           recording_stores; CPU_ONLY)
    inputs read-only                                       every case (fingerprints)
    the work done by the launcher's kernel                 every case (kernel_harness.call counts launches)

Device "cpu": Triton's interpreter, small shapes; "cuda": natively, larger ones (a GPU has no dot rule to
apply: the native compiler is the rule).
"""
from __future__ import annotations

import random

import torch

from pagedkv_lib.judge import registry
from pagedkv_lib.judge.cases.compare import close, show
from pagedkv_lib.judge.outcome import Outcome, wrong

from . import Case, fresh, observe
from .kernel_harness import CPU_ONLY as CPU_ONLY  # the clause only the CPU cases check (the report reads it)
from .kernel_harness import (
    call,
    every_element,
    fingerprint,
    guarded,
    loaded,
    not_launched,
    raw_bf16_bits,
    stored_elements,
    to_device,
    where,
    wild_writes,
    written_outside_the_kernel,
    wrote_outside,
)

POISON = -4096.0                     # exact in fp16 and bf16: what a read outside the data returns
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
PUZZLES = ("gather_rows", "scale_columns", "row_softmax", "scores")
GATHER = [  # name, R, W, index, dtype, spare columns on each side of src's rows (0: contiguous rows)
    ("worked_example", 2, 3, [1, -1, 0], "fp32", 0),
    ("row_of_13_ends_out", 6, 13, [5, 0, 3, 2, 5], "fp32", 0),
    ("minus_one_rows_are_zeros", 5, 10, [-1, 2, -1, 0, -1], "fp32", 0),
    ("src_is_a_column_slice", 7, 9, [6, 1, 4, 0, 3], "fp16", 5),
    ("repeated_and_reversed", 5, 20, [4, 4, 3, 2, 1, 0], "bf16", 0),
    ("one_column", 4, 1, [3, -1, 1], "fp32", 2),
]
SCALE = [  # name, M, N, layout ("contiguous", "transposed", "slice"), dtype
    ("contiguous_37x21", 37, 21, "contiguous", "fp32"),
    ("transposed_view", 37, 21, "transposed", "fp32"),
    ("column_slice", 19, 45, "slice", "fp16"),
    ("bf16_transposed", 33, 18, "transposed", "bf16"),
    ("short_and_wide", 3, 70, "contiguous", "fp32"),
    ("one_column", 40, 1, "slice", "fp32"),
]
SOFTMAX = [  # name, lengths, C, values ("normal", "negative", "large"), dtype, spare columns after each row
    ("worked_example", [2], 3, "worked", "fp32", 0),
    ("garbage_after_the_length", [5, 17, 1], 40, "normal", "fp32", 0),
    ("long_rows", [150, 97, 129], 150, "large", "fp32", 0),
    ("very_negative", [7, 31, 20], 50, "negative", "fp32", 0),
    ("empty_rows", [0, 4, 0], 9, "normal", "fp32", 0),
    ("row_stride_wider_than_the_row", [11, 6, 23, 23], 23, "normal", "fp16", 9),
    ("bf16", [30, 1, 12], 31, "normal", "bf16", 3),
]
SCORES = [  # name, M, N, D, k layout ("rows", "transposed", "cache_head"), dtype
    ("worked_example", 1, 3, 2, "rows", "fp16"),
    ("gqa_group_of_4", 4, 37, 24, "rows", "fp16"),
    ("k_transposed", 3, 50, 16, "transposed", "bf16"),
    ("keys_of_one_kv_head", 8, 45, 20, "cache_head", "bf16"),
    ("sixteen_rows", 16, 17, 40, "rows", "fp16"),
]
CUDA = {  # the "cuda" case set: larger shapes, natively
    "gather_rows": [("4096_rows_of_1000", 3000, 1000, 4096, "bf16", 24)],
    "scale_columns": [("2000x3000_transposed", 2000, 3000, "transposed", "bf16"),
                      ("777x1023_slice", 777, 1023, "slice", "fp32")],
    "row_softmax": [("512_rows_up_to_5000", 512, 5000, "fp32"), ("300_rows_bf16", 300, 1500, "bf16")],
    "scores": [("gqa_4_x_4096_keys", 4, 4096, 128, "cache_head", "bf16"),
               ("16_x_1000_transposed", 16, 1000, 80, "transposed", "fp16")],
}


def build(seed: int, device: str = "cpu") -> list[Case]:
    cases = _cuda_cases(seed) if device == "cuda" else _cpu_cases(seed)
    for case in cases:
        case.args["device"] = device
    return cases


def _cpu_cases(seed: int) -> list[Case]:
    rng = random.Random(f"135/{seed}")
    cases = [_gather(f"fixed/gather/{n}", *rest, seed=i) for i, (n, *rest) in enumerate(GATHER)]
    cases += [_scale(f"fixed/scale/{n}", *rest, seed=20 + i) for i, (n, *rest) in enumerate(SCALE)]
    cases += [_softmax(f"fixed/softmax/{n}", *rest, seed=40 + i) for i, (n, *rest) in enumerate(SOFTMAX)]
    cases += [_scores(f"fixed/scores/{n}", *rest, seed=60 + i) for i, (n, *rest) in enumerate(SCORES)]
    for i in range(2):
        R, W = rng.randint(1, 9), rng.randint(1, 40)
        index = [rng.randint(-1, R - 1) for _ in range(rng.randint(1, 20))]
        cases.append(_gather(f"random/gather/{i}", R, W, index, rng.choice(list(DTYPES)), rng.randint(0, 4),
                             seed=100 + i))
        cases.append(_scale(f"random/scale/{i}", rng.randint(1, 50), rng.randint(1, 50),
                            rng.choice(["contiguous", "transposed", "slice"]), rng.choice(list(DTYPES)),
                            seed=110 + i))
        C = rng.randint(1, 90)
        lengths = [rng.randint(0, C) for _ in range(rng.randint(1, 6))]
        cases.append(_softmax(f"random/softmax/{i}", lengths, C, rng.choice(["normal", "large"]),
                              rng.choice(list(DTYPES)), rng.randint(0, 5), seed=120 + i))
        cases.append(_scores(f"random/scores/{i}", rng.randint(1, 16), rng.randint(1, 60), rng.randint(1, 40),
                             rng.choice(["rows", "transposed", "cache_head"]), rng.choice(["fp16", "bf16"]),
                             seed=130 + i))
    return cases


def _cuda_cases(seed: int) -> list[Case]:
    cases = []
    for name, R, W, T, dtype, spare in CUDA["gather_rows"]:
        g = torch.Generator().manual_seed(1000 * seed + 1)
        index = torch.randint(-1, R, (T,), generator=g).tolist()
        cases.append(_gather(f"cuda/gather/{name}", R, W, index, dtype, spare, seed=1000 * seed + 2))
    for i, (name, M, N, layout, dtype) in enumerate(CUDA["scale_columns"]):
        cases.append(_scale(f"cuda/scale/{name}", M, N, layout, dtype, seed=1000 * seed + 10 + i))
    for i, (name, R, C, dtype) in enumerate(CUDA["row_softmax"]):
        g = torch.Generator().manual_seed(1000 * seed + 20 + i)
        lengths = torch.randint(0, C + 1, (R,), generator=g).tolist()
        cases.append(_softmax(f"cuda/softmax/{name}", lengths, C, "large", dtype, 7,
                              seed=1000 * seed + 30 + i))
    for i, (name, M, N, D, layout, dtype) in enumerate(CUDA["scores"]):
        cases.append(_scores(f"cuda/scores/{name}", M, N, D, layout, dtype, seed=1000 * seed + 40 + i))
    return cases


# ----------------------------------------------------------------------------------------------------------
# inputs: views into POISON-padded buffers; outputs: NaN between NaN guards

def _padded_rows(data: torch.Tensor, spare: int, fill: float = POISON) -> torch.Tensor:
    """`data` [R, W] as a view into a buffer [R + 2, W + 2 * spare] of `fill`: a guard row before and after,
    and `spare` columns on each side of every row (then rows are W + 2 * spare apart)."""
    R, W = data.shape
    buf = torch.full((R + 2, W + 2 * spare), fill, dtype=data.dtype)            # [R + 2, W + 2 spare]
    buf[1 : R + 1, spare : spare + W] = data
    return buf[1 : R + 1, spare : spare + W]                                    # [R, W] a view


def _nan_out(shape, dtype) -> torch.Tensor:
    return guarded(torch.full(shape, float("nan"), dtype=dtype))


def _gather(name, R, W, index, dtype, spare, seed) -> Case:
    g = torch.Generator().manual_seed(seed)
    data = torch.arange(1, R * W + 1, dtype=torch.float32).view(R, W) if name.endswith("worked_example") \
        else torch.randn(R, W, generator=g)
    src = _padded_rows(data.to(DTYPES[dtype]), spare)                           # [R, W]
    args = {"fn": "gather_rows", "src": src, "index": torch.tensor(index, dtype=torch.int32),
            "out": _nan_out((len(index), W), DTYPES[dtype])}
    lines = [f"gather_rows_triton(src, index, out): src [{R}, {W}] {dtype}, rows {src.stride(0)} elements "
             f"apart{' (a column slice of a wider tensor)' if spare else ''}",
             f"index = {show(index)}",
             f"out: [{len(index)}, {W}], starts as NaN, between NaN guard rows"]
    return Case(name, args, lines)


def _scale(name, M, N, layout, dtype, seed) -> Case:
    g = torch.Generator().manual_seed(seed)
    dt = DTYPES[dtype]
    data = torch.randn(M, N, generator=g)
    if layout == "transposed":
        x = _padded_rows(data.T.contiguous().to(dt), 0).T                      # [M, N] strides (1, M)
    else:
        x = _padded_rows(data.to(dt), 3 if layout == "slice" else 0)           # [M, N]
    w = (torch.randn(N, generator=g) * 2).to(dt)
    args = {"fn": "scale_columns", "x": x, "w": w, "out": _nan_out((M, N), dt)}
    lines = [f"scale_columns_triton(x, w, out): x [{M}, {N}] {dtype}, strides {x.stride()} ({layout})",
             f"w: [{N}] {dtype}; out: [{M}, {N}], starts as NaN, between NaN guard rows"]
    return Case(name, args, lines)


def _softmax(name, lengths, C, values, dtype, spare, seed) -> Case:
    g = torch.Generator().manual_seed(seed)
    dt, R = DTYPES[dtype], len(lengths)
    if values == "worked":
        data = torch.tensor([[0.0, float(torch.log(torch.tensor(3.0))), 0.0]])
    else:
        data = torch.randn(R, C, generator=g) * {"normal": 2.0, "negative": 30.0, "large": 8.0}[values]
        if values == "negative":
            data = data.abs().neg() - 250.0                                     # exp(x) underflows in fp32
    for r, n in enumerate(lengths):                                              # garbage after each length
        data[r, n:] = torch.tensor([float("nan"), float("inf"), 1e4])[torch.arange(C - n) % 3]
    x = _pad_after(data.to(dt), spare)                                          # [R, C] rows C + spare apart
    args = {"fn": "row_softmax", "x": x, "lengths": torch.tensor(lengths, dtype=torch.int32),
            "out": _nan_out((R, C), dt)}
    lines = [f"row_softmax_triton(x, lengths, out): x [{R}, {C}] {dtype}, rows {x.stride(0)} elements apart; "
             "past each length: nan, inf, 1e4, ...",
             f"lengths = {show(lengths)}" + (" (scores around -250..-300)" if values == "negative" else ""),
             f"out: [{R}, {C}], starts as NaN, between NaN guard rows"]
    return Case(name, args, lines)


def _pad_after(data: torch.Tensor, spare: int) -> torch.Tensor:
    """`data` [R, C] with `spare` POISON columns after each row, and POISON guard rows: rows C + spare
    apart."""
    R, C = data.shape
    buf = torch.full((R + 2, C + spare), POISON, dtype=data.dtype)
    buf[1 : R + 1, :C] = data
    return buf[1 : R + 1, :C]


def _scores(name, M, N, D, layout, dtype, seed) -> Case:
    g = torch.Generator().manual_seed(seed)
    dt = DTYPES[dtype]
    if name.endswith("worked_example"):
        q, keys = torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    else:
        q, keys = torch.randn(M, D, generator=g), torch.randn(N, D, generator=g)
    nan = float("nan")          # around q and k: a padded lane read from memory is NaN, which no 0 cancels
    q = _padded_rows(q.to(dt), 2, nan)                                          # [M, D] rows D + 4 apart
    if layout == "transposed":
        k = _padded_rows(keys.T.contiguous().to(dt), 0, nan).T                  # [N, D] strides (1, N)
    elif layout == "cache_head":
        H_kv = 3
        cache = torch.randn(N, H_kv, D, generator=g)                            # [N, H_kv, D] a cache's rows
        cache[:, 1] = keys
        k = _padded_rows(cache.view(N, H_kv * D).to(dt), 0, nan).view(N, H_kv, D)[:, 1]   # [N, D] head 1
    else:
        k = _padded_rows(keys.to(dt), 0, nan)                                   # [N, D]
    args = {"fn": "scores", "q": q, "k": k, "out": _nan_out((M, N), torch.float32)}
    lines = [f"scores_triton(q, k, out): q [{M}, {D}] {dtype} strides {q.stride()}, k [{N}, {D}] strides "
             f"{k.stride()} ({layout})",
             f"out: [{M}, {N}] float32, starts as NaN, between NaN guard rows"]
    return Case(name, args, lines)


# ----------------------------------------------------------------------------------------------------------
# run

INPUTS = {"gather_rows": ("src", "index"), "scale_columns": ("x", "w"), "row_softmax": ("x", "lengths"),
          "scores": ("q", "k")}


def run(ns, case: Case) -> dict:
    puzzle = case.args["fn"]
    name = f"{puzzle}_triton"
    oracle = loaded(registry.get(135).oracle[name])        # None in the child
    device = where(ns, name, oracle, case.args["device"])
    a = fresh(case.args)
    inputs = [to_device(a[k], device) for k in INPUTS[puzzle]]
    out = to_device(a["out"], device)
    _, launches, dots, stores = call(ns, name, oracle, *inputs, out)   # under the GPU's tl.dot rule
    return {"out": observe(out), "wild_writes": wild_writes("out", out),
            "inputs": [fingerprint(t) for t in inputs], "launches": launches, "dots": dots,
            "stored": None if stores is None else {"out": stored_elements(stores, out)}}


# ----------------------------------------------------------------------------------------------------------
# check

TOLERANCE = {  # puzzle -> (atol, rtol as a multiple of the output dtype's eps, or an absolute rtol)
    "gather_rows": (0.0, 0.0), "scale_columns": (0.0, 1.0), "row_softmax": (1e-6, 1.0),
    "scores": (1e-4, None),
}


OBSERVED = {"out", "wild_writes", "inputs", "launches", "dots", "stored"}   # the keys of run's observation


def check(case: Case, expected: dict, got: dict) -> Outcome:
    puzzle = case.args["fn"]
    if not isinstance(got, dict) or set(got) != OBSERVED:
        return wrong(f"expected an observation of out, got {show(got)}")
    no_kernel = not_launched(got)
    if no_kernel is not None:
        return no_kernel
    if puzzle == "scores" and got["dots"] == 0:                  # counted in the interpreter only
        return wrong("scores_triton's kernel ran no tl.dot",
                     "the puzzle rehearses tl.dot: the scores tile is tl.dot(q, tl.trans(k)), on tiles "
                     "padded to 16 (a sum of products gives the same numbers, but not on the GPU's tensor "
                     "cores, which the puzzle is about)")
    outside_out = wrote_outside(got, _store_hint(case, got["wild_writes"]))
    if outside_out is not None:
        return outside_out
    if got["inputs"] != expected["inputs"]:
        return wrong(f"an input changed: {', '.join(INPUTS[puzzle])} are read-only", "write only into out")
    e, g = expected["out"], got["out"]
    atol, rtol = TOLERANCE[puzzle]
    rtol = 1e-4 if rtol is None else rtol * (torch.finfo(e.dtype).eps if e.is_floating_point() else 0.0)
    outcome = close("out", e, g, atol, rtol)
    if outcome.passed:
        return written_outside_the_kernel(got, every_element("out", e)) or outcome
    if not isinstance(g, torch.Tensor) or g.shape != e.shape:
        return outcome
    outcome.hint = HINTS[puzzle](case, e, g)
    return outcome


STORE_MASK = {  # puzzle -> the hint for a store past the end of out
    "gather_rows": "mask the row: lanes W..BLOCK-1 of the last program write past out (offs < W)",
    "scale_columns": "mask the tile: rows with M, columns with N (the last tiles reach past out)",
    "row_softmax": "mask every store with the row's end C: the last step writes past out",
    "scores": "mask the store: rows with M, columns with N",
}


def _store_hint(case: Case, wild: list) -> str:
    """The hint for a store outside out, from where it landed (kernel_harness.wild_writes' lines): before
    out, in gather_rows with a -1 in the index, the row was addressed by index[t]; exactly one row of N
    after out in scale_columns, a row mask one too wide; else the puzzle's mask."""
    puzzle, text = case.args["fn"], " ".join(map(str, wild))
    if "before its first" in text:
        if puzzle == "gather_rows" and -1 in case.args["index"].tolist():
            return ("out was written before its first row: the store addressed out by index[t] (here -1); "
                    "program t writes row t of out, out_ptr + t * W + offs")
        return "a store's offset went below 0: out's element [i, j] is at i * N + j, i and j from 0"
    N = case.args["out"].shape[1]
    if puzzle == "scale_columns" and f" {N} element(s) written after" in text:
        return (f"exactly one row past out ({N} elements, row M): the row mask lets row M through (rows <= "
                "M); rows 0..M-1 are out's: mask rows < M")
    return STORE_MASK[puzzle]


def _never_written(e: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    return g.isnan() & ~e.isnan()


def _gather_hint(case: Case, e: torch.Tensor, g: torch.Tensor) -> str:
    a = case.args
    index, src = a["index"].tolist(), a["src"]
    bad = [t for t in range(len(index)) if not torch.equal(e[t], g[t])]
    t = bad[0]
    if index[t] == -1:
        if bool(g[t].isnan().all()):
            return "a row whose index is -1 must be written with zeros: out starts as garbage, not zeros"
        if bool((g[t] == POISON).any()):
            return ("index -1 was followed: its row is the memory before src (here POISON); load a safe row "
                    "in its place (row 0, say) and write zeros where the index is -1")
        return "index -1 gives a row of zeros"
    W = src.shape[1]
    packed = src.flatten() if src.is_contiguous() else _storage_from(src, W)
    if torch.equal(g[t].float(), packed[index[t] * W : index[t] * W + W].float()):
        return (f"src's rows are src.stride(0) = {src.stride(0)} elements apart here (a slice of a wider "
                f"tensor), not W = {W}: pass the stride and use it")
    if bool(_never_written(e, g)[t].any()):
        return "some of out was never written: one program per output row, grid (T,)"
    return "out[t] = src[index[t]]: load the row of index[t] (its W elements) and store it in row t"


def _storage_from(view: torch.Tensor, n: int) -> torch.Tensor:
    """The storage from the view's first element on, as a flat tensor (what a kernel that assumed
    contiguous rows would have read)."""
    flat = torch.empty(0, dtype=view.dtype).set_(view.untyped_storage())
    return flat[view.storage_offset() :]


def _scale_hint(case: Case, e: torch.Tensor, g: torch.Tensor) -> str:
    x, w = case.args["x"], case.args["w"]
    M, N = x.shape
    missing = _never_written(e, g)
    if bool(missing.any()):
        rows = sorted({int(i) for i in missing.nonzero()[:, 0]})
        cols = sorted({int(j) for j in missing.nonzero()[:, 1]})
        return (f"some of out was never written (rows {rows[0]}..{rows[-1]}, columns {cols[0]}..{cols[-1]}): "
                f"the grid needs triton.cdiv(M, BLOCK_M) x triton.cdiv(N, BLOCK_N) programs (M = {M}, "
                f"N = {N}),"
                " the last tiles masked")
    if not x.is_contiguous():
        packed = _storage_from(x, M * N)[: M * N].view(M, N)                     # read as if contiguous
        if torch.allclose(g.float(), (packed.float() * w.float()[None, :]), rtol=1e-2, atol=1e-3):
            return (f"x is a view with strides {x.stride()}: address x[i, j] at i * x.stride(0) + j * "
                    f"x.stride(1), not i * N + j")
    if raw_bf16_bits(e.dtype, g, e):
        return ("bf16 arithmetic is wrong in Triton's interpreter: convert with .to(tl.float32) before "
                "multiplying (the store rounds the fp32 product back)")
    return "out[i, j] = x[i, j] * w[j]: w is indexed by the column"


def _softmax_hint(case: Case, e: torch.Tensor, g: torch.Tensor) -> str:
    lengths = case.args["lengths"].tolist()
    for r, n in enumerate(lengths):
        if torch.allclose(g[r].float(), e[r].float(), atol=1e-3, rtol=1e-2, equal_nan=True):
            continue
        head, tail = g[r, :n].float(), g[r, n:].float()
        if bool(tail.isnan().any()) and not bool(head.isnan().any()):
            return f"out[{r}, {n}:] was never written: write zeros after the row's length (out starts as NaN)"
        if n == 0:
            return "a row of length 0 is all zeros: no exp(-inf - (-inf)) (= NaN) may reach out"
        row = case.args["x"][r, :n].float()
        without_max = _softmax_without_the_max(row)
        if bool(head.isnan().any()) and torch.allclose(head, without_max, atol=1e-3, rtol=1e-2,
                                                        equal_nan=True):
            return (f"row {r}'s scores lie far from 0 (max {float(row.max()):.4g}): "
                    "exp(x) alone underflows to 0 (or overflows), and exp(x) / sum = 0 / 0 = NaN, exactly "
                    "what came out: subtract the row's max first, exp(x - max). (If your kernel does, NaN "
                    "here can only come from reading past the length: mask the loads with offs < length)")
        if bool(head.isnan().any()):
            return (f"row {r} read past its length {n} (x holds nan, inf there): mask every load with "
                    "offs < length, not with the number of columns")
        if bool(tail.ne(0).any()):
            return f"out[{r}, {n}:] must be 0: only the first lengths[r] columns take part in the softmax"
        x = case.args["x"]
        if x.stride(0) != x.shape[1]:                             # rows read x.shape[1] apart instead?
            C = x.shape[1]
            packed = _storage_from(x, 0)[r * C : r * C + n].float()
            if torch.allclose(head, torch.softmax(packed, 0), rtol=1e-2, atol=1e-3):
                return (f"x's rows are x.stride(0) = {x.stride(0)} elements apart here, not C = {C}: "
                        "pass the "
                        "row stride and use it")
        total = float(head.sum())
        if total < 0.99:
            return (f"row {r} sums to {total:.4g}, not 1: masked lanes entered the max or the sum; load them "
                    "with other=float('-inf'), so that exp(-inf - max) = 0 (without other= they read 0)")
        if total > 1.01:
            return (f"row {r} sums to {total:.4g}, not 1: the max and the sum missed part of the row: loop "
                    f"over all of it in tiles of BLOCK up to n, n loaded from lengths (here {n})")
        return "softmax(x[r, :n]) = exp(x - max) / sum(exp(x - max)), computed in fp32"
    return "softmax(x[r, :n]) = exp(x - max) / sum(exp(x - max)), computed in fp32"


def _softmax_without_the_max(row: torch.Tensor) -> torch.Tensor:
    """exp(x) / sum(exp(x)) in fp32, the max not subtracted: [n]."""
    e = torch.exp(row.float())                                                  # [n]
    return e / e.sum()


def _scores_hint(case: Case, e: torch.Tensor, g: torch.Tensor) -> str:
    q, k = case.args["q"], case.args["k"]
    N, D = k.shape
    nan_cols = g.isnan().any(0)                                                  # [N]
    read_nan = ("a padded lane of q or k (past D, or rows past M or N) was read from memory, where NaN lies "
                "here: load the tiles masked with other=0.0 (a padded lane must be 0 in the dot, and 0 x NaN "
                "is NaN, while 0 x a finite value would have hidden it)")
    if bool(g.isnan().all()):
        return ("every element of out is NaN (as out starts), and this case cannot tell two causes apart: no "
                "program wrote it (the grid has triton.cdiv(N, BLOCK_N) programs), or " + read_nan)
    first = int(nan_cols.float().argmax())                                       # the first NaN column
    if bool(nan_cols.any()) and bool(nan_cols[first:].all()) and bool(g[:, first:].isnan().all()) and \
            torch.allclose(g[:, :first], e[:, :first], rtol=1e-3, atol=1e-3):
        return (f"columns {first}..{N - 1} of out were never written, every one before was: the grid needs "
                f"triton.cdiv(N, BLOCK_N) programs (N = {N}), each masking its keys")
    if bool(g.isnan().any()):
        return "NaN in out: " + read_nan
    if not k.is_contiguous():
        packed = _storage_from(k, N * D)[: N * D].view(N, D)                     # k read as if contiguous
        if torch.allclose(g, q.float() @ packed.float().T, rtol=1e-3, atol=1e-3):
            return (f"k is a view with strides {k.stride()}: address k[j, d] at j * k.stride(0) + d * "
                    "k.stride(1), not j * D + d")
    if raw_bf16_bits(q.dtype, g, e):
        return ("bf16 tl.dot is wrong in Triton's interpreter (it multiplies the raw bits): give tl.dot fp32 "
                "operands, q.to(tl.float32) (exact: every bf16 value is an fp32 value)")
    return "out = q @ k^T: tl.dot(q, tl.trans(k)) on tiles masked to M, N and D, padding loaded as 0"


HINTS = {"gather_rows": _gather_hint, "scale_columns": _scale_hint, "row_softmax": _softmax_hint,
         "scores": _scores_hint}
