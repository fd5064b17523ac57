"""Shared-prefix decode on one GPU: the course's cascade kernel vs its own paged decode over the whole context
vs SDPA, with the bytes each reads and the floor those bytes set.

    PYTHONPATH=. python benchmarks/bench_cascade.py [--out benchmarks/results] [--budget-s 420] [--smoke]
        [--prefixes 4096] [--suffix 256]

Shapes: B in (64, 128, 256) sequences sharing a prefix of P in (1024, 4096, 8192) tokens, each with its own
suffix of 64 tokens (--suffix N: N tokens), one decode query each; H = 32 query heads, H_kv = 8, D = 128,
block size 16, bf16. The prefix's blocks are the first columns of every block table (the same ids), the
rest shuffled over the pool.
Methods:
    cascade      triton_cascade_attention (prefix once for the batch, suffix through the decode kernel, merge)
    paged_v3     triton_decode_attention with its defaults (v3, PDL where the device has it), all P + suffix
    sdpa         F.scaled_dot_product_attention under default dispatch on CONTIGUOUS K/V
                 [B, H_kv, P + suffix, D], GQA folded into the query length (q viewed [B, H_kv, G, D]); the
                 backend it picked is read from the profiler's kernel names
    cascade_m*   the cascade with the prefix kernel's other tiles and warps (CONFIGS); the table shows the
                 fastest of them, the speedups are the default's
    flashinfer_cascade  FlashInfer's MultiLevelCascadeAttentionWrapper, 2 levels (flashinfer_baselines.py;
                 "not installed" without FlashInfer)
Bytes: the cache K/V each method must read (core.cascade_attention.kv_bytes_read: plain decode and SDPA read
the prefix B times, the cascade once) + q + out; the cascade's fp32 states are listed apart. Floor: those
bytes / the device-to-device copy bandwidth measured in the same run (gpu_harness). Timing: median CUDA-graph
replay over rotated input sets (gpu_harness.time_calls). Each row also gives vLLM's rule's verdict
(core.cascade_attention.use_cascade_attention) for the shape. --smoke: tiny shapes in Triton's interpreter on
the CPU (its times mean nothing). Writes OUT/bench_cascade.json and OUT/bench_cascade.txt.
"""
from __future__ import annotations

import argparse
import functools
from dataclasses import replace
from pathlib import Path

import flashinfer_baselines as fi
import gpu_harness as gh
import torch
import torch.nn.functional as F

from pagedkv_lib.core.cascade_attention import kv_bytes_read, use_cascade_attention
from pagedkv_lib.kernels.attention_args import pdl_supported
from pagedkv_lib.kernels.decode_config import choose_config
from pagedkv_lib.kernels.triton_cascade_attention import choose_cascade_config, launch_cascade_attention
from pagedkv_lib.kernels.triton_decode_attention import launch_decode_attention

FULL = dict(H=32, H_kv=8, D=128, S=16, suffix=64, batches=(64, 128, 256), prefixes=(1024, 4096, 8192))
SMOKE = dict(H=4, H_kv=2, D=16, S=8, suffix=5, batches=(3,), prefixes=(32,))
DEVICE = "cuda" if gh.CUDA else "cpu"
STEM = "bench_cascade"
CONFIGS = [  # BLOCK_M, BLOCK_N, num_warps, num_stages: the prefix kernel's alternatives to its default
    (64, 64, 4, 3), (128, 64, 8, 2), (128, 32, 4, 2), (64, 32, 4, 2),
]
SMOKE_CONFIGS = [(32, 16, 4, 2)]   # the interpreter: one alternative, so that --smoke runs this path too


