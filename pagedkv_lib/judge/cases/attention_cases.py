"""Shared by the cases of exercises 125 (decode) and 126 (varlen), and of their kernels 131 and 133: paged
batches and attention checks.

Batches come from `make_paged_batch`: random K/V scattered into a cache whose other rows are garbage,
NaN or huge finite values. On a failure the check names the mistake: NaN or inf where the answer is finite
comes from garbage rows (0 x NaN is NaN, so masking only the scores is not enough), in a case with extreme
scores from exp without the max subtracted, in rows that see a single key from a key loop that never ran
(0 / 0); a case built to expose 16-bit arithmetic in the softmax (sums past fp16's range, or cancelling)
names it; a finite wrong answer is compared with the usual wrong variants (GQA as h % H_kv, the causal mask
counted from 0, scale ignored or applied twice, one token too many or too few, the whole last block read, a
kernel's last tile scored 0 past the context). Each exercise starts with finite garbage, so that reading one
token too many shows as a wrong number there, before a NaN case could blur it.
Shapes: docs/conventions.md.
"""
from __future__ import annotations

import torch

from pagedkv_lib.judge.cases.compare import show

from . import Case, fresh, observe, tensor_text

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
TOLERANCE = {torch.float32: 1e-4, torch.float16: 3e-3, torch.bfloat16: 2e-2}   # atol = rtol
SUMS_V = {"large": 250.0,         # V of a sums="large" case: p . v over 262 keys of weight ~1 passes 65504
          "cancelling": 20000.0}  # +-V by position: p . v over an even context cancels to near 0
SUMS_TEXT = {"large": f"{SUMS_V['large']:g} + randn", "cancelling": f"+-{SUMS_V['cancelling']:g} by position"}
TILES = (16, 32, 64, 128)   # the usual BLOCK_N of a kernel's key loop


