"""The check of exercise 134 (FP8 KV cache): exact bytes for the store, rtol = eps(dtype) for the gather, and
the hints, which recompute the answer with one mistake switched on (`_store_variant`, `_gather_variant`).

It runs in the judge only: `_store_variant` with no mistake is the answer, so the module is parent-side
(harness.PARENT_MODULES) and no sandboxed child has it.
"""
from __future__ import annotations

import torch

from pagedkv_lib.judge.cases.compare import close, diff, kind
from pagedkv_lib.judge.outcome import Outcome, wrong

from . import Case, observe
from .ex124 import split_qkv

FP8 = torch.float8_e4m3fn              # ex134's cache dtype (importing ex134 here would close a cycle)
FP8_MAX = torch.finfo(FP8).max         # 448


def check_fp8(case: Case, expected: dict, got: dict) -> Outcome:
    a = case.args
    if expected["raised"] or got["raised"]:
        return _check_errors(a, expected, got)
    store = a["fn"] == "store_kvcache_fp8"
    found = _check_store(a, expected, got) if store else _check_gather(a, expected, got)
    if found is not None:
        return found
    if diff(expected["inputs"], got["inputs"]) is not None:
        return wrong("an input was modified", "only the caches may be written: key, value, slot_mapping, "
                     "block_table (and the cache in gather_kv_dequant) are read-only")
    return Outcome()


def _check_errors(a: dict, expected: dict, got: dict) -> Outcome:
    scales = f"k_scale={a['k_scale']}, v_scale={a['v_scale']}" if "k_scale" in a else f"scale={a['scale']}"
    if not got["raised"]:
        return wrong(f"{scales}: expected a ValueError, got no error", _invalid_scale_hint(a))
    if not expected["raised"]:
        return wrong(f"{scales}: expected no error, got {got['raised']}",
                     "only a scale that is not a finite number > 0 is an error")
    if "caches" in got and diff(expected["caches"], got["caches"]) is not None:
        return wrong("ValueError raised, but after writing into a cache",
                     "check both scales first: nothing may be written when either is invalid")
    return Outcome()


def _invalid_scale_hint(a: dict) -> str:
    """Why the case's invalid scale was let through: NaN and inf pass a test of `scale <= 0`."""
    values = [a[k] for k in ("k_scale", "v_scale", "scale") if k in a]
    if any(v != v for v in values):
        return ("a NaN scale must raise a ValueError too, and NaN <= 0 is False: test that the scale lies "
                "between 0 and infinity, both excluded, a test that NaN fails")
    if float("inf") in values:
        return ("an infinite scale must raise a ValueError too (x / inf stores 0, byte * inf reads inf or "
                "NaN): test that it is finite as well as > 0")
    when = "before writing" if "k_scale" in a else "first"
    return f"a scale must be a finite number > 0: check it and raise ValueError {when}"


# ----------------------------------------------------------------------------------------------------------
# store: exact bytes

def _quantize(x, scale, *, op="div", twice=False, in_dtype=False, bound=FP8_MAX, clamp_first=False):
    """x / scale -> e4m3 with switchable mistakes (plain torch, no library code)."""
    y = x if in_dtype else x.float()
    if clamp_first:
        y = y.clamp(-bound, bound)
    if op == "div":
        y = y / scale / scale if twice else y / scale
    elif op == "mul":
        y = y * scale
    elif op == "reciprocal":
        y = y * (1 / scale)
    return y.float().clamp(-bound, bound).to(FP8)


