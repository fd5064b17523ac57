"""Cases of exercise 130, store_kvcache in Triton: exercise 124's cases and checks, with guard memory.

Clauses of the contract -> the fixed case that holds each (exercise 124's list, and):
    a program whose slot is -1 writes nothing         decode_with_padding (row -1 is the guard before)
    rows key.stride(0) apart (a fused qkv view)       qkv_slices_not_contiguous
    value's stride its own, not key's                 value_strided_key_contiguous
    not one element past a row (mask ROW < BLOCK)     odd_heads_and_dim, row_of_15_ends_the_cache (guard)
    the rows stored by the kernel, not by PyTorch     every case on the CPU (kernel_harness.recording_stores:
                                                      every element of the slots' rows; CPU_ONLY)
    the caches written in place                       notebook_prefill_a_and_b
    the work done by a Triton kernel launched here    every case (kernel_harness.call counts the launches)
    int64 offsets (a slot past 2**31 / ROW)           cuda/slots_past_2_31_elements, on a GPU only
                                                      (GPU_ONLY: the CPU report says so)

Device "cpu": exercise 124's cases (and two more) in Triton's interpreter; "cuda": larger shapes, natively.
Each cache is a view into a buffer with a NaN block before and after it (kernel_harness.guarded): a write
through slot -1 (offset -ROW) or past the end of a row lands there, where it is seen. ROW = H_kv * D.
"""
from __future__ import annotations

import sys

import torch

from pagedkv_lib.judge import registry
from pagedkv_lib.judge.cases.compare import diff, show
from pagedkv_lib.judge.outcome import Outcome, wrong

from . import Case, ex124, fresh, observe
from .kernel_harness import CPU_ONLY as CPU_ONLY  # the clause only the CPU cases check (the report reads it)
from .kernel_harness import bench_report as _bench_report
from .kernel_harness import (
    bench_submission,
    call,
    fingerprint,
    guarded,
    loaded,
    not_launched,
    stored_elements,
    to_device,
    where,
    wild_writes,
    written_outside_the_kernel,
    wrote_outside,
)

NAME = "store_kvcache_triton"
EXTRA = [  # name, N, S, H_kv, D, slot_mapping, dtype, non-contiguous key/value ("value": value only)
    ("row_of_15_ends_the_cache", 3, 4, 3, 5, [11, -1, 0, 6], "fp32", True),
    ("minus_one_first_and_last", 4, 4, 2, 4, [-1, 3, 15, -1], "bf16", False),
    ("value_strided_key_contiguous", 6, 4, 2, 4, [20, 3, -1, 9, 14], "fp32", "value"),
]
CUDA = [  # the "cuda" case set: larger shapes, natively on the GPU
    ("qkv_views_4096_tokens", 512, 16, 8, 128, "bf16", True, 4096),
    ("fp16_block_size_256", 12, 256, 8, 128, "fp16", False, 1000),
    ("row_of_320_fp32", 64, 16, 4, 80, "fp32", True, 777),
    ("block_size_1", 3000, 1, 2, 64, "bf16", True, 2049),
    ("one_token", 8, 16, 8, 128, "bf16", False, 1),
]


HUGE = ("slots_past_2_31_elements", 2**17 + 64, 16, 8, 128, "bf16", 64)   # name, N, S, H_kv, D, dtype, T
GPU_ONLY = (f"offsets past 2**31 elements (int64 arithmetic: slot.to(tl.int64) * ROW), case cuda/{HUGE[0]}: "
            "a cache the CPU cases cannot hold",)   # clauses that only --device cuda checks (the report says)


