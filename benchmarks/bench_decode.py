"""Paged decode attention on one GPU: the course's Triton kernel vs SDPA and PyTorch's paged flex_attention.

    PYTHONPATH=. python benchmarks/bench_decode.py [--sweep] [--no-flex] [--out benchmarks/results]

Shapes: docs/conventions.md (H = 32, H_kv = 8, D = 128); `sets` = input sets rotated through so that L2 (60 MB
on an H200) holds none of them.
Order: device-to-device copy bandwidth first (the ceiling), then per shape a correctness check of every method
against fp32 SDPA on fresh random inputs, then timing. Times are medians of CUDA-graph replays of R calls on R
input sets (no launch gaps, cold L2); `eager_us` is triton.testing.do_bench (L2 flushed, launches included).
Effective bandwidth = bytes of K/V read + q read + out written, over time.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import triton

from pagedkv_lib.kernels import backend
from pagedkv_lib.kernels.triton_decode_attention import choose_config, launch_decode_attention

H, H_KV, D, DTYPE = 32, 8, 128, torch.bfloat16
SHAPES = [(1, 4096, 16), (8, 4096, 16), (64, 4096, 16), (128, 2048, 16), (32, 16384, 16), (256, 1024, 16),
          (8, 4096, 1), (8, 4096, 256)]                               # (B, L, S)
L2_BYTES = 60e6
FLEX_PAGE = 128


def measure_copy_bandwidth(nbytes: int = 2**31) -> float:
    """GB/s of a device-to-device copy, counting bytes read + written (median of do_bench)."""
    src = torch.randn(nbytes // 4, device="cuda")                    # fp32, 2 GiB
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median")
    return 2 * nbytes / (ms * 1e-3) / 1e9


def time_graph(calls, samples: int = 30, min_calls: int = 24) -> float:
    """Median microseconds per call: one CUDA graph cycles through the calls (one per input set) at least
    `min_calls` times in all, so the graph's own launch latency is spread over many calls."""
    for c in calls:
        c()
    torch.cuda.synchronize()
    calls = calls * math.ceil(min_calls / len(calls))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for c in calls:
            c()
    for _ in range(3):
        graph.replay()
    times = []
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / len(calls))
    return statistics.median(times)


def time_eager(fn) -> float:
    return triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median") * 1e3


def make_set(B: int, L: int, S: int, seed: int) -> dict:
    """One input set: q, the paged cache (blocks in random order), and the same K/V contiguous."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    M = L // S
    q = torch.randn(B, H, D, device="cuda", generator=gen).to(DTYPE)              # [B, H, D]
    k = torch.randn(B, H_KV, L, D, device="cuda", generator=gen).to(DTYPE)        # [B, H_kv, L, D]
    v = torch.randn(B, H_KV, L, D, device="cuda", generator=gen).to(DTYPE)        # [B, H_kv, L, D]
    perm = torch.randperm(B * M, device="cuda", generator=gen)
    tables = perm.view(B, M).to(torch.int32)                                        # [B, M]
    k_cache = torch.empty(B * M, S, H_KV, D, dtype=DTYPE, device="cuda")           # [N, S, H_kv, D]
    v_cache = torch.empty_like(k_cache)
    k_cache[perm] = k.transpose(1, 2).reshape(B * M, S, H_KV, D)
    v_cache[perm] = v.transpose(1, 2).reshape(B * M, S, H_KV, D)
    lens = torch.full((B,), L, dtype=torch.int32, device="cuda")                   # [B]
    return dict(q=q, k=k, v=v, k_cache=k_cache, v_cache=v_cache, block_tables=tables, context_lens=lens)


def sdpa_contiguous(s: dict, scale: float):
    B = s["q"].shape[0]
    q = s["q"].view(B, H_KV, H // H_KV, D)                            # [B, H_kv, G, D]: GQA folded into q len
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(q, s["k"], s["v"], scale=scale).reshape(B, H, D)


def gather_sdpa(s: dict, scale: float):
    B, M = s["block_tables"].shape
    idx = s["block_tables"].long()
    k = s["k_cache"][idx].view(B, -1, H_KV, D).transpose(1, 2)       # [B, H_kv, L, D] gathered
    v = s["v_cache"][idx].view(B, -1, H_KV, D).transpose(1, 2)
    q = s["q"].view(B, H_KV, H // H_KV, D)
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, scale=scale).reshape(B, H, D)


def make_flex(sets: list, B: int, L: int, scale: float):
    """PyTorch's experimental paged flex_attention (page 128), one cache per input set; returns calls."""
    from torch.nn.attention.experimental._paged_attention import PagedAttention
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention, noop_mask

    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 64)
    n_pages = B * L // FLEX_PAGE
    paged = PagedAttention(n_pages, FLEX_PAGE, B, device="cuda")
    for b in range(B):
        paged.reserve(torch.tensor(b, device="cuda"), torch.tensor(L, device="cuda"))
    mask = create_block_mask(noop_mask, B, None, 1, L, device="cuda", BLOCK_SIZE=FLEX_PAGE)
    mask = paged.convert_logical_block_mask(mask)
    score_mod = paged.get_score_mod(None)
    flex = torch.compile(flex_attention, dynamic=False)
    batch_idx = torch.arange(B, device="cuda")
    pos = torch.arange(L, device="cuda").expand(B, L)
    calls = []
    for s in sets:
        kc = torch.empty(1, H_KV, n_pages * FLEX_PAGE, D, dtype=DTYPE, device="cuda")  # [1, H_kv, pages*P, D]
        vc = torch.empty_like(kc)
        paged.assign(batch_idx, pos, s["k"], s["v"], kc, vc)
        q = s["q"].view(B, H, 1, D)

        def call(q=q, kc=kc, vc=vc):
            out = flex(q, kc, vc, block_mask=mask, score_mod=score_mod, enable_gqa=True, scale=scale)
            return out.reshape(B, H, D)
        calls.append(call)
    return calls


