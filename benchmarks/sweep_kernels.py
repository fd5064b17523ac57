"""Correctness on the GPU, then tuning sweeps of decode v3 (partition and tiles, bf16 and fp8 caches) and of
the prefill kernel's tiles, at the course's target shapes.

    PYTHONPATH=. python benchmarks/sweep_kernels.py --out OUT [--budget-s 220] [--sections ...] [--shapes ...]

Writes OUT/sweep.json: every row, and `best` (per shape: the fastest CORRECT config, read by
bench_decode.py / bench_prefill.py --tuned; and the config of the common grid whose worst ratio to the
per-shape best is highest: the candidate default), and OUT/sweep.txt, a short table. The library's
defaults are the empty config `{}` of each grid (PDL on where the device has it). Correctness first: decode
v1/v2/v3 (+ PDL, fp8) and prefill (bf16, fp16, fp32, fp8) on awkward batches (lengths 1, S - 1, S, S + 1,
127-129, block sizes 1 / 16 / 256, q_len 0 and 1 beside prefills, NaN outside the contexts) against float64
SDPA on contiguous K/V. Every timed config is also checked against fp32 SDPA on its own inputs. Time is
split between the sections by a budget; what was not reached is listed under `skipped`.
"""
import argparse
import dataclasses
import time
from pathlib import Path

import gpu_harness as gh
import torch
from attention_workloads import (
    DECODE_SHAPES,
    H_KV,
    PREFILL_SHAPES,
    D,
    H,
    decode_bytes,
    decode_reference,
    decode_set,
    prefill_flops,
    prefill_set,
)
from bench_decode import triton_calls
from bench_prefill import prefill_calls
from bench_prefill import reference as prefill_reference

import pagedkv_lib as pk
from pagedkv_lib.kernels.attention_args import pdl_supported
from pagedkv_lib.kernels.decode_config import choose_config
from pagedkv_lib.kernels.triton_decode_attention import paged_attention_decode_triton
from pagedkv_lib.kernels.triton_prefill_attention import paged_attention_varlen_triton
from pagedkv_lib.testing.paged_batch import quantize_batch

SCALE = D**-0.5
TOL = {torch.bfloat16: 1.5e-2, torch.float16: 3e-3, torch.float32: 1e-4}

# decode v3: one grid measured on every shape (for a common default; {} is the library's), then extras per
# shape kind. The first H200 run (benchmarks/NOTES.md) chose the defaults; this grid re-checks them.
COMMON = [dict(pdl=False)] + [dict(min_chunk=mn, max_chunk=mx) for mn in (64, 128) for mx in (512, 1024, 2048)
                              if (mn, mx) != (128, 1024)]
SMALL_EXTRA = ([dict(merge_per_head=False), dict(waves=2), dict(waves=4), dict(min_chunk=64, waves=4)]
               + [dict(version=2, num_splits=p) for p in (8, 16, 32)])
LARGE_EXTRA = [dict(max_chunk=4096), dict(balanced=False), dict(block_n=128), dict(num_stages=3)]
FP8_GRID = [{}, dict(num_stages=4), dict(num_stages=2), dict(block_n=64), dict(block_n=64, num_stages=4),
            dict(block_n=64, num_stages=2), dict(num_warps=8), dict(block_n=256, num_warps=8),
            dict(max_chunk=4096), dict(waves=4), dict(min_chunk=256)]
SMALL_EXTRA_MORE = [dict(block_n=32), dict(num_warps=2), dict(waves=6), dict(min_chunk=64, waves=6),
                    dict(version=2, num_splits=64), dict(block_n=128, num_stages=3)]
PREFILL_DEFAULT = dict(block_m=128, block_n=128, num_warps=8, num_stages=3)
PREFILL_GRID = [PREFILL_DEFAULT] + [dict(block_m=m, block_n=n, num_warps=w, num_stages=s) for m, n, w, s in (
    (128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 4, 3), (64, 64, 4, 3), (128, 128, 8, 2), (128, 64, 8, 2))]