def make_set(shape: dict, B: int, P: int, seed: int) -> dict:
    """A pool holding one shared prefix of P tokens and B suffixes, block tables, q, and contiguous K/V."""
    H, H_kv, D, S, n = shape["H"], shape["H_kv"], shape["D"], shape["S"], shape["suffix"]
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    n_prefix = P // S
    n_own = -(-n // S)
    N = n_prefix + B * n_own
    dtype = torch.bfloat16 if gh.CUDA else torch.float32
    k_cache = torch.randn(N, S, H_kv, D, device=DEVICE, generator=gen).to(dtype)        # [N, S, H_kv, D]
    v_cache = torch.randn(N, S, H_kv, D, device=DEVICE, generator=gen).to(dtype)        # [N, S, H_kv, D]
    ids = torch.randperm(N, device=DEVICE, generator=gen).to(torch.int32)               # [N]
    shared = ids[:n_prefix].expand(B, n_prefix)                                         # [B, n_prefix]
    block_tables = torch.cat([shared, ids[n_prefix:].view(B, n_own)], dim=1).contiguous()  # [B, M]
    L = P + n
    q = torch.randn(B, H, D, device=DEVICE, generator=gen).to(dtype)                    # [B, H, D]
    rows = k_cache[block_tables.long()].reshape(B, -1, H_kv, D)[:, :L]                  # [B, L, H_kv, D]
    k = rows.transpose(1, 2).contiguous()                                               # [B, H_kv, L, D]
    v = v_cache[block_tables.long()].reshape(B, -1, H_kv, D)[:, :L].transpose(1, 2).contiguous()
    return dict(q=q, k_cache=k_cache, v_cache=v_cache, block_tables=block_tables, n_prefix=n_prefix,
                context_lens=torch.full((B,), L, dtype=torch.int32, device=DEVICE), k=k, v=v)


def sdpa(s: dict, shape: dict, scale: float, dtype=None) -> torch.Tensor:
    B, H, D = s["q"].shape
    q = s["q"].view(B, shape["H_kv"], H // shape["H_kv"], D)                            # [B, H_kv, G, D]
    k, v = s["k"], s["v"]
    if dtype is not None:
        q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    return F.scaled_dot_product_attention(q, k, v, scale=scale).reshape(B, H, D)        # [B, H, D]


def reference(s: dict, shape: dict, scale: float) -> torch.Tensor:
    """SDPA in float32, 16 sequences at a time (the fp32 copy of the largest shape would not fit twice)."""
    outs = []
    for b0 in range(0, s["q"].shape[0], 16):
        part = {key: s[key][b0 : b0 + 16] for key in ("q", "k", "v")}
        outs.append(sdpa(part, shape, scale, torch.float32))
    return torch.cat(outs)                                                              # [B, H, D] fp32


def bench_shape(shape: dict, B: int, P: int, copy_gbs: float) -> dict:
    H, H_kv, D, S, n = shape["H"], shape["H_kv"], shape["D"], shape["S"], shape["suffix"]
    scale = D**-0.5
    elem = 2 if gh.CUDA else 4
    kv = kv_bytes_read(B, P, n, H_kv, D, elem)
    qo = 2 * B * H * D * elem
    sets = gh.rotated_sets(lambda i: make_set(shape, B, P, seed=1000 * B + P + i), kv["cascade"] + qo,
                           max_sets=8)
    s0 = sets[0]
    sms = gh.num_sms()
    cas_cfg = choose_cascade_config(B, H, H_kv, D, P, num_sms=sms, interpreted=not gh.CUDA)
    M = s0["block_tables"].shape[1]
    dec_cfg = choose_config(B, H, H_kv, D, M * S, num_sms=sms, interpreted=not gh.CUDA,
                            pdl=pdl_supported(torch.device(DEVICE)))
    states = B * H * (1 + cas_cfg.num_splits) * (D + 1) * 4 * 2                      # fp32, written + read
    row = dict(B=B, prefix=P, suffix=n, rotated_sets=len(sets), cascade_config=cas_cfg.__dict__,
               rule=use_cascade_attention(P, [1] * B, H, H_kv, sms), state_bytes=states, methods={})

    def cascade(s, cfg=cas_cfg):
        return launch_cascade_attention(s["q"], s["k_cache"], s["v_cache"], s["block_tables"],
                                        s["context_lens"], scale, s["n_prefix"], cfg)

    def paged(s):
        return launch_decode_attention(s["q"], s["k_cache"], s["v_cache"], s["block_tables"],
                                       s["context_lens"], scale, dec_cfg)

    flashinfer_runs = {}

    def flashinfer_cascade(s):
        """FlashInfer's 2-level cascade, planned once per set on first use (outside the timed region:
        time_calls calls each set once before it times)."""
        if id(s) not in flashinfer_runs:
            flashinfer_runs[id(s)] = fi.cascade_calls([s], S, (H, H_kv, D), scale)[0]
        return flashinfer_runs[id(s)]()

    ref = reference(s0, shape, scale)
    methods = {"cascade": (cascade, kv["cascade"] + qo), "paged_v3": (paged, kv["paged"] + qo),
               "sdpa": (functools.partial(sdpa, shape=shape, scale=scale), kv["paged"] + qo)}
    alternatives = CONFIGS if gh.CUDA else SMOKE_CONFIGS
    methods["flashinfer_cascade"] = (flashinfer_cascade, kv["cascade"] + qo)
    for block_m, block_n, warps, stages in alternatives:
        cfg = replace(choose_cascade_config(B, H, H_kv, D, P, num_sms=sms, interpreted=not gh.CUDA,
                                            block_m=block_m, block_n=block_n), num_warps=warps,
                      num_stages=stages)
        name = f"cascade_m{block_m}_n{block_n}_w{warps}_s{stages}"
        methods[name] = (functools.partial(cascade, cfg=cfg), kv["cascade"] + qo)
    for label, (fn, nbytes) in methods.items():
        entry = row["methods"].setdefault(label, {"bytes": nbytes})
        out = gh.attempt(entry, fn, s0)
        if out is None:
            continue
        entry["rel_err"] = gh.rel_err(out, ref)
        timed = gh.attempt(entry, gh.time_calls, [functools.partial(fn, s) for s in sets])
        if timed:
            entry.update(us=timed["us"], timing=timed["timing"],
                         floor_us=nbytes / (copy_gbs * 1e9) * 1e6 if gh.CUDA else float("nan"))
            entry["of_floor"] = entry["floor_us"] / entry["us"]
        if label == "flashinfer_cascade":
            entry["backend"] = f"flashinfer {fi.version()}, 2 levels"
        if label == "sdpa":
            entry["kernels"] = gh.attempt(entry, gh.kernel_names, functools.partial(fn, s0)) or []
            entry["backend"] = gh.sdpa_backend(entry["kernels"])
        gh.log(f"B {B} prefix {P} {label:>22}: " + (f"{entry['us']:9.1f} us" if "us" in entry
                                                    else entry.get("error", "")[:80]))
    m = row["methods"]
    tried = [(e["us"], k) for k, e in m.items() if k.startswith("cascade_") and "us" in e]
    if tried:
        row["best_cascade_config"] = min(tried)[1]
    for other in ("paged_v3", "sdpa", "flashinfer_cascade"):
        if "us" in m["cascade"] and "us" in m.get(other, {}):
            row[f"speedup_vs_{other}"] = m[other]["us"] / m["cascade"]["us"]
    return row


def table(result: dict) -> str:
    lines = [f"{result['env'].get('device', 'cpu (interpreter: times mean nothing)')}: copy "
             f"{result['copy_gbs']:.0f} GB/s (read + write); H {result['shape']['H']}, H_kv "
             f"{result['shape']['H_kv']}, D {result['shape']['D']}, block {result['shape']['S']}, own suffix "
             f"{result['shape']['suffix']} tokens",
             f"{'B':>4} {'prefix':>6} {'method':>22} {'us':>9} {'MB read':>9} {'floor us':>9} "
             f"{'of floor':>8} {'rel err':>8} {'note':>14}"]
    for r in result["shapes"]:
        if "methods" not in r:
            lines.append(f"{r.get('B', '?'):>4} {r.get('prefix', '?'):>6} failed: {r.get('error', r)}")
            continue
        shown = ["cascade", r.get("best_cascade_config"), "paged_v3", "sdpa", "flashinfer_cascade"]
        for label, e in [(k, r["methods"][k]) for k in shown if k in r["methods"]]:
            if "us" not in e:
                lines.append(f"{r['B']:>4} {r['prefix']:>6} {label:>22} failed: {e.get('error', '?')[:60]}")
                continue
            note = e.get("backend", "")
            if label == "cascade":
                note = f"rule: {'cascade' if r['rule'] else 'plain'}"
            if label == "flashinfer_cascade":
                note = "flashinfer"
            lines.append(f"{r['B']:>4} {r['prefix']:>6} {label:>22} {e['us']:9.1f} {e['bytes'] / 1e6:9.1f} "
                         f"{e['floor_us']:9.1f} {e['of_floor']:8.1%} {e['rel_err']:8.1e} {note:>14}")
        speed = [f"{r[k]:.2f}x over {k[11:]}" for k in ("speedup_vs_paged_v3", "speedup_vs_sdpa",
                                                        "speedup_vs_flashinfer_cascade") if k in r]
        if speed:
            lines.append(f"{'':>11} cascade (default config): " + ", ".join(speed))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes in the interpreter (CPU)")
    ap.add_argument("--budget-s", type=float, default=420.0)
    ap.add_argument("--prefixes", help="comma-separated shared prefix lengths (default: all)")
    ap.add_argument("--suffix", type=int, help="each sequence's own tokens after the prefix (default: 64)")
    args = ap.parse_args()
    shape = dict(SMOKE if args.smoke or not gh.CUDA else FULL)
    if args.prefixes:
        shape["prefixes"] = tuple(int(x) for x in args.prefixes.split(","))
    if args.suffix:
        shape["suffix"] = args.suffix
    out = Path(args.out)
    budget = gh.Budget(args.budget_s)
    dims = {k: v for k, v in shape.items() if k not in ("batches", "prefixes")}
    result = dict(env=gh.environment(), shape=dims, copy_gbs=gh.measure_copy_bandwidth(), shapes=[],
                  skipped=[])
    for B in shape["batches"]:
        for P in shape["prefixes"]:
            if budget.over():
                result["skipped"].append([B, P])
                continue
            entry = {"B": B, "prefix": P}
            row = gh.attempt(entry, bench_shape, shape, B, P, result["copy_gbs"])
            result["shapes"].append(row or entry)
            gh.write_json(out / f"{STEM}.json", result)
    gh.finish(result, budget, out, STEM, table)


if __name__ == "__main__":
    main()