def build(seed: int, device: str = "cpu") -> list[Case]:
    if device == "cuda":
        cases = [_cuda_case(f"cuda/{name}", *rest, seed=1000 * seed + 300 + i)   # slots drawn per seed
                 for i, (name, *rest) in enumerate(CUDA)]
    else:
        cases = ex124.build(seed) + [ex124._case(f"fixed/{name}", *rest, seed=200 + i)
                                     for i, (name, *rest) in enumerate(EXTRA)]
    for case in cases:
        case.args.update(device=device, k_cache=guarded(case.args["k_cache"]),
                         v_cache=guarded(case.args["v_cache"]))
        case.show[0] = case.show[0].replace("store_kvcache(", f"{NAME}(")
        case.show.append("k_cache and v_cache lie between NaN guard blocks: writes outside them are caught")
    if device == "cuda":
        cases.append(_huge_case(f"cuda/{HUGE[0]}", *HUGE[1:], seed=1000 * seed + 399))
    return cases


def _huge_case(name, N, S, H_kv, D, dtype, T, seed) -> Case:
    """Caches of N * S * H_kv * D > 2**31 elements, made on the device in `run` (torch.empty: only the rows
    the case reads are ever touched), and slots near their end: an int32 offset slot * ROW wraps there."""
    gen = torch.Generator().manual_seed(seed)
    top = torch.randperm(4 * T, generator=gen)[:T] + (N * S - 4 * T)          # [T] slots near the end
    top[:2] = torch.tensor([0, 1])                                           # and two at the start
    case = ex124._case(name, 1, 1, H_kv, D, [0] * T, dtype, False, seed)    # key, value; tiny caches
    case.args.update(huge=(N, S, H_kv, D), slot_mapping=top.to(torch.int32), k_cache=None, v_cache=None,
                     device="cuda")
    case.show = [f"{NAME}(key, value, k_cache, v_cache, slot_mapping), block_size {S}:",
                 f"key, value: shape [{T}, {H_kv}, {D}] {dtype}; k_cache, v_cache: shape [{N}, {S}, {H_kv}, "
                 f"{D}] = {N * S * H_kv * D} elements each (past 2**31 = {2**31})",
                 f"slot_mapping: {T} slots, 0, 1 and the rest among the last {4 * T} of {N * S}"]
    return case


def _run_huge(ns, a: dict, device: str, oracle) -> dict:
    """The huge case: caches made here, the slots' rows and their neighbours set to NaN first; observed:
    those rows only."""
    dt = a["qkv"].dtype
    k_cache, v_cache = (torch.empty(a["huge"], dtype=dt, device=device) for _ in range(2))  # [N, S, H_kv, D]
    row = a["huge"][2] * a["huge"][3]
    slots = a["slot_mapping"].to(device)
    near = torch.cat([slots, slots + 1, slots - 1]).clamp(0, a["huge"][0] * a["huge"][1] - 1).long()  # [3T]
    for cache in (k_cache, v_cache):
        cache.view(-1, row)[near] = float("nan")
    key, value = ex124.split_qkv(dict(a, qkv=a["qkv"].to(device)))
    try:
        _, launches, _, _ = call(ns, NAME, oracle, key, value, k_cache, v_cache, slots)
        if device == "cuda":
            torch.cuda.synchronize()      # a bad address surfaces at the next sync: here, not in observe()
    except Exception as exc:              # RuntimeError, or torch >= 2.8's AcceleratorError
        if "illegal memory access" not in str(exc):
            raise
        said = str(exc).splitlines()[0]           # CUDA's text runs long: the reason comes first
        raise RuntimeError(f"in this case slots lie past 2**31 / ROW, where an int32 offset wraps to a "
                           f"negative address. {INT64} (CUDA: {said})") from exc
    return {"rows": observe([c.view(-1, row)[near] for c in (k_cache, v_cache)]), "wild_writes": [],
            "inputs": [fingerprint(key), fingerprint(slots)], "launches": launches}


