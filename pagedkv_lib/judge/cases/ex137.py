"""Cases of exercise 137, KV transfer between instances: `transfer_kv` on a sender's cache and a receiver's
pool and cache, compared exactly (NaN equal to NaN): the returned table, every block's ref count and the
receiver's free queue (in order), the receiver's whole cache, and the read-only inputs.

The sender's cache holds random K/V in the sequence's blocks and NaN everywhere else; the receiver's cache
holds large garbage (some rows NaN), its prefix blocks the sender's first blocks as the receiver computed them
itself (near the sender's values, not the same bytes: a prefix sent again over them shows). The receiver's
pool is built by a script of allocations and frees, so that its free queue is not in id order and other
sequences hold blocks. The unused tail of the sequence's last block is ignored on
both sides: copying whole blocks and copying only the used rows both pass.

Clauses of the contract -> the fixed case that holds each:
    the blocks after the prefix move, in table order    worked_example, awkward_block_size_5
    the last, partial block moves too                   worked_example (10 tokens, S 4), block_size_16_ragged
    ... and nothing more at an exact multiple           exact_multiple_of_block_size
    -1 padding names no block                           worked_example, block_size_16_ragged (int64 row)
    a table given as a list or an int32/int64 tensor    no_prefix_int32_table, block_size_16_ragged
    the receiver's own ids, from dst_pool.allocate      worked_example (its free queue is not in id order)
    new block i gets logical block k + i (not id order) worked_example, awkward_block_size_5
    K and V, every layer                                worked_example (2 layers), three_layers_bf16
    table = dst_prefix_table + new, a new list          worked_example, prefix_shared_by_two_sequences
    one more reference on each prefix block             worked_example, prefix_shared_by_two_sequences
    the prefix blocks neither move nor are allocated    worked_example, whole_prompt_held_by_the_receiver
    too few free blocks: None and nothing changed       receiver_pool_too_small, ..._no_prefix
    exactly enough free blocks is enough                exact_fit
    any S >= 1 (1, 5, 16), fp32 / fp16 / bf16 / fp8    block_size_1, awkward_block_size_5, fp16, ...,
                                                        fp8_caches (float8_e4m3fn, as exercise 134's)
    the prefix blocks' bytes untouched                  worked_example (they differ from the sender's)
    inputs read-only (src cache, src table, prefix)     worked_example
"""
from __future__ import annotations

import random

import torch

from pagedkv_lib.core.block_pool import BlockPool
from pagedkv_lib.judge.cases.compare import diff, show
from pagedkv_lib.judge.outcome import Outcome, wrong

from . import Case, fresh, observe

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}
FIXED = [  # name, (L, S, H_kv, D, dtype), num_tokens, src table, its kind, N_src, the receiver's pool, prefix
    ("worked_example", (2, 4, 2, 2, "fp32"), 10, [5, 1, 6, -1, -1], "list", 8,
     [("pool", 8), ("allocate", 8), ("free", [6, 2, 0, 7])], [3]),
    ("no_prefix_int32_table", (2, 4, 2, 2, "fp32"), 7, [2, 0, -1], "int32", 4,
     [("pool", 6), ("allocate", 3), ("free", [1])], []),
    ("exact_multiple_of_block_size", (1, 4, 2, 2, "fp32"), 8, [3, 1], "list", 5,
     [("pool", 4)], []),
    ("block_size_1", (2, 1, 2, 2, "fp32"), 5, [4, 0, 2, 3, 1, -1], "list", 6,
     [("pool", 8), ("allocate", 4), ("free", [0, 2])], [3, 1]),
    ("block_size_16_ragged", (3, 16, 1, 4, "fp32"), 37, [1, 4, 0, -1], "int64", 6,
     [("pool", 5), ("allocate", 2), ("free", [0])], []),
    ("awkward_block_size_5", (2, 5, 2, 2, "fp32"), 23, [6, 2, 9, 4, 0, -1, -1], "list", 10,
     [("pool", 9), ("allocate", 9), ("free", [8, 3, 5, 0, 6])], [7, 1]),
    ("whole_prompt_held_by_the_receiver", (2, 4, 2, 2, "fp32"), 8, [1, 3, -1], "list", 4,
     [("pool", 3), ("allocate", 3)], [2, 0]),
    ("receiver_pool_too_small", (2, 4, 2, 2, "fp32"), 13, [0, 5, 2, 4], "list", 6,
     [("pool", 6), ("allocate", 6), ("free", [4, 0])], [1]),
    ("receiver_pool_too_small_no_prefix", (1, 4, 1, 2, "fp32"), 3, [2], "list", 3,
     [("pool", 2), ("allocate", 2)], []),
    ("exact_fit", (2, 4, 2, 2, "fp32"), 11, [3, 0, 1], "list", 4,
     [("pool", 5), ("allocate", 5), ("free", [4, 2])], [0]),
    ("prefix_shared_by_two_sequences", (2, 4, 2, 2, "fp32"), 14, [2, 3, 0, 1, -1], "int32", 4,
     [("pool", 7), ("allocate", 4), ("fork", [1, 2])], [2, 1]),
    ("fp16", (2, 4, 2, 4, "fp16"), 6, [1, 0], "list", 3,
     [("pool", 4), ("allocate", 1), ("free", [0])], []),
    ("three_layers_bf16", (3, 4, 2, 4, "bf16"), 9, [4, 2, 0, -1], "list", 5,
     [("pool", 6), ("allocate", 3), ("free", [2, 0])], [1]),
    ("fp8_caches", (2, 4, 2, 4, "fp8"), 10, [3, 0, 2, -1], "int64", 5,
     [("pool", 6), ("allocate", 4), ("free", [3, 1])], [2]),
]