if not gh.CUDA:  # CPU smoke run: two entries per grid, interpreter-sized tiles
    COMMON, SMALL_EXTRA, LARGE_EXTRA = COMMON[:2], SMALL_EXTRA[:1], LARGE_EXTRA[:1]
    SMALL_EXTRA_MORE = SMALL_EXTRA_MORE[:1]
    FP8_GRID = [dict(block_n=16), dict(block_n=32, max_chunk=64)]
    PREFILL_DEFAULT = dict(block_m=16, block_n=16, num_warps=4, num_stages=1)
    PREFILL_GRID = [PREFILL_DEFAULT, dict(block_m=32, block_n=16)]


# ----------------------------------------------------------------------------------------------------------
# correctness

def _check(rows, name, fn, batch, dtype, rerun=False):
    """Run fn() -> out; compare with float64 SDPA on the batch's contiguous K/V; record, never raise."""
    row = dict(check=name, ok=False)
    out = gh.attempt(row, fn)
    if out is not None:
        ref = pk.sdpa_batch(batch).to(out.device)                        # float64 SDPA on contiguous K/V
        row["rel_err"] = gh.rel_err(out.float(), ref)
        row["ok"] = bool(row["rel_err"] < TOL[dtype] and not out.isnan().any())
        if rerun:
            row["deterministic"] = all(torch.equal(out, fn()) for _ in range(3))
            row["ok"] = row["ok"] and row["deterministic"]
    rows.append(row)
    detail = f"rel err {row['rel_err']:.2e}" if "rel_err" in row else row.get("error", "")[:120]
    gh.log(f"  {'ok  ' if row['ok'] else 'FAIL'} {name}: {detail}")


def _decode(batch, S, scales=None, **over):
    over.setdefault("pdl", pdl_supported(batch.q.device))
    cfg = choose_config(batch.q.shape[0], H, H_KV, D, batch.block_tables.shape[1] * S,
                        over.pop("num_splits", None), num_sms=gh.num_sms(), interpreted=not gh.CUDA, **over)
    return lambda: paged_attention_decode_triton(batch.q, batch.k_cache, batch.v_cache, batch.block_tables,
                                                 batch.context_lens, SCALE, config=cfg, **(scales or {}))


def _prefill(batch, scales=None):
    return lambda: paged_attention_varlen_triton(batch.q, batch.k_cache, batch.v_cache, batch.block_tables,
                                                 batch.seq_lens, batch.cu_seqlens_q, SCALE, **(scales or {}))


def _last_queries(pb):
    """The decode batch of a varlen batch: each sequence's last query (q_len >= 1 everywhere)."""
    last = pb.cu_seqlens_q[1:].long() - 1
    cu = torch.arange(len(last) + 1, dtype=torch.int32, device=pb.q.device)
    return dataclasses.replace(pb, q=pb.q[last].contiguous(), cu_seqlens_q=cu)   # q [B, H, D]


def _awkward_batches(S, dev):
    """A decode batch (lengths 1, S - 1, S, S + 1, 127-129, long) and a varlen batch (q_len 0 and 1 beside
    prefills), both with NaN outside the contexts and -1 padded tables."""
    lens = sorted({1, max(S - 1, 1), S, S + 1, 127, 128, 129, 1000, 3000} if gh.CUDA else {1, S + 1, 40})
    batch = pk.make_paged_batch(lens, S, H, H_KV, D, seed=S, dtype=torch.bfloat16, device=dev,
                                extra_padding=3)
    seq_lens = [1, 17, 128, 129, 300, 1000, 50, S + 1] if gh.CUDA else [1, 17, 20, S + 1]
    q_lens = [1, 17, 5, 129, 1, 400, 0, S + 1] if gh.CUDA else [1, 17, 0, 2]
    pb = pk.make_paged_batch(seq_lens, S, H, H_KV, D, q_lens, seed=S, dtype=torch.bfloat16, device=dev,
                             extra_padding=3)
    return batch, pb


def _dtype_batch(dtype, dev):
    """A varlen batch in fp16 / fp32 / fp8 (bf16 q, scales 0.02 and 0.03) and its scales."""
    seq_lens, q_lens = ([1, 17, 129, 700], [1, 17, 40, 300]) if gh.CUDA else ([1, 9], [1, 5])
    pb = pk.make_paged_batch(seq_lens, 16, H, H_KV, D, q_lens, seed=5, device=dev,
                             dtype=torch.float32 if dtype == "fp8" else dtype)
    if dtype != "fp8":
        return pb, None
    pb = quantize_batch(pb, 0.02, 0.03)
    pb.q = pb.q.to(torch.bfloat16)
    return pb, dict(k_scale=torch.tensor([0.02], device=dev), v_scale=0.03)