def _check_huge(case: Case, expected: dict, got: dict) -> Outcome:
    found = diff(expected["rows"], got["rows"])
    if found is None:
        return Outcome()
    T = len(case.args["slot_mapping"])
    which, i = (int(x) for x in found[0].replace("][", ",").strip("[]").split(",")[:2])
    slot = int(case.args["slot_mapping"][i % T])
    row = case.args["huge"][2] * case.args["huge"][3]
    message = (f"{('k_cache', 'v_cache')[which]}: the row of slot {slot} (or next to it) is wrong: expected "
               f"{show(found[1])}, got {show(found[2])}")
    if slot * row < 2**31:
        return wrong(message, f"slot {slot} lies at the start of a cache of more than 2**31 elements: "
                     "store each row at slot * ROW, whatever the cache's size")
    return wrong(message, f"slot {slot} starts at element {slot} * ROW = {slot * row}, past 2**31 - 1 = "
                 f"{2**31 - 1}: int32 offsets wrap there. {INT64}")


INT64 = "Compute the offsets in int64: slot.to(tl.int64) * ROW"


def _cuda_case(name, N, S, H_kv, D, dtype, strided, T, seed) -> Case:
    gen = torch.Generator().manual_seed(seed)
    slots = torch.randperm(N * S, generator=gen)[:T]                 # [T] distinct slots
    slots[torch.rand(T, generator=gen) < 0.05] = -1                   # some padding tokens
    return ex124._case(name, N, S, H_kv, D, slots.tolist(), dtype, strided, seed)


# ----------------------------------------------------------------------------------------------------------
# run and check

def run(ns, case: Case) -> dict:
    oracle = loaded(registry.get(130).oracle[NAME])              # None in the child
    device = where(ns, NAME, oracle, case.args["device"])
    a = fresh(case.args)
    if "huge" in a:
        return _run_huge(ns, a, device, oracle)
    k_cache, v_cache = to_device(a["k_cache"], device), to_device(a["v_cache"], device)
    d = dict(a, qkv=a["qkv"].to(device))
    key, value = ex124.split_qkv(d)                                  # [T, H_kv, D], views if strided
    slots = a["slot_mapping"].to(device)
    _, launches, _, stores = call(ns, NAME, oracle, key, value, k_cache, v_cache, slots)
    wild = wild_writes("k_cache", k_cache) + wild_writes("v_cache", v_cache)
    stored = {"k_cache": stored_elements(stores, k_cache), "v_cache": stored_elements(stores, v_cache)}
    return {"caches": observe([k_cache, v_cache]), "wild_writes": wild,
            "inputs": [fingerprint(d["qkv"]), fingerprint(slots)], "launches": launches,
            "stored": None if stores is None else stored}


def check(case: Case, expected: dict, got: dict) -> Outcome:
    no_kernel = not_launched(got)
    if no_kernel is not None:
        return no_kernel
    if "huge" in case.args:
        return _check_huge(case, expected, got)
    outside_caches = wrote_outside(got, _store_mask_hint(case, got))
    if outside_caches is not None:
        return outside_caches
    outcome = ex124.check(case, expected, got)
    if outcome.passed:
        return written_outside_the_kernel(got, _slot_rows(case)) or outcome
    if not outcome.message.startswith(("k_cache[", "v_cache[")):
        return outcome
    a, which = case.args, outcome.message.startswith("v_cache")
    S, H_kv, D = a["k_cache"].shape[1:]
    row, slots = H_kv * D, a["slot_mapping"].tolist()
    n, s, h, d = (int(x) for x in outcome.message.split("[", 1)[1].split("]")[0].split(","))
    slot, e = n * S + s, h * D + d                                   # the slot and the element in its row
    if slot not in slots and slot - 1 in slots and e < (1 << (row - 1).bit_length()) - row:
        outcome.hint = (f"element {e} of the row after slot {slot - 1} was written: mask the row: offsets "
                        f"ROW = {row} and beyond belong to the next row")
    elif slot in slots and a["strided"] in (True, ("key", "value")[which]):
        t = slots.index(slot)
        start = (a["H"] + which * H_kv) * D                          # where key (value) begins in a qkv row
        packed = a["qkv"].flatten()[start + t * row + e]             # token t's element read with stride ROW
        if diff(observe(packed.item()), observe(got["caches"][which][n, s, h, d].item())) is None:
            name = ("key", "value")[which]
            outcome.hint = (f"{name} is a view into a fused qkv here: token t's row starts at t * "
                            f"{name}.stride(0) = t * {a['qkv'].shape[1]}, not t * ROW = t * {row}"
                            + (" (key's stride differs here)" if a["strided"] == "value" else ""))
    return outcome


