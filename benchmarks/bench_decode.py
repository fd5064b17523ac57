"""Paged decode attention on one GPU: the course's Triton kernel (v1, v2, v3, fp8 caches) vs SDPA baselines.

    PYTHONPATH=. python benchmarks/bench_decode.py --out OUT [--tuned OUT/sweep.json] [--budget-s 150]

Writes OUT/bench_decode.json (every row) and OUT/bench_decode.txt (the table and the target verdicts).
Model shape H = 32, H_kv = 8, D = 128, block size 16, bf16 q. Shapes: B x C uniform, and ragged batches
(B = 64, L ~ U[1, 8192]; B = 8, L ~ U[100, 4096]; seeded). Every figure is a ratio to an anchor of the SAME
run: effective bandwidth = bytes of K/V of the ACTUAL tokens + q + out, over time, / device-to-device copy
bandwidth; fp8 rows count fp8 bytes and give the speedup over the bf16 cache (v3) in the same run.
Baselines on CONTIGUOUS K/V (a layout a paged cache does not have): SDPA under default dispatch (the
backend it picked is read from the profiler's kernel names), and FLASH, EFFICIENT, CUDNN each forced; GQA
folded into the query length (q viewed [B, H_kv, G, D]: exact for one query per sequence); ragged batches
padded to the longest context with a key mask (the padding's bytes are not counted: its cost is the
baseline's); `flash_varlen`: aten._flash_attention_forward on packed ragged K/V (no padding).
FlashInfer's BatchDecodeWithPagedKVCacheWrapper on the same paged caches, on CUDA cores
(`flashinfer_decode`) and tensor cores (`flashinfer_decode_tc`), where FlashInfer is installed
(flashinfer_baselines.py; elsewhere the rows say "not installed"); the targets compare v3 with the faster.
`vllm_unified`: vLLM's own Triton kernel (triton_unified_attention.py, vllm_baselines.py) on the bf16 caches.
The library's rows use its defaults (PDL where the device has it); triton_vN times DecodeConfig version N,
whose kernel the table's note names (triton_decode_attention.KERNELS: v1 paged_decode_kernel, v2
split_kv_decode_kernel + reduce_splits, v3 chunked_decode_kernel + merge_chunks); `triton_tuned` the sweep's
fastest config for that shape (sweep_kernels.py). Timing: median of CUDA-graph replays over rotated input sets
(gpu_harness.py). A failing method is recorded and the script goes on; a time budget bounds the run (shapes
not reached are listed as skipped).
"""
import argparse
import contextlib
import functools
import json
import time
from pathlib import Path

import flashinfer_baselines as fi
import gpu_harness as gh
import torch
import torch.nn.functional as F
import vllm_baselines as vb
from attention_workloads import (
    DECODE_SHAPES,
    DEVICE,
    H_KV,
    D,
    G,
    H,
    decode_bytes,
    decode_reference,
    decode_set,
)

from pagedkv_lib.kernels.attention_args import pdl_supported
from pagedkv_lib.kernels.decode_config import choose_config
from pagedkv_lib.kernels.triton_decode_attention import KERNELS, launch_decode_attention

SCALE = D**-0.5
FP8_SHAPES = tuple(DECODE_SHAPES)          # fp8 must never be slower than bf16: measured at every shape
FP8_TARGETS = {"64x4096": 1.6}             # fp8 v3 over bf16 v3; every other shape: >= 1.0 (never slower)
SDPA_BACKENDS = {"sdpa_flash": "FLASH_ATTENTION", "sdpa_efficient": "EFFICIENT_ATTENTION",
                 "sdpa_cudnn": "CUDNN_ATTENTION"}
FLASHINFER = {"flashinfer_decode": False, "flashinfer_decode_tc": True}   # row: use_tensor_cores
TARGETS = {  # shape: (method, kind, bound) -- "frac" >= bound, "us" <= bound
    "ragged64": ("triton_v3", "frac", 0.92), "ragged8": ("triton_v3", "frac", 0.60),
    "1x4096": ("triton_v3", "us", 9.0), "8x4096": ("triton_v3", "frac", 0.85),
    "64x4096": ("triton_v3", "frac", 0.98), "32x16384": ("triton_v3", "frac", 0.98),
    "256x1024": ("triton_v3", "frac", 0.98),
}


