"""Paged prefill (varlen) attention on one GPU: the course's Triton kernel vs SDPA on contiguous K/V.

    PYTHONPATH=. python benchmarks/bench_prefill.py --out OUT [--tuned OUT/sweep.json] [--budget-s 100]

Writes OUT/bench_prefill.json and OUT/bench_prefill.txt.

Model shape H = 32, H_kv = 8, D = 128, block size 16, bf16. Shapes: 8 sequences x 2048 new tokens (empty
cache) and 16 x (2048 cached + 512 new). TFLOP/s count the causal work once (4 * D * H per visible
(query, key) pair); every figure is also a ratio to anchors of the SAME run: the fastest SDPA row, and a
dense bf16 8192^3 matmul (the compute peak actually reachable here). The copy bandwidth is measured too, so
that the JSON holds both ceilings of a roofline (notebook 12 draws prefill and decode on one).
Baselines on CONTIGUOUS K/V, bottom-right causal: is_causal=True when q_len == kv_len, else
torch.nn.attention.bias.causal_lower_right(q_len, kv_len). Default dispatch, then FLASH, EFFICIENT, CUDNN
each forced. SDPA is timed in its own output layout [B, H, q_len, D]: the transpose to the kernel's
[T, H, D] (a copy the kernel does not make) is left out of its time (until 2026-12 it was timed with it,
which charged cuDNN 680 instead of 544 us at 8 x 2048). GQA: enable_gqa=True first; where a backend
rejects it, K/V heads repeated G times beforehand (outside the timing; the row says `gqa: repeat`); where
the causal bias has no kernel under a forced backend, an explicit boolean lower-right mask (`causal: mask`).
The kernel that really ran is read from the profiler (`backend`): a forced backend can silently fall through
to another inside the causal-bias path. FlashInfer's BatchPrefillWithPagedKVCacheWrapper, backends fa2 and
fa3, on the same paged caches where FlashInfer is installed (flashinfer_baselines.py); issue 39's targets
compare the kernel with the faster of fa3 and the best SDPA row.
`vllm_unified`: vLLM's own Triton kernel (triton_unified_attention.py, vllm_baselines.py) on the same caches.
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
    H_KV,
    PREFILL_SHAPES,
    D,
    G,
    H,
    gathered,
    prefill_bytes,
    prefill_flops,
    prefill_set,
)

from pagedkv_lib.kernels.triton_prefill_attention import choose_prefill_config, launch_prefill_attention

SCALE = D**-0.5
SDPA_LAYOUT = "[B, H, q_len, D]: SDPA's own output layout; the copy to the kernel's [T, H, D] is not timed"
TARGETS = {"cold8x2048": 0.65, "cold32x512": 0.50, "chunked16x(2048+512)": 1.00}   # of the fastest SDPA
FLASHINFER = {"flashinfer_fa2": "fa2", "flashinfer_fa3": "fa3"}    # row: the prefill wrapper's backend
BASELINE_TARGETS = {"cold8x2048": 0.8, "cold1x8192": 0.8, "chunked16x(2048+512)": 0.8, "cold32x512": 0.6}
SDPA_BACKENDS = {"sdpa_default": None, "sdpa_flash": "FLASH_ATTENTION",
                 "sdpa_efficient": "EFFICIENT_ATTENTION", "sdpa_cudnn": "CUDNN_ATTENTION"}


def prefill_calls(sets, fp8=False, **over):
    cfg = choose_prefill_config(H, H_KV, D, torch.bfloat16, interpreted=not gh.CUDA,
                                cache_bytes=1 if fp8 else 2, **over)

    def call(s):
        kc, vc = (s["k_fp8"], s["v_fp8"]) if fp8 else (s["k_cache"], s["v_cache"])
        scales = dict(k_scale=s["k_scale"], v_scale=s["v_scale"]) if fp8 else {}
        return launch_prefill_attention(s["q"], kc, vc, s["block_tables"], s["seq_lens"], s["cu_seqlens_q"],
                                        SCALE, cfg, **scales)
    return [functools.partial(call, s) for s in sets], cfg


def _causal(q_len: int, kv_len: int, how: str, device):
    """(attn_mask, is_causal) for bottom-right causal attention."""
    if q_len == kv_len:
        return None, True
    if how == "bias":
        from torch.nn.attention.bias import causal_lower_right

        return causal_lower_right(q_len, kv_len), False
    mask = torch.ones(q_len, kv_len, dtype=torch.bool, device=device).tril(diagonal=kv_len - q_len)
    return mask, False


def sdpa_calls(sets, backend: str | None, gqa: str, causal: str):
    calls = []
    for s in sets:
        q, k, v = s["q4"], s["k"], s["v"]                               # [B, H, q, D], [B, H_kv, L, D]
        if gqa == "repeat":
            k, v = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)   # [B, H, L, D]
        mask, is_causal = _causal(q.shape[2], k.shape[2], causal, q.device)

        def call(q=q, k=k, v=v, mask=mask, is_causal=is_causal):
            ctx = (torch.nn.attention.sdpa_kernel(getattr(torch.nn.attention.SDPBackend, backend)) if backend
                   else contextlib.nullcontext())
            with ctx:                                                   # SDPA's own layout, no copy
                return F.scaled_dot_product_attention(                  # [B, H, q_len, D]
                    q, k, v, attn_mask=mask, is_causal=is_causal, scale=SCALE, enable_gqa=gqa == "enable_gqa")
        calls.append(call)
    return calls


def as_thd(out: torch.Tensor) -> torch.Tensor:
    """SDPA's [B, H, q_len, D] as the kernel's [T, H, D] (for the error check only, never timed)."""
    return out.transpose(1, 2).reshape(-1, H, D) if out.dim() == 4 else out


def reference(s, fp8: bool = False) -> torch.Tensor:
    """fp32 math SDPA, bottom-right causal, K/V heads repeated (fp8: on the dequantized cache): [T, H, D]."""
    q, k, v = s["q4"].float(), s["k"].float(), s["v"].float()
    if fp8:
        k, v = gathered(s, s["k_fp8"], s["k_scale"]), gathered(s, s["v_fp8"], s["v_scale"])
    k, v = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)
    mask, is_causal = _causal(q.shape[2], k.shape[2], "mask", q.device)
    outs = []
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        for b in range(q.shape[0]):                                     # one sequence at a time: memory
            one = slice(b, b + 1)
            outs.append(F.scaled_dot_product_attention(q[one], k[one], v[one], attn_mask=mask,
                                                       is_causal=is_causal, scale=SCALE))
    return torch.cat(outs).transpose(1, 2).reshape(-1, H, D)


def measure(entry, calls, ref, flops, samples):
    out = as_thd(calls[0]())
    entry["rel_err"] = gh.rel_err(out.float(), ref)
    entry["correct"] = entry["rel_err"] < 2e-2
    entry.update(gh.time_calls(calls, samples=samples, min_calls=6))
    entry["tflops"] = flops / (entry["us"] * 1e-6) / 1e12


def bench_shape(name, tuned, tuned_fp8, samples, matmul_tflops) -> dict:
    seq_lens, q_lens, S = PREFILL_SHAPES[name]
    flops = prefill_flops(seq_lens, q_lens)
    nbytes = sum(seq_lens) * H_KV * D * 2 * 2 * 2                         # caches + contiguous copies
    sets = gh.rotated_sets(lambda i: prefill_set(seq_lens, q_lens, S, seed=2000 + i, fp8=True), nbytes,
                           max_sets=2)
    ref, ref8 = reference(sets[0]), reference(sets[0], fp8=True)
    row = dict(shape=name, B=len(seq_lens), q_len=q_lens[0], kv_len=seq_lens[0], block_size=S, flops=flops,
               bytes=prefill_bytes(seq_lens, q_lens), methods={}, sdpa_output_layout=SDPA_LAYOUT)
    methods = {"triton": lambda: prefill_calls(sets)}
    if tuned.get(name):
        methods["triton_tuned"] = lambda: prefill_calls(sets, **tuned[name])
    methods["triton_fp8"] = lambda: prefill_calls(sets, fp8=True)   # the default tiles: the engine's
    if tuned_fp8.get(name):
        methods["triton_fp8_tuned"] = lambda: prefill_calls(sets, fp8=True, **tuned_fp8[name])
    for label, make in methods.items():
        entry = row["methods"].setdefault(label, {})
        made = gh.attempt(entry, make)
        if made:
            entry["config"] = made[1].__dict__
            gh.attempt(entry, measure, entry, made[0], ref8 if "fp8" in label else ref, flops, samples)
            if "us" in entry:
                first = made[0][0]().clone()
                entry["deterministic"] = torch.equal(first, made[0][0]())
        gh.log(f"  {name} {label:>16} " + (f"{entry['us']:9.1f} us {entry['tflops']:6.1f} TFLOP/s"
                                            if "us" in entry else entry.get("error", "")[:100]))
    chunked = q_lens[0] != seq_lens[0]
    variants = [("enable_gqa", "bias"), ("repeat", "bias"), ("repeat", "mask")] if chunked else \
               [("enable_gqa", "bias"), ("repeat", "bias")]
    for label, backend in SDPA_BACKENDS.items():
        entry = row["methods"].setdefault(label, {})
        for gqa, causal in variants:                                    # the first variant that runs
            trial = dict(gqa=gqa, causal=causal if chunked else "is_causal")
            calls = gh.attempt(trial, sdpa_calls, sets, backend, gqa, causal)
            if calls is not None:
                gh.attempt(trial, measure, trial, calls, ref, flops, samples)
            if "us" in trial:
                trial["kernels"] = gh.attempt(trial, gh.kernel_names, calls[0]) or []
                trial["backend"] = gh.sdpa_backend(trial["kernels"])
                entry.update(trial)
                entry.pop("error", None)
                break
            entry.setdefault("failed_variants", []).append(f"{gqa}/{causal}: {trial.get('error', '')[:200]}")
            entry["error"] = trial.get("error", "")
        gh.log(f"  {name} {label:>16} " + (f"{entry['us']:9.1f} us {entry['tflops']:6.1f} TFLOP/s "
                                            f"[{entry.get('backend')}, gqa {entry.get('gqa')}]"
                                            if "us" in entry else entry.get("error", "")[:100]))
    peers = {label: ({"backend": f"flashinfer {fi.version()} {backend}"},              # libraries' kernels
                     functools.partial(fi.prefill_calls, sets, S, (H, H_KV, D), SCALE, backend))
             for label, backend in FLASHINFER.items()}
    peers["vllm_unified"] = ({"backend": vb.describe(), "source": vb.source()},
                             functools.partial(vb.prefill_calls, sets, SCALE))
    for label, (described, make) in peers.items():
        entry = row["methods"].setdefault(label, described)
        calls = gh.attempt(entry, make)
        if calls:
            gh.attempt(entry, measure, entry, calls, ref, flops, samples)
        gh.log(f"  {name} {label:>16} " + (f"{entry['us']:9.1f} us {entry['tflops']:6.1f} TFLOP/s"
                                            if "us" in entry else entry.get("error", "")[:100]))
    for a, b in (("triton_fp8", "triton"), ("triton_fp8_tuned", "triton_tuned")):   # default vs default
        fp8, bf16 = row["methods"].get(a, {}), row["methods"].get(b, {})
        if "us" in bf16 and "us" in fp8:
            fp8["speedup_vs_bf16"] = bf16["us"] / fp8["us"]
    sdpa = {k: m for k, m in row["methods"].items() if k.startswith("sdpa") and m.get("correct")}
    if sdpa:
        best = max(sdpa, key=lambda k: sdpa[k]["tflops"])
        row["best_sdpa"] = dict(method=best, tflops=sdpa[best]["tflops"], backend=sdpa[best].get("backend"))
    baselines = {k: m for k, m in row["methods"].items()
                 if (k.startswith("sdpa") or k == "flashinfer_fa3") and m.get("correct")}
    if baselines:
        best = max(baselines, key=lambda k: baselines[k]["tflops"])
        row["best_baseline"] = dict(method=best, tflops=baselines[best]["tflops"])
    for m in row["methods"].values():
        if "tflops" in m:
            m["frac_best_sdpa"] = m["tflops"] / row["best_sdpa"]["tflops"] if sdpa else float("nan")
            m["frac_matmul"] = m["tflops"] / matmul_tflops
    return row


def table(result) -> str:
    lines = [f"{result['env'].get('device', 'cpu')}: dense bf16 matmul {result['matmul_tflops']:.0f} TFLOP/s",
             f"{'shape':>22} {'method':>15} {'us':>9} {'TFLOP/s':>8} {'of best SDPA':>12} {'of matmul':>9} "
             f"{'err':>8}  note"]
    for r in result["shapes"]:
        for label, m in r["methods"].items():
            if "us" not in m:
                lines.append(f"{r['shape']:>22} {label:>15} {'-':>9}  {m.get('error', '')[:70]}")
                continue
            note = f"[{m['backend']}]" if "backend" in m else ""
            if "gqa" in m:
                note += f" gqa {m['gqa']} causal {m['causal']}"
            if "config" in m:
                c = m["config"]
                note = f"M{c['block_m']} N{c['block_n']} w{c['num_warps']} s{c['num_stages']}"
            lines.append(f"{r['shape']:>22} {label:>15} {m['us']:9.1f} {m['tflops']:8.1f} "
                         f"{m.get('frac_best_sdpa', float('nan')):12.1%} {m['frac_matmul']:9.1%} "
                         f"{m['rel_err']:8.1e}  {note}")
        if "best_sdpa" in r:
            bound = TARGETS.get(r["shape"])
            for label in ("triton", "triton_tuned"):
                m = r["methods"].get(label, {})
                if "frac_best_sdpa" in m and bound:
                    ok = "MET" if m["frac_best_sdpa"] >= bound else "missed"
                    best = f"{r['best_sdpa']['method']}, {r['best_sdpa']['backend']}"
                    lines.append(f"  target {r['shape']} {label}: {m['frac_best_sdpa']:.1%} of the best SDPA "
                                 f"({best}) >= {bound:.0%}: {ok}")
            bound = BASELINE_TARGETS.get(r["shape"])
            for label in ("triton", "triton_tuned"):
                m = r["methods"].get(label, {})
                if "tflops" in m and bound and "best_baseline" in r:
                    frac = m["tflops"] / r["best_baseline"]["tflops"]
                    lines.append(f"  target {r['shape']} {label}: {frac:.1%} of the faster of FlashInfer fa3 "
                                 f"and SDPA ({r['best_baseline']['method']}) >= {bound:.0%}: "
                                 f"{'MET' if frac >= bound else 'missed'}")
            for label in ("triton_fp8", "triton_fp8_tuned"):
                m = r["methods"].get(label, {})
                if "speedup_vs_bf16" in m:
                    ok = "MET" if m["speedup_vs_bf16"] >= 1.0 else "missed"
                    lines.append(f"  target {r['shape']} {label}: {m['speedup_vs_bf16']:.2f}x the bf16 "
                                 f"kernel (same tiles policy) >= 1.00x: {ok}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tuned", help="sweep.json written by sweep_kernels.py (its `best` entry)")
    ap.add_argument("--budget-s", type=float, default=100.0)
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--shapes", help="comma-separated names (default: all): " + ",".join(PREFILL_SHAPES))
    args = ap.parse_args()
    budget = gh.Budget(args.budget_s)
    out = Path(args.out)
    tuned, tuned_fp8 = {}, {}
    if args.tuned and Path(args.tuned).exists():
        best = json.loads(Path(args.tuned).read_text()).get("best", {})
        tuned, tuned_fp8 = best.get("prefill", {}), best.get("prefill_fp8", {})
    result = dict(env=gh.environment(), model=dict(H=H, H_kv=H_KV, D=D, dtype="bfloat16"),
                  matmul_tflops=gh.measure_matmul_tflops(),
                  copy_gbs=gh.measure_copy_bandwidth(), shapes=[], skipped=[],
                  started=time.strftime("%Y-%m-%d %H:%M:%S"))
    gh.log(f"dense bf16 matmul {result['matmul_tflops']:.0f} TFLOP/s; tuned configs for {sorted(tuned)}")
    one = functools.partial(bench_shape, tuned=tuned, tuned_fp8=tuned_fp8, samples=args.samples,
                            matmul_tflops=result["matmul_tflops"])
    names = args.shapes.split(",") if args.shapes else list(PREFILL_SHAPES)
    gh.run_shapes(result, names, budget, one, out, "bench_prefill", table)


if __name__ == "__main__":
    main()