def build(seed: int, device: str = "cpu") -> list[Case]:
    rng = random.Random(f"137/{seed}")
    cases = [_case(f"fixed/{name}", *rest, seed=i) for i, (name, *rest) in enumerate(FIXED)]
    for i in range(8):
        cases.append(_case(f"random/{i}", *_random_case(rng), seed=1000 * seed + 100 + i))
    return cases


def _random_case(rng: random.Random):
    L, S, H_kv, D = rng.randint(1, 3), rng.choice([1, 3, 4, 5, 16]), rng.randint(1, 3), rng.choice([2, 4])
    num_tokens = rng.randint(1, 6 * S + 3)
    blocks = -(-num_tokens // S)
    n_src = blocks + rng.randint(0, 3)
    table = rng.sample(range(n_src), blocks) + [-1] * rng.randint(0, 3)
    k = rng.randint(0, num_tokens // S) if rng.random() < 0.6 else 0
    n_dst = rng.randint(k + 1, k + blocks + 6)
    pool, ops = BlockPool(n_dst), [("pool", n_dst)]
    held = pool.allocate(rng.randint(k, n_dst))
    ops.append(("allocate", len(held)))
    freed = [b for b in held if rng.random() < 0.5][: len(held) - k]
    if freed:
        ops.append(("free", freed))
    prefix = rng.sample([b for b in held if b not in freed], k)
    kind = rng.choice(["list", "int32", "int64"])
    dtype = rng.choice(["fp32", "fp16", "bf16"])
    return (L, S, H_kv, D, dtype), num_tokens, table, kind, n_src, ops, prefix


def make_pool(ops) -> BlockPool:
    """The receiver's pool after its script: ("pool", N), ("allocate", n), ("free", ids), ("fork", ids)."""
    pool = None
    for op in ops:
        if op[0] == "pool":
            pool = BlockPool(op[1])
        elif op[0] == "allocate":
            pool.allocate(op[1])
        elif op[0] == "free":
            pool.free(list(op[1]))
        else:
            pool.fork(list(op[1]))
    return pool


def _case(name, shape, num_tokens, table, kind, n_src, ops, prefix, seed) -> Case:
    L, S, H_kv, D, dtype = shape
    g = torch.Generator().manual_seed(seed)
    used = table[: -(-num_tokens // S)]
    src = torch.full((2, L, n_src, S, H_kv, D), float("nan"))                      # [2, L, N_src, S, H_kv, D]
    src[:, :, used] = torch.randn(2, L, len(used), S, H_kv, D, generator=g)
    pool = make_pool(ops)
    dst = torch.randn(2, L, pool.num_blocks, S, H_kv, D, generator=g) * 100     # [2, L, N_dst, S, H_kv, D]
    dst[:, :, torch.rand(pool.num_blocks, S, generator=g) < 0.2] = float("nan")
    hit = src[:, :, used[: len(prefix)]]                                          # [2, L, k, S, H_kv, D]
    dst[:, :, prefix] = hit + 1e-2 * torch.randn(hit.shape, generator=g)          # a hit computed there
    src, dst = src.to(DTYPES[dtype]), dst.to(DTYPES[dtype])
    src_table = table if kind == "list" else torch.tensor(table, dtype=getattr(torch, kind))
    args = {"src_kv_cache": src, "src_block_table": src_table, "num_tokens": num_tokens, "pool_ops": ops,
            "dst_kv_cache": dst, "dst_prefix_table": list(prefix)}
    refs = {b: pool.ref_count(b) for b in range(pool.num_blocks) if pool.ref_count(b)}
    as_given = "" if kind == "list" else f" ({kind})"
    show_lines = [f"transfer_kv(src_kv_cache, src_block_table={show(table)}{as_given}, "
                  f"num_tokens={num_tokens}, dst_pool, dst_kv_cache, dst_prefix_table={list(prefix)})",
                  f"caches [2, L={L}, N, S={S}, H_kv={H_kv}, D={D}] {dtype}, N_src={n_src}, "
                  f"N_dst={pool.num_blocks}; the sender's unused blocks hold NaN",
                  f"dst_pool before: free queue {list(pool.free_block_ids)}, held blocks (id: refs) {refs}"]
    return Case(name, args, show_lines)


def run(ns, case: Case) -> dict:
    a = fresh(case.args)
    pool = make_pool(a["pool_ops"])
    try:
        ret = ns["transfer_kv"](a["src_kv_cache"], a["src_block_table"], a["num_tokens"], pool,
                                a["dst_kv_cache"], a["dst_prefix_table"])
    except NotImplementedError as exc:
        if "Float8" not in str(exc):
            raise
        raise RuntimeError(f"{exc}: this case's caches are float8_e4m3fn (exercise 134's dtype), and some "
                           "torch operations have no fp8 kernel on the CPU (index_copy_, ...): move the "
                           "blocks by indexing their dimension on both sides of one assignment, which "
                           "copies bytes") \
            from exc
    return {"ret": observe(ret), "refs": [pool.ref_count(b) for b in range(pool.num_blocks)],
            "free": list(pool.free_block_ids), "dst_kv": observe(a["dst_kv_cache"]),
            "inputs": observe([a["src_kv_cache"], a["src_block_table"], a["dst_prefix_table"]])}


def check(case: Case, expected: dict, got: dict) -> Outcome:
    a = case.args
    table = a["src_block_table"]
    table = table.tolist() if isinstance(table, torch.Tensor) else list(table)
    S, prefix = a["src_kv_cache"].shape[3], a["dst_prefix_table"]
    blocks = -(-a["num_tokens"] // S)
    k, n = len(prefix), blocks - len(prefix)
    pool = make_pool(a["pool_ops"])
    e, g = expected["ret"], got["ret"]
    if e is None:
        if g is not None:
            return wrong(f"returned {show(g)}, expected None",
                         f"the receiver needs n = {n} blocks and has {pool.num_free()} free: return None")
        for key, what in (("refs", "ref counts"), ("free", "free queue"), ("dst_kv", "dst_kv_cache")):
            if diff(expected[key], got[key]) is not None:
                return wrong(f"returned None, but the receiver's {what} changed",
                             "a failed transfer changes nothing: check dst_pool.num_free() >= n before "
                             "taking any block or any reference to a prefix block")
        return _inputs(expected, got)
    found = _table(e, g, table, prefix, blocks, pool.num_free())
    if found is None:
        found = _pool(expected, got, prefix)
    if found is None:
        found = _cache(a, expected, got, e[k:], k, table)
    return found or _inputs(expected, got)


def _table(e: list, g, table: list, prefix: list, blocks: int, num_free: int) -> Outcome | None:
    k, n = len(prefix), blocks - len(prefix)
    if g is None:
        return wrong(f"returned None, expected the table {show(e)}",
                     f"the receiver had {num_free} free blocks for the n = ceil(num_tokens / S) - "
                     f"len(dst_prefix_table) = {n} blocks to move: the prefix blocks are not moved again")
    if type(g) is not list or any(type(b) is not int for b in g):
        return wrong(f"returned {show(g)}, expected the list {show(e)}",
                     "return a new list of ints: dst_prefix_table + the ids dst_pool.allocate returned")
    if g == e:
        return None
    message = f"returned the table {show(g)}, expected {show(e)}"
    if g == e[:-1]:
        return wrong(message, f"the last, partial block moves too: {blocks} blocks are ceil(num_tokens / S)")
    if len(g) == len(e) and g[k:] == table[k:blocks]:
        return wrong(message, "the receiver's table names the receiver's blocks: allocate them from dst_pool "
                     "(the sender's ids mean nothing there)")
    if k and g == e[k:]:
        return wrong(message, "the table starts with dst_prefix_table, the blocks the receiver already holds")
    if k and len(g) == len(e) + k and g[:k] == prefix:
        return wrong(message, "the prefix blocks are not moved again: send and allocate only the blocks "
                     "after the first len(dst_prefix_table)")
    if len(g) > len(e):
        return wrong(message, "-1 padding in src_block_table names no block: the sequence has "
                     f"ceil(num_tokens / S) = {blocks} blocks")
    if sorted(g) == sorted(e):
        return wrong(message, "keep the new ids in the order dst_pool.allocate returned them")
    return wrong(message, "the table is dst_prefix_table + dst_pool.allocate(n)")


def _pool(expected: dict, got: dict, prefix: list) -> Outcome | None:
    found = diff(expected["refs"], got["refs"])
    if found is not None:
        b = int(found[0].strip("[]"))
        message = f"after the transfer, ref_count({b}) = {show(found[2])}, expected {show(found[1])}"
        if b in prefix:
            return wrong(message, "the new sequence shares the prefix blocks: one more reference on each "
                         "(dst_pool.fork(dst_prefix_table))")
        extra = [i for i, (e, g) in enumerate(zip(expected["refs"], got["refs"]))
                 if i not in prefix and isinstance(g, int) and g > e]
        if prefix and len(extra) == len(prefix):
            return wrong(message, f"{len(extra)} block(s) more than n were taken from dst_pool, as many as "
                         f"dst_prefix_table holds (blocks {extra}): the prefix was sent again. The receiver "
                         "already holds those blocks: send and allocate only the n blocks after them")
        return wrong(message, "allocate the n blocks with dst_pool.allocate(n), nothing else")
    if diff(expected["free"], got["free"]) is not None:
        return wrong(f"the receiver's free queue is {show(got['free'])}, expected {show(expected['free'])}",
                     "allocate the n blocks with dst_pool.allocate(n), nothing else")
    return None


def _masked(kv: torch.Tensor, last: int | None, used: int) -> torch.Tensor:
    """The cache with the unused tail of the sequence's last block set to NaN (not compared)."""
    kv = kv.clone()
    if last is not None:
        kv[:, :, last, used:] = float("nan")
    return kv


def _cache(a: dict, expected: dict, got: dict, new: list, k: int, table: list) -> Outcome | None:
    S = a["src_kv_cache"].shape[3]
    used = a["num_tokens"] - (-(-a["num_tokens"] // S) - 1) * S
    last = new[-1] if new else None
    e, g = _masked(expected["dst_kv"], last, used), _masked(got["dst_kv"], last, used)
    found = diff(e, g)
    if found is None:
        return None
    kv, layer, block, s, h, d = (int(i) for i in found[0].strip("[]").split(","))
    message = (f"dst_kv_cache[{'KV'[kv]}, layer {layer}, block {block}, offset {s}, head {h}, dim {d}]: "
               f"expected {show(found[1])}, got {show(found[2])}")
    if block in a["dst_prefix_table"]:
        return wrong(message, f"block {block} is a prefix block (dst_prefix_table): the receiver already "
                     "holds its K/V, computed there; leave its bytes alone and write only the n new blocks")
    if block not in new:
        return wrong(message, "write only into the blocks dst_pool.allocate returned")
    i = new.index(block)
    detail = [f"block {block} is new[{i}]: it receives the sender's block {table[k + i]} (logical {k + i})"]
    if diff(e[1 - kv, :, block], g[kv, :, block]) is None:
        return wrong(message, "K goes to K and V to V (kv_cache[0] holds K, kv_cache[1] V)", detail)
    before = _masked(a["dst_kv_cache"], last, used)
    if diff(before[:, layer, block], g[:, layer, block]) is None:
        return wrong(message, f"layer {layer} was not copied: K and V of EVERY layer move", detail)
    rows = {b: min(used if b == last else S, used if block == last else S) for b in new}  # rows compared
    others = [j for j, b in enumerate(new)
              if j != i and diff(e[:, :, b, : rows[b]], g[:, :, block, : rows[b]]) is None]
    if others:
        return wrong(message, f"block {block} holds what new[{others[0]}] should: new[i] receives logical "
                     f"block k + i, in table order (not in order of block ids)", detail)
    return wrong(message, "new[i] receives the sender's logical block k + i, K and V, every layer", detail)


def _inputs(expected: dict, got: dict) -> Outcome:
    if diff(expected["inputs"], got["inputs"]) is not None:
        return wrong("an input was modified", "src_kv_cache, src_block_table and dst_prefix_table are "
                     "read-only: return a new list")
    return Outcome()
