"""Cases of exercise 128, kernel inputs: every field of the returned ModelInputs, dtypes included.

Clauses of the contract -> the fixed case that holds each:
    prefill: input_ids, positions of start..end-1    prefix_hit_and_fresh, first_chunk, second_chunk_mid_block
    prefill: slots from num_cached_tokens on         prefix_hit_and_fresh, second_chunk_mid_block
    cu_seqlens_q / _k: running sums of q_b / end     notebook_a_and_b, prefix_hit_and_fresh
    max_seqlen_q / _k: Python ints                   notebook_a_and_b, notebook_decode
    block_tables None iff no key from the cache      notebook_a_and_b (None), prefix_hit_and_fresh
    block_tables padded with -1                      notebook_decode, tables_of_different_lengths
    context_lens None (prefill), len(seq) (decode)   notebook_a_and_b, notebook_decode
    decode: last token, position len - 1, its slot   notebook_decode, last_block_exactly_full,
                                                     token_starts_a_block
    decode: cu_seqlens None, max_seqlen_q = 1        notebook_decode
    dtypes: int64 ids and positions, int32 the rest  notebook_a_and_b, notebook_decode
    the sequences read-only                          notebook_a_and_b
"""
from __future__ import annotations

import random

import torch

from pagedkv_lib.core.sequence import Sequence
from pagedkv_lib.judge.cases.compare import diff, kind, show
from pagedkv_lib.judge.outcome import Outcome, wrong

from . import Case, fresh, observe

FIELDS = ("is_prefill", "input_ids", "positions", "slot_mapping", "cu_seqlens_q", "cu_seqlens_k",
          "max_seqlen_q", "max_seqlen_k", "context_lens", "block_tables")
FIXED = [  # name, fn, block_size, [(num_tokens, block_table, num_cached_tokens, num_scheduled_tokens)]
    ("notebook_a_and_b", "prefill", 4, [(6, [7, 2], 0, None), (3, [5], 0, None)]),
    ("prefix_hit_and_fresh", "prefill", 4, [(11, [3, 9, 4], 8, None), (5, [0, 1], 0, None)]),
    ("first_chunk", "prefill", 4, [(10, [2, 5, 7], 0, 4)]),
    ("second_chunk_mid_block", "prefill", 4, [(10, [2, 5, 7], 6, 3)]),
    ("block_size_1", "prefill", 1, [(5, [4, 0, 3, 1, 2], 2, None)]),
    ("block_size_256", "prefill", 256, [(300, [1, 0], 256, None), (129, [2], 0, None)]),
    ("lengths_127_128_129", "prefill", 16, [(127, list(range(8)), 0, None),
                                            (128, list(range(8, 16)), 0, None),
                                            (129, list(range(16, 25)), 0, None)]),
    ("one_token_prompt", "prefill", 4, [(1, [3], 0, None)]),
    ("notebook_decode", "decode", 4, [(7, [7, 2], 6, None), (4, [5], 3, None)]),
    ("last_block_exactly_full", "decode", 4, [(8, [7, 2], 7, None)]),
    ("token_starts_a_block", "decode", 4, [(9, [7, 2, 6], 8, None)]),
    ("decode_block_size_1", "decode", 1, [(3, [4, 1, 0], 2, None)]),
    ("decode_block_size_256", "decode", 256, [(257, [3, 1], 256, None), (256, [0], 255, None)]),
    ("tables_of_different_lengths", "decode", 4, [(2, [9], 1, None), (13, [1, 4, 6, 8], 12, None),
                                                  (5, [0, 3], 4, None)]),
]