VERSIONS = (("v1", dict(version=1)), ("v2 P=3", dict(version=2, num_splits=3)), ("v3 default", {}),
            ("v3 chunks 64..128", dict(min_chunk=64, max_chunk=128)),
            ("v3 chunks 64..128 merge per KV head", dict(min_chunk=64, max_chunk=128, merge_per_head=False)),
            ("v3 chunks 64..128 merge per head", dict(min_chunk=64, max_chunk=128, merge_per_head=True)),
            ("v3 chunks 64..128 no pdl", dict(min_chunk=64, max_chunk=128, pdl=False)))


def correctness(budget) -> list:
    """Most important first (block size 16, then fp8), so that a short budget still covers them."""
    rows, dev, bf16 = [], gh.backend.device(), torch.bfloat16
    batch, pb = _awkward_batches(16, dev)
    for label, over in VERSIONS:
        _check(rows, f"decode {label} S=16", _decode(batch, 16, **over), batch, bf16, rerun=True)
    _check(rows, "prefill bf16 S=16", _prefill(pb), pb, bf16, rerun=True)
    for dtype in ("fp8", torch.float16, torch.float32):
        if budget.over():
            rows.append(dict(check=f"{dtype}", ok=False, skipped=True))
            continue
        pb_d, scales = _dtype_batch(dtype, dev)
        _check(rows, f"prefill {dtype}", _prefill(pb_d, scales), pb_d, pb_d.q.dtype)
        db = _last_queries(pb_d)
        _check(rows, f"decode v3 {dtype}", _decode(db, 16, scales), db, pb_d.q.dtype)
    for S in (1, 256):
        if budget.over():
            rows.append(dict(check=f"block size {S}", ok=False, skipped=True))
            continue
        b, p = _awkward_batches(S, dev)
        for label, over in VERSIONS[:4]:
            _check(rows, f"decode {label} S={S}", _decode(b, S, **over), b, bf16, rerun=True)
        _check(rows, f"prefill bf16 S={S}", _prefill(p), p, bf16, rerun=True)
    return rows


# ----------------------------------------------------------------------------------------------------------
# sweeps

def _time(row, calls, ref, samples=12):
    out = calls[0]()
    row["rel_err"] = gh.rel_err(out.float(), ref)
    row["correct"] = row["rel_err"] < 2e-2
    row.update(gh.time_calls(calls, samples=samples))


def decode_sweep(budget, fp8: bool, copy_gbs: float, names: list[str] | None = None) -> list:
    """Configs outermost (each compiles once), every shape inside; the common grid before the extras."""
    kind = "decode_fp8" if fp8 else "decode"
    names = names or (["64x4096", "8x4096", "1x4096", "32x16384", "ragged64"] if fp8 else
                      ["ragged64", "ragged8", "1x4096", "8x4096", "32x16384", "64x4096", "256x1024"])
    shapes = {}
    for name in names:
        lens, S = DECODE_SHAPES[name]
        nbytes = decode_bytes(lens, 1 if fp8 else 2)
        sets = gh.rotated_sets(lambda j, lens=lens, S=S: decode_set(lens, S, seed=3000 + j, fp8=fp8), nbytes)
        shapes[name] = dict(sets=sets, S=S, nbytes=nbytes, ref=decode_reference(sets[0], SCALE, fp8=fp8),
                            small=len(lens) * H_KV < 256)
    plan = ([(p, n) for p in FP8_GRID for n in names] if fp8 else
            [(p, n) for p in [{}] + COMMON for n in names]
            + [(p, n) for p in SMALL_EXTRA + SMALL_EXTRA_MORE for n in names if shapes[n]["small"]]
            + [(p, n) for p in LARGE_EXTRA for n in names if not shapes[n]["small"]])
    rows = []
    for params, name in plan:
        row = dict(kind=kind, shape=name, params=params)
        if budget.over():
            rows.append(dict(row, skipped=True))
            continue
        sh = shapes[name]
        made = gh.attempt(row, triton_calls, sh["sets"], sh["S"], fp8, **dict(params))
        if made:
            row["config"] = made[1].__dict__
            gh.attempt(row, _time, row, made[0], sh["ref"])
            if "us" in row:
                row["frac_copy"] = sh["nbytes"] / (row["us"] * 1e-6) / 1e9 / copy_gbs
        rows.append(row)
        gh.log(f"  {kind} {name:>9} {str(params):60} " + (
            f"{row['us']:8.1f} us {row['frac_copy']:6.1%}{'' if row['correct'] else ' WRONG'}"
            if "us" in row else row.get("error", "")[:90]))
    del shapes
    torch.cuda.empty_cache() if gh.CUDA else None
    return rows