def triton_calls(sets, scale, **overrides):
    B, M = sets[0]["block_tables"].shape
    S = sets[0]["k_cache"].shape[1]
    num_splits = overrides.pop("num_splits", None)
    cfg = choose_config(B, H, H_KV, D, M * S, num_splits, num_sms=NUM_SMS, interpreted=False, **overrides)
    calls = [lambda s=s: launch_decode_attention(s["q"], s["k_cache"], s["v_cache"], s["block_tables"],
                                                 s["context_lens"], scale, cfg) for s in sets]
    return calls, cfg


def rel_err(out, ref) -> float:
    return ((out.float() - ref).norm() / ref.norm()).item()


def bench_shape(B, L, S, copy_gbs, flex: bool, sweep: list | None) -> dict:
    scale = D**-0.5
    nbytes = 2 * B * L * H_KV * D * 2 + 2 * B * H * D * 2                # K, V read; q read; out written
    R = min(32, max(2, math.ceil(3 * L2_BYTES / nbytes)))
    sets = [make_set(B, L, S, seed=1000 * B + L + i) for i in range(R)]
    s0 = sets[0]
    ref = F.scaled_dot_product_attention(s0["q"].float().view(B, H_KV, H // H_KV, D), s0["k"].float(),
                                         s0["v"].float(), scale=scale).reshape(B, H, D)   # [B, H, D] fp32
    row = dict(B=B, L=L, block_size=S, bytes=nbytes, rotated_sets=R, methods={})
    methods = {"triton": None, "triton_v1": None, "sdpa_contiguous": sdpa_contiguous,
               "gather_sdpa": gather_sdpa}
    if flex and S == 16:
        methods["flex_paged"] = "flex"
    for name, fn in methods.items():
        entry = row["methods"].setdefault(name, {})
        try:
            if name.startswith("triton"):
                over = {"num_splits": 1} if name == "triton_v1" else {}                # v1: no split-KV
                calls, cfg = triton_calls(sets, scale, **over)
                entry["config"] = cfg.__dict__
                first = calls[0]().clone()
                entry["deterministic"] = all(torch.equal(first, calls[0]()) for _ in range(5))  # a race?
            elif name == "flex_paged":
                entry["page_size"] = FLEX_PAGE
                calls = make_flex(sets, B, L, scale)
            else:
                calls = [lambda s=s, fn=fn: fn(s, scale) for s in sets]
            entry["rel_err"] = rel_err(calls[0](), ref)
            entry["correct"] = entry["rel_err"] < 2e-2
            try:
                entry["us"] = time_graph(calls)
            except Exception as exc:  # noqa: BLE001  (e.g. a compiled baseline that cannot be captured)
                entry["timing"] = f"eager: graph capture failed ({type(exc).__name__})"
                entry["us"] = time_eager(calls[0])
            entry["eager_us"] = time_eager(calls[0])
            entry["tbps"] = nbytes / (entry["us"] * 1e-6) / 1e12
            entry["frac_copy"] = entry["tbps"] * 1e3 / copy_gbs
        except Exception as exc:  # noqa: BLE001  (record why a baseline does not run)
            entry["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        torch.cuda.synchronize()
    if sweep is not None and S == 16:
        sweep.extend(sweep_shape(sets, scale, B, L, S, nbytes, copy_gbs))
    return row


def sweep_shape(sets, scale, B, L, S, nbytes, copy_gbs) -> list:
    """Tile sizes and stages (4 warps) with the automatic split count, and split counts at small batch."""
    out = []
    small = B * H_KV < 256
    tiles = [(64, 2), (128, 2), (128, 3)] if small else [(64, 2), (64, 3), (128, 2)]
    splits = [None, 2, 4, 6, 8, 12, 16, 32, 64] if small else [None]
    grid = [dict(block_n=n, num_stages=st, num_splits=p) for n, st in tiles for p in splits
            if p is None or p * n <= L]
    for over in grid:
        try:
            calls, cfg = triton_calls(sets, scale, **dict(over))
            us = time_graph(calls, samples=15)
            out.append(dict(B=B, L=L, block_size=S, **over, splits=cfg.num_splits, us=us,
                            frac_copy=nbytes / (us * 1e-6) / 1e9 / copy_gbs))
        except Exception as exc:  # noqa: BLE001
            out.append(dict(B=B, L=L, block_size=S, **over, error=f"{type(exc).__name__}: {str(exc)[:200]}"))
    return out


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["shapes"]
    names = ["triton", "triton_v1", "sdpa_contiguous", "gather_sdpa", "flex_paged"]
    fig, ax = plt.subplots(figsize=(9, 3.6))
    width = 0.16
    for i, name in enumerate(names):
        ys = [r["methods"].get(name, {}).get("frac_copy", 0) for r in rows]
        ax.bar([j + (i - 2) * width for j in range(len(rows))], ys, width, label=name)
    ax.set_xticks(range(len(rows)), [f"{r['B']}x{r['L']}\nbs{r['block_size']}" for r in rows], fontsize=8)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_ylabel("fraction of copy bandwidth")
    title = f"paged decode, bf16, H={H}, H_kv={H_KV}, D={D}; copy {result['copy_gbs']:.0f} GB/s"
    ax.set_title(title, fontsize=9)
    ax.set_ylim(0, 1.3)
    ax.legend(fontsize=7, ncol=5, loc="upper center")
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def table(result: dict) -> str:
    lines = [f"{result['device']}; copy bandwidth {result['copy_gbs']:.0f} GB/s (read + write)",
             f"{'shape':>16} {'method':>16} {'graph us':>9} {'eager us':>9} {'TB/s':>6} {'of copy':>8} "
             f"{'err':>8}"]
    for r in result["shapes"]:
        for name, m in r["methods"].items():
            shape = f"{r['B']}x{r['L']} bs{r['block_size']}"
            if "us" in m:
                lines.append(f"{shape:>16} {name:>16} {m['us']:9.1f} {m['eager_us']:9.1f} {m['tbps']:6.2f} "
                             f"{m['frac_copy']:8.1%} {m['rel_err']:8.1e}")
            else:
                lines.append(f"{shape:>16} {name:>16} {m.get('error', '')[:60]}")
    return "\n".join(lines)


def main() -> None:
    global NUM_SMS
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--sweep", action="store_true", help="also sweep tiles, warps, stages and split counts")
    ap.add_argument("--no-flex", action="store_true")
    ap.add_argument("--plot-only", help="redraw the PNG from this JSON")
    ap.add_argument("--shapes", help="comma-separated BxLxS, e.g. 8x4096x16 (default: all)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.plot_only:
        plot(json.loads(Path(args.plot_only).read_text()), out / "decode_h200.png")
        return
    NUM_SMS = torch.cuda.get_device_properties(0).multi_processor_count
    t0 = time.time()
    result = dict(device=backend.describe(), torch=torch.__version__, triton=triton.__version__,
                  copy_gbs=measure_copy_bandwidth(), shapes=[])
    print(f"copy bandwidth {result['copy_gbs']:.0f} GB/s", flush=True)
    sweep = [] if args.sweep else None
    shapes = [tuple(int(x) for x in t.split("x")) for t in args.shapes.split(",")] if args.shapes else SHAPES
    for B, L, S in shapes:
        result["shapes"].append(bench_shape(B, L, S, result["copy_gbs"], not args.no_flex, sweep))
        (out / "decode_h200.json").write_text(json.dumps(result, indent=1))
        if sweep is not None:
            (out / "decode_sweep_h200.json").write_text(json.dumps(sweep, indent=1))
        print(f"{B}x{L} bs{S} done at {time.time() - t0:.0f} s", flush=True)
    try:
        plot(result, out / "decode_h200.png")
    except ImportError as exc:
        print(f"no plot: {exc}")
    print(table(result))


NUM_SMS = 132

if __name__ == "__main__":
    main()