def triton_calls(sets, S, fp8=False, **over):
    B, M = sets[0]["block_tables"].shape
    over.setdefault("pdl", pdl_supported(torch.device(DEVICE)))       # the library's default
    cfg = choose_config(B, H, H_KV, D, M * S, over.pop("num_splits", None), num_sms=gh.num_sms(),
                        interpreted=not gh.CUDA, cache_bytes=1 if fp8 else 2, **over)

    def call(s):
        kc, vc = (s["k_fp8"], s["v_fp8"]) if fp8 else (s["k_cache"], s["v_cache"])
        scales = dict(k_scale=s["k_scale"], v_scale=s["v_scale"]) if fp8 else {}
        return launch_decode_attention(s["q"], kc, vc, s["block_tables"], s["context_lens"], SCALE, cfg,
                                       **scales)
    return [functools.partial(call, s) for s in sets], cfg


def sdpa_calls(sets, backend: str | None):
    def call(s):
        B = s["q"].shape[0]
        q = s["q"].view(B, H_KV, G, D)                                  # [B, H_kv, G, D]: GQA in the q length
        mask = s["key_mask"] if s["ragged"] else None
        ctx = (torch.nn.attention.sdpa_kernel(getattr(torch.nn.attention.SDPBackend, backend)) if backend
               else contextlib.nullcontext())
        with ctx:
            out = F.scaled_dot_product_attention(q, s["k"], s["v"], attn_mask=mask, scale=SCALE)
        return out.reshape(B, H, D)
    return [functools.partial(call, s) for s in sets]


def flashinfer_calls(sets, S, tensor_cores: bool):
    return fi.decode_calls(sets, S, (H, H_KV, D), SCALE, tensor_cores), None


def _flash_varlen(q, k, v, cu_q, cu_k, max_k):
    return torch.ops.aten._flash_attention_forward(q, k, v, cu_q, cu_k, 1, max_k, 0.0, False, False,
                                                   scale=SCALE)[0]        # [B, H, D]


def flash_varlen_calls(sets):
    calls = []
    for s in sets:
        lens = s["context_lens"]
        valid = (torch.arange(s["k"].shape[2], device=lens.device)[None, :] < lens[:, None])  # [B, L_max]
        k = s["k"].transpose(1, 2)[valid].contiguous()                  # [total, H_kv, D] packed
        v = s["v"].transpose(1, 2)[valid].contiguous()
        cu_k = torch.zeros(len(s["lens"]) + 1, dtype=torch.int32, device=lens.device)
        cu_k[1:] = lens.cumsum(0)
        cu_q = torch.arange(len(s["lens"]) + 1, dtype=torch.int32, device=lens.device)

        calls.append(functools.partial(_flash_varlen, s["q"], k, v, cu_q, cu_k, max(s["lens"])))
    return calls


def measure(entry, calls, ref, nbytes, copy_gbs, samples):
    out = calls[0]()
    entry["rel_err"] = gh.rel_err(out.float(), ref)
    entry["correct"] = entry["rel_err"] < 2e-2
    entry.update(gh.time_calls(calls, samples=samples))
    entry["tbps"] = nbytes / (entry["us"] * 1e-6) / 1e12
    entry["frac_copy"] = entry["tbps"] * 1e3 / copy_gbs