def prefill_sweep(budget, fp8: bool = False, names: list[str] | None = None) -> list:
    """Configs outermost (each compiles once), every shape inside; fp8: the same grid on fp8 caches."""
    kind = "prefill_fp8" if fp8 else "prefill"
    shapes = {}
    for name in names or PREFILL_SHAPES:
        seq_lens, q_lens, S = PREFILL_SHAPES[name]
        sets = gh.rotated_sets(lambda j, a=seq_lens, b=q_lens, S=S: prefill_set(a, b, S, seed=4000 + j,
                                                                                fp8=fp8), 1 << 30, max_sets=2)
        shapes[name] = dict(sets=sets, ref=prefill_reference(sets[0], fp8=fp8),
                            flops=prefill_flops(seq_lens, q_lens))
    rows = []
    for params in PREFILL_GRID:
        for name, sh in shapes.items():
            row = dict(kind=kind, shape=name, params=params)
            if budget.over():
                rows.append(dict(row, skipped=True))
                continue
            made = gh.attempt(row, prefill_calls, sh["sets"], fp8, **params)
            if made:
                gh.attempt(row, _time, row, made[0], sh["ref"], 10)
                if "us" in row:
                    row["tflops"] = sh["flops"] / (row["us"] * 1e-6) / 1e12
            rows.append(row)
            gh.log(f"  {kind} {name} {str(params):70} " + (
                f"{row['us']:9.1f} us {row['tflops']:6.1f} TFLOP/s{'' if row['correct'] else ' WRONG'}"
                if "us" in row else row.get("error", "")[:90]))
    del shapes
    torch.cuda.empty_cache() if gh.CUDA else None
    return rows


# ----------------------------------------------------------------------------------------------------------
# summary

def _fastest(rows):
    ok = [r for r in rows if r.get("correct") and "us" in r]
    return min(ok, key=lambda r: r["us"]) if ok else None


def best_configs(rows) -> dict:
    best = {"decode": {}, "prefill": {}, "common": {}}
    for kind, key in (("decode", "bf16"), ("decode_fp8", "fp8")):
        for name in DECODE_SHAPES:
            b = _fastest([r for r in rows if r["kind"] == kind and r["shape"] == name])
            if b:
                best["decode"].setdefault(name, {})[key] = dict(b["params"])
                best["decode"][name][key + "_us"] = b["us"]
    for name in PREFILL_SHAPES:
        b = _fastest([r for r in rows if r["kind"] == "prefill" and r["shape"] == name])
        if b:
            best["prefill"][name] = dict(b["params"])
        b = _fastest([r for r in rows if r["kind"] == "prefill_fp8" and r["shape"] == name])
        if b:
            best.setdefault("prefill_fp8", {})[name] = dict(b["params"])
    for kind, grid in (("decode", [{}] + COMMON), ("prefill", PREFILL_GRID), ("prefill_fp8", PREFILL_GRID),
                       ("decode_fp8", FP8_GRID)):
        shapes = {r["shape"] for r in rows if r["kind"] == kind}
        scores = []
        for params in grid:
            ratios = []
            for name in shapes:
                mine = [r for r in rows if r["kind"] == kind and r["shape"] == name and r["params"] == params
                        and r.get("correct")]
                top = _fastest([r for r in rows if r["kind"] == kind and r["shape"] == name])
                ratios.append(top["us"] / mine[0]["us"] if mine and top else 0.0)
            if ratios:
                scores.append((min(ratios), params, dict(zip(sorted(shapes), [round(x, 3) for x in ratios]))))
        if scores:
            worst, params, per_shape = max(scores, key=lambda t: t[0])
            best["common"][kind] = dict(params=params, worst_ratio_to_best=worst, per_shape=per_shape)
    return best