def make_case(name: str, seq_lens, q_lens, block_size: int, H: int, H_kv: int, D: int, *, seed: int,
              dtype: str = "fp32", scale: float | None = None, garbage: str = "nan", extra_padding: int = 0,
              exact_pool: bool = False, block_tables=None, round_robin: bool = False, positive: bool = False,
              sums: str = "") -> Case:
    """positive: q and the caches made >= 0 (abs), so that q . k > 0 for every key: with a negative scale
    every score is then far below zero. sums: q near 0 (every weight exp(s - m) near 1, none exactly 1 but
    the max's) and V chosen so that 16-bit arithmetic in the softmax shows: "large", V near 250, so that l
    and p . v grow with the context past fp16's range while the answer stays near 250; "cancelling", V =
    +-20000 alternating by position, so that p . v over an even context cancels to near 0 and a rounding of
    p or acc to 16 bits is far off (args["sums"] tells the check). round_robin: the blocks dealt to the
    sequences in turn (round_robin_tables). It runs in the judge only (harness.PARENT_SIDE): a sandboxed
    child gets the cases it built."""
    from pagedkv_lib.testing.paged_batch import make_paged_batch, round_robin_tables

    if round_robin:
        block_tables = round_robin_tables(seq_lens, block_size)
    need = sum(-(-n // block_size) for n in seq_lens)
    if block_tables is not None:
        need = max(need, 1 + max(b for t in block_tables for b in t))
    batch = make_paged_batch(seq_lens, block_size, H, H_kv, D, q_lens, seed=seed, dtype=DTYPES[dtype],
                             num_blocks=need if exact_pool or block_tables else None,
                             block_tables=block_tables, extra_padding=extra_padding)
    if garbage == "huge":                                      # finite garbage, large enough to dominate
        g = torch.Generator().manual_seed(seed + 7)
        for cache in (batch.k_cache, batch.v_cache):
            nan = torch.isnan(cache)
            cache[nan] = (torch.randn(int(nan.sum()), generator=g) * 100).to(cache.dtype)
    if positive:
        for t in (batch.q, batch.k_cache, batch.v_cache):
            t.abs_()
    if sums:
        batch.q.mul_(0.01)
        _sum_values(batch, sums, block_size)
    scale = D**-0.5 if scale is None else scale
    args = {"q": batch.q, "k_cache": batch.k_cache, "v_cache": batch.v_cache,
            "block_tables": batch.block_tables, "seq_lens": batch.seq_lens,
            "cu_seqlens_q": batch.cu_seqlens_q, "scale": scale}
    if sums:
        args["sums"] = sums
    note = (" (every element >= 0, as is every K and V)" if positive else
            f" (near 0: every score near 0; V = {SUMS_TEXT[sums]})" if sums else "")
    lines = [f"block_size {block_size}, H {H}, H_kv {H_kv}, D {D}, {dtype}, scale {scale:.6g}",
             tensor_text("q", batch.q, note),
             tensor_text("k_cache, v_cache", batch.k_cache, f" (rows outside contexts: {garbage} garbage)"),
             f"block_tables = {show(batch.block_tables.tolist())}",
             f"context lengths = {list(seq_lens)}"]
    if q_lens is not None:
        lines.append(f"query tokens per sequence = {list(q_lens)}, "
                     f"cu_seqlens_q = {batch.cu_seqlens_q.tolist()}")
    return Case(name, args, lines)


def _sum_values(batch, sums: str, block_size: int) -> None:
    """V of a `sums` case, in place (SUMS_V): near +250 everywhere, or +-20000 alternating by position in
    each context (NaN garbage stays NaN)."""
    if sums == "large":
        batch.v_cache.add_(SUMS_V["large"])
        return
    for b, n in enumerate(batch.seq_lens.tolist()):
        for pos in range(n):
            block = int(batch.block_tables[b, pos // block_size])
            batch.v_cache[block, pos % block_size] = SUMS_V["cancelling"] * (-1) ** pos


def run_attention(fn, case: Case, varlen: bool) -> dict:
    a = fresh(case.args)
    lens = (a["seq_lens"], a["cu_seqlens_q"]) if varlen else (a["seq_lens"],)
    out = fn(a["q"], a["k_cache"], a["v_cache"], a["block_tables"], *lens, a["scale"])
    return {"out": observe(out), "inputs": observe([a[k] for k in ("q", "k_cache", "v_cache", "block_tables",
                                                                    "seq_lens", "cu_seqlens_q")])}


GARBAGE = ("NaN in the output: a cache row outside the context reached it (the last block's unused tail, "
           "or a block read through the -1 padding). Masking the scores with -inf is not enough: the weight "
           "of such a row is 0, and 0 x NaN = NaN in p . v, so K and V must be cut to the context too")
ARITHMETIC = ("NaN or inf from the arithmetic: this case's scores are extreme (every score far below zero, "
              "or large enough to overflow exp), so exp without the max gives 0 / 0 or inf / inf: "
              "subtract the row's max score before exp (in an online softmax, a running max that starts at "
              "-inf, not 0)")
LOOP_NEVER_RAN = ("NaN only in rows that see a single key (a context of length 1): 0 / 0, their key loop "
                  "never ran (l = 0, acc = 0). Its bound must cover every key, up to context_len itself, so "
                  "that a single key still gets a tile")
SHORT_ROWS_LOOP = ("NaN only in the rows that see the fewest keys (at most {n}; every row that sees {longer} "
                   "or more is finite): 0 / 0, their key loop did not run once (l = 0, acc = 0), as a bound "
                   "rounded down to whole tiles does. Its bound must cover every key, up to context_len "
                   "itself, the last tile masked")
NAN_EVERYWHERE = ("NaN in every row, and in a kernel this case cannot tell two causes apart: a key loop "
                  "that did not run (0 / 0: l = 0, acc = 0; its bound must be range(0, context_len, "
                  "BLOCK_N)), or a cache row outside the context read (the last block's tail, or block -1 "
                  "through the padding: mask the K/V loads, and the block-table load, at positions >= "
                  "context_len). Look at both")
RECIPE = ("gather each sequence's K/V through its block table (position p: block_tables[b, p // S], offset "
          "p % S), then softmax(q . k * scale) . v in fp32")
SUMS_HINTS = {  # a sums case's check -> why 16-bit arithmetic shows there, and what to keep in fp32
    "large": "this case's sums outgrow 16 bits (every weight near 1, V near 250: l and p . v reach the "
             "context length times that, past fp16's 65504; bf16 keeps 8 bits, so one more term is rounded "
             "away): keep m, l and acc in fp32 and round only the final output",
    "cancelling": "this case's p . v cancels (every weight near 1, V = +-20000 alternating by position: the "
                  "answer is near 0, so rounding p, or acc, to 16 bits is far off): give p . v fp32 operands "
                  "(p as computed, V converted with .to(tl.float32)) and an fp32 accumulator",
}