def bench_shape(name, tuned, copy_gbs, samples) -> dict:
    lens, S = DECODE_SHAPES[name]
    fp8 = name in FP8_SHAPES
    nbytes, nbytes8 = decode_bytes(lens), decode_bytes(lens, cache_bytes=1)
    sets = gh.rotated_sets(lambda i: decode_set(lens, S, seed=1000 + i, fp8=fp8, contiguous=True), nbytes)
    ref = decode_reference(sets[0], SCALE)                              # [B, H, D] fp32
    row = dict(shape=name, B=len(lens), tokens=sum(lens), max_len=max(lens), block_size=S, bytes=nbytes,
               bytes_fp8=nbytes8, flops=4 * sum(lens) * H * D, sets=len(sets), methods={})
    methods = {"triton_v1": lambda: triton_calls(sets, S, version=1),
               "triton_v2": lambda: triton_calls(sets, S, version=2),
               "triton_v3": lambda: triton_calls(sets, S)}
    best = tuned.get(name, {}).get("bf16")
    if best:                                                            # the sweep's fastest (may be v2)
        methods["triton_tuned"] = lambda: triton_calls(sets, S, **best)
    if fp8:
        methods["fp8_v3"] = lambda: triton_calls(sets, S, fp8=True)
        best8 = tuned.get(name, {}).get("fp8")
        if best8:
            methods["fp8_tuned"] = lambda: triton_calls(sets, S, fp8=True, **best8)
    methods["sdpa_default"] = lambda: (sdpa_calls(sets, None), None)
    for label, backend in SDPA_BACKENDS.items():
        methods[label] = functools.partial(lambda b: (sdpa_calls(sets, b), None), backend)
    methods["flash_varlen"] = lambda: (flash_varlen_calls(sets), None)
    for label, tensor_cores in FLASHINFER.items():
        methods[label] = functools.partial(flashinfer_calls, sets, S, tensor_cores)
    methods["vllm_unified"] = lambda: (vb.decode_calls(sets, S, SCALE), None)       # bf16 caches only
    row["methods"]["vllm_unified"] = dict(backend=vb.describe(), source=vb.source())  # even if none ran
    ref8 = decode_reference(sets[0], SCALE, fp8=True) if fp8 else None
    for label, make in methods.items():
        entry = row["methods"].setdefault(label, {})
        made = gh.attempt(entry, make)
        if made is None:
            continue
        calls, cfg = made
        if cfg is not None:
            entry["config"] = cfg.__dict__
        is8 = label.startswith("fp8")
        gh.attempt(entry, measure, entry, calls, ref8 if is8 else ref, nbytes8 if is8 else nbytes, copy_gbs,
                   samples)
        if cfg is not None and "us" in entry:
            first = calls[0]().clone()
            entry["deterministic"] = all(torch.equal(first, calls[0]()) for _ in range(3))
        if label in FLASHINFER:
            entry["backend"] = f"flashinfer {fi.version()} {'tensor cores' if FLASHINFER[label] else 'fa2'}"
        if label.startswith("sdpa") or label == "flash_varlen":
            entry["kernels"] = gh.attempt(entry, gh.kernel_names, calls[0]) or []
            entry["backend"] = gh.sdpa_backend(entry["kernels"])
        gh.log(f"  {name:>10} {label:>16} " + (f"{entry['us']:9.1f} us {entry['frac_copy']:7.1%} of copy"
                                                if "us" in entry else entry.get("error", "")[:80]))
    for a, b in (("fp8_v3", "triton_v3"), ("fp8_tuned", "triton_tuned")):
        if "us" in row["methods"].get(a, {}) and "us" in row["methods"].get(b, {}):
            row["methods"][a]["speedup_vs_bf16"] = row["methods"][b]["us"] / row["methods"][a]["us"]
    sdpa = [m for k, m in row["methods"].items()
            if (k.startswith("sdpa") or k == "flash_varlen") and m.get("correct")]
    if sdpa:
        row["best_baseline_us"] = min(m["us"] for m in sdpa)
    timed = [m["us"] for k, m in row["methods"].items() if k in FLASHINFER and m.get("correct")]
    if timed:
        row["flashinfer_us"] = min(timed)
    return row