def table(result) -> str:
    failed = [r["check"] for r in result["correctness"] if not r.get("ok") and not r.get("skipped")]
    skipped = [r["check"] for r in result["correctness"] if r.get("skipped")]
    n = len(result["correctness"]) - len(skipped)
    lines = [f"correctness: {n - len(failed)} of {n} checks ok"
             + (f"; FAILED: {', '.join(failed)}" if failed else "")
             + (f"; skipped (budget): {', '.join(skipped)}" if skipped else "")]
    rows = result["rows"]
    for kind in ("decode", "decode_fp8", "prefill", "prefill_fp8"):
        for name in list(DECODE_SHAPES) + list(PREFILL_SHAPES):
            mine = [r for r in rows if r["kind"] == kind and r["shape"] == name]
            if not mine:
                continue
            default = next((r for r in mine if r["params"] in (PREFILL_DEFAULT, {})), {})
            top = _fastest(mine)
            pre = kind.startswith("prefill")
            unit = "TFLOP/s" if pre else "of copy"
            val = (lambda r: r.get("tflops", 0)) if pre else (lambda r: r.get("frac_copy", 0))
            fmt = (lambda x: f"{x:6.1f}") if pre else (lambda x: f"{x:6.1%}")
            d = f"{default['us']:8.1f} us {fmt(val(default))}" if "us" in default else "   -"
            t = f"{top['us']:8.1f} us {fmt(val(top))} {top['params']}" if top else "-"
            lines.append(f"{kind:>10} {name:>22}  default {d} {unit} | best {t}")
    for kind, c in result["best"]["common"].items():
        lines.append(f"common {kind}: {c['params']} worst ratio to per-shape best "
                     f"{c['worst_ratio_to_best']:.3f}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=220.0)
    ap.add_argument("--sections", default="correctness,decode,prefill,decode_fp8",
                    help="comma-separated, in order: correctness, decode, prefill, prefill_fp8, decode_fp8")
    ap.add_argument("--decode-shapes", help="decode sections: these shapes only (comma-separated)")
    ap.add_argument("--prefill-shapes", help="prefill sections: these shapes only (comma-separated)")
    args = ap.parse_args()
    decode_names = args.decode_shapes.split(",") if args.decode_shapes else None
    prefill_names = args.prefill_shapes.split(",") if args.prefill_shapes else None
    total = gh.Budget(args.budget_s)
    out = Path(args.out)
    result = dict(env=gh.environment(), copy_gbs=gh.measure_copy_bandwidth(), correctness=[], rows=[],
                  started=time.strftime("%Y-%m-%d %H:%M:%S"))
    gh.log(f"{result['env']}; copy {result['copy_gbs']:.0f} GB/s")
    shares = {"correctness": 0.18, "decode": 0.38, "prefill": 0.32, "prefill_fp8": 0.2, "decode_fp8": 0.12}
    sections = [(name, shares[name]) for name in args.sections.split(",")]
    left = sum(share for _, share in sections)
    for name, share in sections:
        budget = gh.Budget(max(0.0, args.budget_s - total.used()) * share / left)
        left -= share
        gh.log(f"section {name}: {budget.seconds:.0f} s")
        entry = {}
        if name == "correctness":
            rows = gh.attempt(entry, correctness, budget)
            result["correctness"] = rows or [dict(check="all", ok=False, **entry)]
        elif name.startswith("prefill"):
            fp8 = name == "prefill_fp8"
            result["rows"] += gh.attempt(entry, prefill_sweep, budget, fp8, prefill_names) or []
        else:
            fp8 = name == "decode_fp8"
            rows = gh.attempt(entry, decode_sweep, budget, fp8, result["copy_gbs"], decode_names)
            result["rows"] += rows or []
        if "error" in entry:
            gh.log(f"section {name} failed: {entry['error']}")
            result.setdefault("section_errors", {})[name] = entry
        result["best"] = best_configs(result["rows"])
        gh.write_json(out / "sweep.json", result)
    gh.finish(result, total, out, "sweep", table)


if __name__ == "__main__":
    main()