def _store_variant(a: dict, *, skip=True, swap=False, swap_scales=False, **quant) -> list:
    key, value = split_qkv(a)
    caches = [a["k_cache"].clone().view(FP8), a["v_cache"].clone().view(FP8)]
    scales = [a["k_scale"], a["v_scale"]][:: -1 if swap_scales else 1]
    S = caches[0].shape[1]
    for t, slot in enumerate(a["slot_mapping"].tolist()):
        if slot < 0 and skip:
            continue
        rows = (value[t], key[t]) if swap else (key[t], value[t])
        n, s = (slot // S, slot % S) if slot >= 0 else (-1, -1)          # -1 followed: the last row
        for cache, row, scale in zip(caches, rows, scales):
            cache[n, s] = _quantize(row, scale, **quant)
    return observe([c.view(torch.uint8) for c in caches])


STORE_HINTS = [
    ("divide by the scale when storing: the cache holds x / scale (reading multiplies)", {"op": "mul"}),
    ("apply the scale once: stored = x / scale", {"twice": True}),
    ("x * (1 / scale) is not x / scale: the reciprocal, rounded to float32, is up to an ulp off, which moves "
     "a value at an e4m3 rounding boundary to the neighbouring byte: use the division itself",
     {"op": "reciprocal"}),
    ("divide by the scale: the cache holds x / scale, not x", {"op": "none"}),
    ("divide in float32 (key.float() / k_scale): dividing in bf16/fp16 rounds twice", {"in_dtype": True}),
    ("saturate at +-448, e4m3fn's maximum (240 is e4m3fnuz's, another format)", {"bound": 240.0}),
    ("saturate after dividing: x / scale is what must fit in +-448", {"clamp_first": True}),
    ("a slot of -1 must be skipped: used as an index it writes the LAST row", {"skip": False}),
    ("k_cache gets key and v_cache gets value (swapped?)", {"swap": True}),
    ("keys use k_scale and values use v_scale (swapped?)", {"swap_scales": True}),
]


def _check_store(a: dict, expected: dict, got: dict) -> Outcome | None:
    found = diff(expected["caches"], got["caches"])
    if found is None:
        return None
    path, e, g = found
    idx = [int(x) for x in path.replace("][", ",").strip("[]").split(",")]
    which, (n, s, h, d) = ("k_cache", "v_cache")[idx[0]], idx[1:]
    slot = n * a["k_cache"].shape[1] + s
    e_val, g_val = (torch.tensor([v], dtype=torch.uint8).view(FP8).float().item() for v in (e, g))
    message = (f"{which}[{n}, {s}, {h}, {d}] (slot {slot}): expected {e_val:g} (byte 0x{e:02X}), "
               f"got {g_val:g} (byte 0x{g:02X})")
    original = observe([a["k_cache"], a["v_cache"]])
    if diff(original, got["caches"]) is None:
        return wrong(message, "nothing was written: write into k_cache/v_cache in place (a copy, or a "
                     "rebound name, leaves the caller's cache unchanged)")
    for hint, switches in STORE_HINTS:
        if diff(_store_variant(a, **switches), got["caches"]) is None:
            return wrong(message, hint)
    if g_val != g_val and abs(e_val) == FP8_MAX:
        return wrong(message, "saturate: clamp x / scale to [-448, 448] before the cast (torch before 2.12 "
                     "turns |x| > 464 into NaN)")
    if slot not in a["slot_mapping"].tolist():
        return wrong(message, f"slot {slot} is not in slot_mapping: its bytes must stay untouched")
    return wrong(message, "stored = (x.float() / scale).clamp(-448, 448).to(torch.float8_e4m3fn), at row "
                 "slot // S, offset slot % S")


# ----------------------------------------------------------------------------------------------------------
# gather: rtol = eps(dtype)

def _gather_variant(a: dict, scale_op: str) -> torch.Tensor:
    S, n = a["cache"].shape[1], a["context_len"]
    cache = a["cache"].view(FP8)
    rows = cache[a["block_table"][: -(-n // S)].long()].reshape(-1, *cache.shape[2:])[:n].double()
    s = a["scale"]
    return {"div": rows / s, "twice": rows * s * s, "none": rows}[scale_op]


def _check_gather(a: dict, expected: dict, got: dict) -> Outcome | None:
    exp, out = expected["out"], got["out"]
    S, n = a["cache"].shape[1], a["context_len"]
    if not isinstance(out, torch.Tensor):
        return wrong(f"expected {kind(exp)}, got {kind(out)}", "return a new tensor")
    if out.shape != exp.shape:
        hint = ("return exactly context_len rows: cut the last block's unused tail (rows past the context "
                "are garbage)" if out.dim() == 3 and out.shape[0] > n else
                "the result is [context_len, H_kv, D]: one row per position 0..context_len-1")
        return wrong(f"expected shape {list(exp.shape)}, got {list(out.shape)}", hint)
    if out.dtype != exp.dtype:
        return wrong(f"expected dtype {exp.dtype}, got {out.dtype}",
                     "return the requested dtype: dequantize in float32, then convert to dtype")
    eps = torch.finfo(exp.dtype).eps
    outcome = close("out", exp, out, 0.0, eps)
    if outcome.passed:
        return None
    for hint, op in (("multiply by the scale when reading: x = byte * scale", "div"),
                     ("apply the scale once: x = byte * scale", "twice"),
                     ("multiply by the scale: the cache holds x / scale", "none")):
        if torch.allclose(out.double(), _gather_variant(a, op).to(exp.dtype).double(), atol=0, rtol=eps):
            outcome.hint = hint
            return outcome
    if bool(torch.isnan(out).any()):
        outcome.hint = ("NaN in the result: garbage bytes were read; use only the first "
                        "ceil(context_len / S) table entries (then -1 padding; -1 indexes the LAST block)")
    else:
        outcome.hint = (f"row p is cache[block_table[p // S], p % S] (S = {S}): the table gives the order "
                        "of the blocks")
    return outcome