def table(result) -> str:
    lines = [f"{result['env'].get('device', 'cpu')}: copy {result['copy_gbs']:.0f} GB/s (read + write)",
             f"{'shape':>10} {'method':>16} {'us':>8} {'of copy':>8} {'vs best base':>12} {'err':>8}  note"]
    for r in result["shapes"]:
        for label, m in r["methods"].items():
            if "us" not in m:
                lines.append(f"{r['shape']:>10} {label:>16} {'-':>8}  {m.get('error', '')[:70]}")
                continue
            note = m.get("backend", "")
            if "speedup_vs_bf16" in m:
                note += f"{m['speedup_vs_bf16']:.2f}x vs bf16"
            if "config" in m:
                c = m["config"]
                kernel = KERNELS[c["version"]].fn.__name__
                note += f" v{c['version']} {kernel} n{c['block_n']} w{c['num_warps']} s{c['num_stages']}" + (
                    " pdl" if c.get("pdl") else "")
            vs = r.get("best_baseline_us", float("nan")) / m["us"]
            lines.append(f"{r['shape']:>10} {label:>16} {m['us']:8.1f} {m['frac_copy']:8.1%} {vs:11.2f}x "
                         f"{m['rel_err']:8.1e}  {note}")
    lines.append("targets (same run):")
    for r in result["shapes"]:
        v3 = r["methods"].get("triton_v3", {})
        if "flashinfer_us" in r and "us" in v3:
            ratio = r["flashinfer_us"] / v3["us"]
            lines.append(f"  {r['shape']:>10} {'triton_v3':>16}: {ratio:.2f}x the fastest FlashInfer row "
                         f"({r['flashinfer_us']:.1f} us) >= 1.0: {'MET' if ratio >= 1.0 else 'missed'}")
        if r["shape"] in TARGETS:
            method, kind, bound = TARGETS[r["shape"]]
            for label in (method, "triton_tuned"):
                m = r["methods"].get(label, {})
                if "us" in m:
                    val = m["us"] if kind == "us" else m["frac_copy"]
                    ok = val <= bound if kind == "us" else val >= bound
                    lines.append(f"  {r['shape']:>10} {label:>16}: {val:.3g} ({kind}) target "
                                 f"{'<=' if kind == 'us' else '>='} {bound}: {'MET' if ok else 'missed'}")
        for label in ("fp8_v3", "fp8_tuned"):
            m = r["methods"].get(label, {})
            if "speedup_vs_bf16" in m:
                bound = FP8_TARGETS.get(r["shape"], 1.0)
                ok = "MET" if m["speedup_vs_bf16"] >= bound else "missed"
                lines.append(f"  {r['shape']:>10} {label:>16}: {m['speedup_vs_bf16']:.2f}x vs bf16 "
                             f"(>= {bound}: {ok}), {m['frac_copy']:.1%} of copy over fp8 bytes")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tuned", help="sweep.json written by sweep_kernels.py (its `best` entry)")
    ap.add_argument("--budget-s", type=float, default=150.0)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--shapes", help="comma-separated names (default: all): " + ",".join(DECODE_SHAPES))
    args = ap.parse_args()
    budget = gh.Budget(args.budget_s)
    out = Path(args.out)
    tuned = {}
    if args.tuned and Path(args.tuned).exists():
        tuned = json.loads(Path(args.tuned).read_text()).get("best", {}).get("decode", {})
    result = dict(env=gh.environment(), model=dict(H=H, H_kv=H_KV, D=D, dtype="bfloat16"),
                  copy_gbs=gh.measure_copy_bandwidth(), shapes=[], skipped=[],
                  started=time.strftime("%Y-%m-%d %H:%M:%S"))
    gh.log(f"copy bandwidth {result['copy_gbs']:.0f} GB/s; tuned configs for {sorted(tuned)}")
    names = args.shapes.split(",") if args.shapes else list(DECODE_SHAPES)
    one = functools.partial(bench_shape, tuned=tuned, copy_gbs=result["copy_gbs"], samples=args.samples)
    gh.run_shapes(result, names, budget, one, out, "bench_decode", table)


if __name__ == "__main__":
    main()