def _slot_rows(case: Case) -> dict:
    """The elements the kernel must write: in each cache, every element of the rows of the slots that are not
    -1 (name -> bool mask of the cache's shape)."""
    cache = case.args["k_cache"]                                     # [N, S, H_kv, D]
    slots = case.args["slot_mapping"].long()                         # [T]
    rows = torch.zeros(cache.shape[0] * cache.shape[1], cache.shape[2] * cache.shape[3], dtype=torch.bool)
    rows[slots[slots >= 0]] = True                                   # [N * S, ROW]
    return {"k_cache": rows.view(cache.shape), "v_cache": rows.view(cache.shape)}


def _store_mask_hint(case: Case, got) -> str:
    """Why a store left the caches (got["wild_writes"]): before the first element, a slot of -1 used as an
    offset; after the last, a row not masked."""
    row = case.args["k_cache"].shape[2] * case.args["k_cache"].shape[3]
    wild = got.get("wild_writes") if isinstance(got, dict) else None
    if any("before its first" in str(line) for line in wild or []):
        if -1 in case.args["slot_mapping"].tolist():
            return "a slot of -1 must be skipped: used as an offset, -1 * ROW lands just before the cache"
        return "an offset below 0 was written"
    return f"mask the row: offsets ROW = {row} and beyond belong to the next row (or lie past the cache)"


# ----------------------------------------------------------------------------------------------------------
# the benchmark (kernel_harness): the submission timed in the child, the library's kernel in the parent

BENCH = {f"T={T}": T for T in (4096, 32768)}


def bench(ns, device: str) -> dict:
    """store_kvcache of T tokens (bf16, H_kv = 8, D = 128, key/value views into a fused qkv, S = 16)."""
    return bench_submission(ns, device, sys.modules[__name__], 130)


def bench_report(figures: dict, device: str) -> dict:
    return _bench_report(figures, device, sys.modules[__name__])


def bench_inputs(label: str, device: str = "cuda", T: int | None = None):
    """(arguments, bytes moved) of one benchmark shape, the same in every process (seeded on the GPU)."""
    T, H, H_kv, D, S = T or BENCH[label], 32, 8, 128, 16
    gen = torch.Generator(device=device).manual_seed(T)
    qkv = torch.randn(T, (H + 2 * H_kv) * D, device=device, generator=gen).bfloat16()  # [T, (H+2H_kv) D]
    key = qkv[:, H * D : (H + H_kv) * D].view(T, H_kv, D)           # [T, H_kv, D] strided
    value = qkv[:, (H + H_kv) * D :].view(T, H_kv, D)
    slots = torch.randperm(4 * T, device=device, generator=gen)[:T].to(torch.int32)          # [T]
    k_cache = torch.zeros(4 * T // S, S, H_kv, D, dtype=torch.bfloat16, device=device)       # [N, S, H_kv, D]
    return (key, value, k_cache, torch.zeros_like(k_cache), slots), 2 * 2 * T * H_kv * D * 2 + 4 * T


def bench_correct(fn, args) -> bool:
    """One call of `fn` on fresh caches against PyTorch indexing."""
    key, value, k_cache, v_cache, slots = args
    T, row = key.shape[0], key.shape[1] * key.shape[2]
    k_cache.zero_(), v_cache.zero_()
    fn(*args)
    k_ref, v_ref = torch.zeros_like(k_cache), torch.zeros_like(v_cache)
    k_ref.view(-1, row)[slots.long()] = key.reshape(T, row)         # [T, ROW] rows by slot
    v_ref.view(-1, row)[slots.long()] = value.reshape(T, row)
    return torch.equal(k_cache, k_ref) and torch.equal(v_cache, v_ref)


def library_kernel():
    from pagedkv_lib.kernels import triton_store_kvcache as store_kvcache

    return store_kvcache.launch_store_kvcache
