"""Cases of exercise 124, store_kvcache: the caches after the call, compared exactly (NaN equals NaN).

Cache rows start as garbage (random values, some rows NaN), so any row written by mistake shows up.

Clauses of the contract -> the fixed case that holds each:
    k_cache[slot] = key[t], v_cache[slot] = value[t]  notebook_prefill_a_and_b
    a slot of -1 is skipped                          decode_with_padding, all_padding
    in place; every other row untouched              notebook_prefill_a_and_b, decode_with_padding
    key/value may be non-contiguous views            qkv_slices_not_contiguous
    fp32, fp16, bf16                                 fp16, bf16_qkv_slices
    any S >= 1 (1, not a power of 2, 256)            block_size_1, block_size_6, block_size_256
    key, value, slot_mapping read-only               decode_with_padding
"""
from __future__ import annotations

import random

import torch

from pagedkv_lib.judge.cases.compare import diff, show
from pagedkv_lib.judge.outcome import Outcome, wrong

from . import Case, fresh, observe, tensor_text

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
FIXED = [  # name, N, S, H_kv, D, slot_mapping, dtype, non-contiguous key/value
    ("notebook_prefill_a_and_b", 8, 4, 2, 4, [28, 29, 30, 31, 8, 9, 20, 21, 22], "fp32", False),
    ("decode_with_padding", 8, 4, 2, 4, [10, -1, 23, -1], "fp32", False),
    ("all_padding", 4, 4, 2, 4, [-1, -1, -1], "fp32", False),
    ("padding_in_the_middle", 6, 4, 2, 8, [0, 1, -1, 2, 3, -1, 4], "fp32", False),
    ("first_and_last_slot", 5, 4, 2, 4, [19, 0], "fp32", False),
    ("block_size_1", 9, 1, 2, 4, [8, 3, 0, 5], "fp32", False),
    ("block_size_16_129_tokens", 10, 16, 2, 4, list(range(16, 145)), "fp32", False),
    ("block_size_256", 3, 256, 1, 4, [767, 256, 0, 255, 512, -1], "fp32", False),
    ("block_size_6", 8, 6, 2, 4, [17, 6, 5, -1, 12, 31], "fp32", False),
    ("qkv_slices_not_contiguous", 8, 4, 2, 4, [3, 7, 11, -1, 30], "fp32", True),
    ("fp16", 8, 4, 2, 8, [28, 29, -1, 4, 5], "fp16", False),
    ("bf16_qkv_slices", 8, 4, 2, 8, [1, 2, 3, 17, -1], "bf16", True),
    ("one_token", 4, 4, 2, 4, [13], "fp32", False),
    ("odd_heads_and_dim", 6, 4, 3, 5, [22, 0, 9, -1, 10], "fp32", False),
]


def build(seed: int, device: str = "cpu") -> list[Case]:
    rng = random.Random(f"124/{seed}")
    cases = [_case(f"fixed/{name}", *rest, seed=i) for i, (name, *rest) in enumerate(FIXED)]
    for i in range(6):
        N, S = rng.randint(2, 12), rng.choice([1, 4, 16, 256])
        slots = rng.sample(range(N * S), rng.randint(1, min(N * S, 40)))
        slots = [-1 if rng.random() < 0.15 else s for s in slots]
        cases.append(_case(f"random/{i}", N, S, rng.randint(1, 4), rng.choice([1, 4, 8]), slots,
                           rng.choice(list(DTYPES)), rng.random() < 0.3, seed=100 + i))
    return cases


def _case(name, N, S, H_kv, D, slots, dtype, strided, seed) -> Case:
    g = torch.Generator().manual_seed(seed)
    T, dt, H = len(slots), DTYPES[dtype], 2 * H_kv
    qkv = torch.randn(T, (H + 2 * H_kv) * D, generator=g).to(dt)             # [T, (H + 2 H_kv) D]
    caches = (torch.randn(2, N, S, H_kv, D, generator=g) * 100).to(dt)         # [2, N, S, H_kv, D]
    caches[:, torch.rand(N, S, generator=g) < 0.3] = float("nan")             # some garbage rows are NaN
    args = {"qkv": qkv, "H": H, "H_kv": H_kv, "D": D, "strided": strided, "k_cache": caches[0].clone(),
            "v_cache": caches[1].clone(), "slot_mapping": torch.tensor(slots, dtype=torch.int32)}
    layout = {True: " (views into a fused qkv tensor, not contiguous)", False: "",
              "value": " (value a view into a fused qkv tensor, not contiguous; key contiguous)"}[strided]
    show_lines = [f"store_kvcache(key, value, k_cache, v_cache, slot_mapping), block_size {S}:",
                  f"key, value: shape [{T}, {H_kv}, {D}] {dtype}{layout}",
                  tensor_text("k_cache, v_cache", args["k_cache"], " (garbage rows, some NaN)"),
                  f"slot_mapping = {show(slots)}"]
    return Case(name, args, show_lines)


def split_qkv(a: dict):
    """key, value [T, H_kv, D]: views into qkv when `strided` (only value when it is "value"), else
    contiguous copies."""
    T, H, H_kv, D = a["qkv"].shape[0], a["H"], a["H_kv"], a["D"]
    key = a["qkv"][:, H * D : (H + H_kv) * D].view(T, H_kv, D)               # [T, H_kv, D] strided
    value = a["qkv"][:, (H + H_kv) * D :].view(T, H_kv, D)                   # [T, H_kv, D] strided
    strided = a["strided"]
    return (key if strided is True else key.contiguous(), value if strided else value.contiguous())


