"""Paged MLA decode on one GPU: the course's Triton kernel at DeepSeek-V3's decode shapes, against the
roofline (copy bandwidth and dense bf16 matmul measured in the same run) and the PyTorch reference.

    PYTHONPATH=. python benchmarks/bench_mla.py [--out benchmarks/results] [--smoke]

Shapes (core/mla_attention.py): H = 128 query heads, C = kv_lora_rank 512, R = 64, W = 576, page S = 64
(FlashMLA's), bf16; batch B in 1..128, every context n tokens (1k..32k), tables shuffled over the pool.
Per call: FLOPs = B * 2 * H * n * (W + C) (scores, then p . c); bytes = B * n * W * 2 (the latent rows, read
once) + q and the output. Times as in bench_decode.py: median CUDA-graph replay over rotated input sets
(gpu_harness.time_calls). Several configs (BLOCK_H, BLOCK_N, warps, stages) per shape of the teaching kernel
(triton_mla_decode.py), each with the split count `choose_num_splits` gives it (v2 split-KV when B x H /
BLOCK_H programs leave SMs idle), and of the tuned kernel (triton_mla_decode_tuned.py, TMA or pointers, with
the splits `choose_tuned_splits` gives at 4, 2 and 1 tiles per split at least); FlashInfer's MLA kernels
(fa2, fa3; flashinfer_baselines.py) on the same inputs. The table shows each kernel's fastest config, and
the tuned kernel's speed over fa3's; the JSON keeps all. The PyTorch reference (a loop over sequences) is
timed for B <= 8.
--smoke: tiny shapes in Triton's interpreter on the CPU, to show the script runs end to end (its times mean
nothing). Writes OUT/bench_mla.json and OUT/bench_mla.txt.
"""
from __future__ import annotations

import argparse
import functools
from pathlib import Path

import flashinfer_baselines as fi
import torch
from gpu_harness import (
    CUDA,
    Budget,
    attempt,
    environment,
    log,
    measure_copy_bandwidth,
    measure_matmul_tflops,
    num_sms,
    rel_err,
    rotated_sets,
    time_calls,
    write_json,
)

from pagedkv_lib.core.mla_attention import mla_latent_attention, mla_scale
from pagedkv_lib.kernels.triton_mla_decode import choose_num_splits, launch_mla_decode
from pagedkv_lib.kernels.triton_mla_decode_tuned import choose_tuned_splits, launch_mla_decode_tuned

FULL = dict(H=128, C=512, R=64, Dn=128, S=64, batches=(1, 8, 32, 64, 128),
            contexts=(1024, 4096, 16384, 32768))
SMOKE = dict(H=16, C=32, R=16, Dn=16, S=16, batches=(2,), contexts=(40,))
CONFIGS = [  # the teaching kernel: BLOCK_H, BLOCK_N, num_warps, num_stages (the best two of the five that
    (16, 32, 4, 2), (64, 32, 8, 1),            # the H200 and the first H100 run timed)
]
TUNED_CONFIGS = [  # triton_mla_decode_tuned.py: BLOCK_H, BLOCK_N, num_warps, num_stages, whole tiles by TMA
    (64, 64, 8, 2, False), (64, 64, 8, 2, True), (64, 32, 8, 3, True), (64, 32, 8, 2, False),
]
SMOKE_TUNED = [(16, 16, 4, 1, False), (16, 16, 4, 1, True)]
FLASHINFER = ("fa2", "fa3")         # BatchMLAPagedAttentionWrapper backends
TARGETS = {1: 1.0, 64: 0.6, 128: 0.6}    # B: the tuned kernel's speed over FlashInfer fa3's (issue 39)
REFERENCE_MAX_B = 8