def build(seed: int, device: str = "cpu") -> list[Case]:
    rng = random.Random(f"128/{seed}")
    cases = [_case(f"fixed/{n}", fn, bs, specs, random.Random(f"128/{n}")) for n, fn, bs, specs in FIXED]
    for i in range(8):
        bs, fn = rng.choice([1, 4, 16, 256]), ("prefill", "decode")[i % 2]
        ids = iter(rng.sample(range(800), 700))
        specs = []
        for _ in range(rng.randint(1, 4)):
            n = rng.randint(1, 150 if bs > 1 else 40)
            table = [next(ids) for _ in range(-(-n // bs))]
            if fn == "decode":
                specs.append((n, table, n - 1, None))
            else:
                cached = rng.choice([0, 0, (n - 1) // bs * bs, rng.randint(0, n - 1)])
                specs.append((n, table, cached, rng.choice([None, rng.randint(1, n - cached)])))
        cases.append(_case(f"random/{i}", fn, bs, specs, rng))
    return cases


def _case(name, fn, block_size, specs, rng) -> Case:
    seqs, lines = [], [f"prepare_{fn}(seqs), block_size {block_size}:"]
    for i, (n, table, cached, scheduled) in enumerate(specs):
        seq = Sequence([rng.randrange(151936) for _ in range(n)], block_size, seq_id=i)
        seq.block_table, seq.num_cached_tokens, seq.num_scheduled_tokens = list(table), cached, scheduled
        seqs.append(seq)
        lines.append(f"seq {i}: {n} tokens {show(seq.token_ids)}, block_table {show(table)}, "
                     f"num_cached_tokens {cached}, num_scheduled_tokens {scheduled}")
    return Case(name, {"fn": f"prepare_{fn}", "seqs": seqs}, lines)


def run(ns, case: Case) -> dict:
    seqs = fresh(case.args["seqs"])
    out = ns[case.args["fn"]](seqs)
    missing = {"__opaque__": "missing attribute"}
    fields = {f: observe(getattr(out, f, missing)) for f in FIELDS}
    state = [[s.token_ids, s.block_table, s.num_cached_tokens, s.num_scheduled_tokens] for s in seqs]
    return {"fields": fields, "inputs": observe(state)}


def check(case: Case, expected: dict, got: dict) -> Outcome:
    for field in FIELDS:
        e, g = expected["fields"][field], got["fields"][field]
        found = diff(e, g)
        if found is None:
            continue
        path, ev, gv = found
        if isinstance(e, torch.Tensor) and isinstance(g, torch.Tensor) and e.dtype != g.dtype:
            return wrong(f"{field}: expected dtype {e.dtype}, got {g.dtype}",
                         "metadata (slot_mapping, cu_seqlens_*, context_lens, block_tables) is int32; "
                         "input_ids and positions are int64")
        if path == "" or not isinstance(e, torch.Tensor):
            message = f"{field}: expected {kind(e)}, got {kind(g)}"
        else:
            message = f"{field}{path}: expected {show(ev)}, got {show(gv)}"
        details = [f"expected {field} = {show(_plain(e))}", f"got      {field} = {show(_plain(g))}"]
        return wrong(message, _hint(case.args["fn"], field, e, g), details)
    if diff(expected["inputs"], got["inputs"]) is not None:
        return wrong("a sequence was modified (token_ids, block_table, num_cached_tokens or "
                     "num_scheduled_tokens)", "prepare_* only reads the sequences; the scheduler owns them")
    return Outcome()


def _plain(value):
    return value.tolist() if isinstance(value, torch.Tensor) else value


def _hint(fn: str, field: str, e, g) -> str:
    decode = fn == "prepare_decode"
    if field == "slot_mapping" and decode:
        off_by_one = isinstance(g, torch.Tensor) and g.shape == e.shape and bool(((g - e) == 1).any())
        return ("the decode slot is block_table[-1] * block_size + last_block_num_tokens - 1: the new token "
                "is already counted in len(seq)" + (" (yours lands one slot too far)" if off_by_one else ""))
    hints = {
        "is_prefill": "True from prepare_prefill, False from prepare_decode",
        "input_ids": "decode: the last token" if decode else "only this step's tokens: token_ids[start:end], "
                     "start = num_cached_tokens, end = start + num_scheduled_tokens for a chunk",
        "positions": "decode: position len(seq) - 1" if decode else
        "positions run from num_cached_tokens to end - 1 (after a prefix hit or an earlier chunk, not 0)",
        "slot_mapping": "the slot of each computed position p: block_table[p // block_size] * block_size + "
                        "p % block_size, starting at num_cached_tokens",
        "cu_seqlens_q": "decode: cu_seqlens_q and cu_seqlens_k are None (context_lens holds the lengths)"
        if decode else "running sums of this step's query lengths (end - start), starting at 0",
        "cu_seqlens_k": "decode: cu_seqlens_q and cu_seqlens_k are None (context_lens holds the lengths)"
        if decode else "running sums of the whole context lengths (end), not of the query lengths",
        "max_seqlen_q": "a Python int: the longest query chunk (1 for decode)",
        "max_seqlen_k": "a Python int: the longest context (end, or len(seq) for decode)",
        "context_lens": "decode: context_lens[b] = len(seq), the new token included" if decode else
        "prefill passes context_lens = None (cu_seqlens_k holds the lengths)",
    }
    if field in hints:
        return hints[field]
    if e is None:
        return ("pass block_tables only when some key comes from the cache: cu_seqlens_k[-1] > "
                "cu_seqlens_q[-1] (a prefix hit or a later chunk)")
    if g is None:
        return "keys come from the cache here (a prefix hit or a later chunk): pass the block tables"
    return "block_tables: [B, M] int32, each row padded with -1 to the longest table"