def run(ns, case: Case) -> dict:
    a = fresh(case.args)
    key, value = split_qkv(a)
    ns["store_kvcache"](key, value, a["k_cache"], a["v_cache"], a["slot_mapping"])
    return {"caches": observe([a["k_cache"], a["v_cache"]]),
            "inputs": observe([a["qkv"], a["slot_mapping"]])}


def check(case: Case, expected: dict, got: dict) -> Outcome:
    found = diff(expected["caches"], got["caches"])
    if found is None:
        found = diff(expected["inputs"], got["inputs"])
        if found is None:
            return Outcome()
        return wrong("key, value or slot_mapping was modified", "only the caches may be written")
    path, e, g = found
    idx = [int(x) for x in path.replace("][", ",").strip("[]").split(",")]
    which, (n, s, h, d) = ("k_cache", "v_cache")[idx[0]], idx[1:]
    a = case.args
    S = a["k_cache"].shape[1]
    slot, slots = n * S + s, a["slot_mapping"].tolist()
    where = f"{which}[{n}, {s}, {h}, {d}] (slot {slot})"
    message = f"{where}: expected {show(e)}, got {show(g)}"
    original = (a["k_cache"], a["v_cache"])[idx[0]][n, s, h, d]
    key, value = split_qkv(a)
    rows = (key, value)[idx[0]]                                              # [T, H_kv, D]
    if slot not in slots:
        written = _rows_equal_to(rows, got["caches"][idx[0]].reshape(-1, *rows.shape[1:])[slot])
        if written and slots[written[0]] == -1:
            if slot == a["k_cache"].shape[0] * S - 1:
                return wrong(message, "a slot of -1 must be skipped: used as an index it writes the LAST row")
            return wrong(message, f"a slot of -1 must be skipped: token {written[0]} (slot -1) was written "
                         f"to slot {slot}")
        if written:
            return wrong(message, f"token {written[0]}'s row went to slot {slot}, not slot "
                         f"{slots[written[0]]}: block slot // block_size, offset slot % block_size")
        return wrong(message, f"slot {slot} is not in slot_mapping: its row must stay untouched")
    t = slots.index(slot)
    if diff(observe(g), observe(original.item())) is None:
        elsewhere = [i for i in _rows_equal_to(got["caches"][idx[0]].reshape(-1, *rows.shape[1:]), rows[t])
                     if i != slot]
        if elsewhere:
            return wrong(message, f"token {t}'s row went to slot {elsewhere[0]}, not slot {slot}: block "
                         f"slot // block_size = {n}, offset slot % block_size = {s}")
        if idx[0] == 1 and diff(expected["caches"][0], got["caches"][0]) is None:
            return wrong(message, "k_cache is right, but value was not written into v_cache")
        missing = _tokens_not_written(rows, got["caches"][idx[0]].reshape(-1, *rows.shape[1:]), slots)
        T = len(slots)
        if missing and len(missing) < len([x for x in slots if x >= 0]) and \
                missing == [i for i in range(missing[0], T) if slots[i] >= 0]:
            tokens = f"token {T - 1} was" if missing[0] == T - 1 else f"tokens {missing[0]}..{T - 1} were"
            return wrong(message, f"{tokens} never written, every token before was: the grid is "
                         f"{T - missing[0]} program(s) short: one program per token, grid (T,) = ({T},)")
        return wrong(message, f"token {t} (slot {slot}) was not written: write into k_cache/v_cache in place "
                     "(a copy, or a rebound name, leaves the caller's cache unchanged)")
    other = (value, key)[idx[0]][t, h, d].item()
    if diff(observe(g), observe(other)) is None:
        return wrong(message, "k_cache gets key and v_cache gets value (swapped?)")
    held = _rows_equal_to(rows, got["caches"][idx[0]].reshape(-1, *rows.shape[1:])[slot])
    if held:
        return wrong(message, f"slot {slot} holds token {held[0]}'s row, not token {t}'s: keep the rows and "
                     "the slots aligned (drop a padded token's row together with its slot)")
    return wrong(message, f"token {t} goes to slot {slot}: block slot // block_size = {n}, "
                 f"offset slot % block_size = {s}")


def _tokens_not_written(rows: torch.Tensor, cache_rows: torch.Tensor, slots: list) -> list:
    """The tokens (slot not -1) whose row is not in the cache at their slot: rows [T, H_kv, D], cache_rows
    [N * S, H_kv, D]."""
    return [t for t, slot in enumerate(slots)
            if slot >= 0 and diff(observe(rows[t]), observe(cache_rows[slot])) is not None]


def _rows_equal_to(rows: torch.Tensor, row: torch.Tensor) -> list:
    """The indices i where rows[i] [..., H_kv, D] equals `row` [H_kv, D] (NaN equal to NaN)."""
    eq = (rows == row) | (torch.isnan(rows) & torch.isnan(row))              # [R, H_kv, D]
    return eq.flatten(1).all(1).nonzero().flatten().tolist()