def make_set(shape: dict, B: int, n: int, seed: int) -> dict:
    """Latent queries [B, H, W] and a pool [N, S, W] holding B contexts of n tokens in shuffled blocks."""
    device = "cuda" if CUDA else "cpu"
    gen = torch.Generator(device=device).manual_seed(seed)
    H, W, S = shape["H"], shape["C"] + shape["R"], shape["S"]
    per_seq = -(-n // S)
    num_blocks = B * per_seq
    kv_cache = torch.randn(num_blocks, S, W, device=device, generator=gen).to(torch.bfloat16)   # [N, S, W]
    order = torch.randperm(num_blocks, device=device, generator=gen)                           # [N]
    block_tables = order.reshape(B, per_seq).to(torch.int32)                                   # [B, M]
    q_latent = torch.randn(B, H, W, device=device, generator=gen).to(torch.bfloat16)           # [B, H, W]
    return dict(q=q_latent, kv_cache=kv_cache, block_tables=block_tables,
                context_lens=torch.full((B,), n, dtype=torch.int32, device=device),
                out=torch.empty(B, H, shape["C"], dtype=torch.bfloat16, device=device))      # [B, H, C]


def measure(entry: dict, call, sets: list, reference, flops: int, nbytes: int, copy_gbs: float,
            matmul_tflops: float) -> None:
    """Run call(set) once on sets[0] (its error against the reference), then time it over every set."""
    s0 = sets[0]
    s0["out"].fill_(float("nan"))
    attempt(entry, call, s0)
    if "error" in entry:
        return
    entry["rel_err"] = rel_err(s0["out"], reference)
    timed = attempt(entry, time_calls, [functools.partial(call, s) for s in sets])
    if timed:
        us = timed["us"]
        entry.update(us=us, timing=timed["timing"], tflops=flops / (us * 1e-6) / 1e12,
                     tbps=nbytes / (us * 1e-6) / 1e12)
        entry.update(frac_copy=entry["tbps"] * 1e3 / copy_gbs, frac_matmul=entry["tflops"] / matmul_tflops)


def bench_shape(shape: dict, B: int, n: int, copy_gbs: float, matmul_tflops: float) -> dict:
    H, C, R = shape["H"], shape["C"], shape["R"]
    W = C + R
    scale = mla_scale(shape["Dn"], R)
    nbytes = B * n * W * 2 + B * H * (W + C) * 2
    flops = B * 2 * H * n * (W + C)
    sets = rotated_sets(lambda i: make_set(shape, B, n, seed=1000 * B + n + i), nbytes, max_sets=8)
    s0 = sets[0]
    row = dict(B=B, context_len=n, bytes=nbytes, flops=flops, rotated_sets=len(sets), configs={})
    reference = mla_latent_attention(s0["q"], s0["kv_cache"], s0["block_tables"], s0["context_lens"], C,
                                     scale)
    variants = {}
    for block_h, block_n, warps, stages in CONFIGS:
        splits = choose_num_splits(B, H, n, num_sms(), block_h=block_h)
        variants[f"h{block_h}-n{block_n}-w{warps}-s{stages}-p{splits}"] = functools.partial(
            launch_mla_decode, num_splits=splits, block_h=block_h, block_n=block_n, num_warps=warps,
            num_stages=stages)
        if not CUDA:
            break                                       # the interpreter: one config shows the script runs
    for block_h, block_n, warps, stages, tma in TUNED_CONFIGS if CUDA else SMOKE_TUNED:
        choices = {choose_tuned_splits(B, H, n, num_sms(), block_h, block_n, min_tiles=t) for t in (4, 2, 1)}
        for splits in sorted(choices):
            name = f"tuned-h{block_h}-n{block_n}-w{warps}-s{stages}-p{splits}" + ("-tma" if tma else "")
            variants[name] = functools.partial(launch_mla_decode_tuned, num_splits=splits, block_h=block_h,
                                               block_n=block_n, num_warps=warps, num_stages=stages, tma=tma)
    for name, launch in variants.items():
        entry = {"num_splits": launch.keywords["num_splits"]}

        def call(s, launch=launch):
            launch(s["q"], s["kv_cache"], s["block_tables"], s["context_lens"], C, scale, s["out"])

        measure(entry, call, sets, reference, flops, nbytes, copy_gbs, matmul_tflops)
        row["configs"][name] = entry
    for backend in FLASHINFER:
        entry = {"backend": f"flashinfer {fi.version()} {backend}"}
        calls = attempt(entry, fi.mla_calls, sets, C, scale, backend)
        if calls:
            by_set = dict(zip(map(id, sets), calls))                # each writes its set's `out`
            measure(entry, lambda s, by_set=by_set: by_set[id(s)](), sets, reference, flops, nbytes, copy_gbs,
                    matmul_tflops)
        row["flashinfer_" + backend] = entry
        log(f"  B {B} context {n} flashinfer {backend}: {entry.get('us', entry.get('error', ''))}")
    for label, tuned in (("best_teaching", False), ("best_tuned", True)):
        timed = [(e["us"], k) for k, e in row["configs"].items()
                 if "us" in e and k.startswith("tuned") == tuned]
        row[label] = min(timed)[1] if timed else None
    if B <= REFERENCE_MAX_B:
        ref = time_calls([lambda: mla_latent_attention(s0["q"], s0["kv_cache"], s0["block_tables"],
                                                       s0["context_lens"], C, scale)], samples=5)
        row["reference_us"] = ref["us"]
    return row


def table(result: dict) -> str:
    lines = [f"{result['env'].get('device', 'cpu')}: copy {result['copy_gbs']:.0f} GB/s (read + write), "
             f"bf16 matmul {result['matmul_tflops']:.0f} TFLOP/s",
             f"{'B':>4} {'context':>7} {'method':>28} {'us':>9} {'TFLOP/s':>8} {'TB/s':>6} "
             f"{'of copy':>8} {'of matmul':>9} {'rel err':>8} {'torch ref us':>12}"]
    for r in result["shapes"]:
        if "configs" not in r:
            lines.append(f"{r.get('B', '?'):>4} {r.get('context_len', '?'):>7} failed: {r.get('error', r)}")
            continue
        ref = f"{r['reference_us']:12.1f}" if "reference_us" in r else f"{'-':>12}"
        shown = [(r.get("best_teaching"), r["configs"].get(r.get("best_teaching"))),
                 (r.get("best_tuned"), r["configs"].get(r.get("best_tuned")))]
        shown += [(f"flashinfer_{b}", r.get(f"flashinfer_{b}")) for b in FLASHINFER]
        for name, e in shown:
            if not name or e is None:
                continue
            if "us" not in e:
                lines.append(f"{r['B']:>4} {r['context_len']:>7} {name:>28} {e.get('error', '?')[:70]}")
                continue
            lines.append(f"{r['B']:>4} {r['context_len']:>7} {name:>28} {e['us']:9.1f} {e['tflops']:8.1f} "
                         f"{e['tbps']:6.2f} {e['frac_copy']:8.1%} {e['frac_matmul']:9.1%} "
                         f"{e['rel_err']:8.1e} {ref}")
        fa3 = r.get("flashinfer_fa3", {})
        for label in ("best_teaching", "best_tuned"):
            e = r["configs"].get(r.get(label), {})
            if "us" in e and "us" in fa3:
                bound = TARGETS.get(r["B"])
                verdict = f" (target >= {bound}x: {'MET' if fa3['us'] / e['us'] >= bound else 'missed'})" \
                    if bound and label == "best_tuned" else ""
                lines.append(f"{'':>13}{label}: {fa3['us'] / e['us']:.2f}x FlashInfer fa3's speed{verdict}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes in the interpreter (CPU)")
    ap.add_argument("--budget-s", type=float, default=480.0)
    ap.add_argument("--batches", help="comma-separated batch sizes (default: all)")
    ap.add_argument("--contexts", help="comma-separated context lengths (default: all)")
    args = ap.parse_args()
    shape = dict(SMOKE if args.smoke or not CUDA else FULL)
    for key in ("batches", "contexts"):
        if getattr(args, key):
            shape[key] = tuple(int(x) for x in getattr(args, key).split(","))
    out = Path(args.out)
    budget = Budget(args.budget_s)
    dims = {k: v for k, v in shape.items() if k not in ("batches", "contexts")}
    result = dict(env=environment(), shape=dims, copy_gbs=measure_copy_bandwidth(),
                  matmul_tflops=measure_matmul_tflops(), shapes=[], skipped=[])
    for B in shape["batches"]:
        for n in shape["contexts"]:
            if budget.over():
                result["skipped"].append([B, n])
                continue
            entry = {"B": B, "context_len": n}
            row = attempt(entry, bench_shape, shape, B, n, result["copy_gbs"], result["matmul_tflops"])
            result["shapes"].append(row or entry)
            log(f"B {B} context {n}: {(row or entry).get('best_tuned', entry.get('error'))}")
            write_json(out / "bench_mla.json", result)
    text = table(result)
    (out / "bench_mla.txt").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
