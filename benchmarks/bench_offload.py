"""The CPU tier's copies on one GPU: pinned against pageable host memory for the course's block sizes, and
the side-stream copy overlapping a decode-like step.

    PYTHONPATH=. python benchmarks/bench_offload.py [--out benchmarks/results] [--smoke]

The copies are the engine's own (engine/kv_offload.py, `OffloadWorker.copy`), queued here on a side
stream after the main stream's work: the engine queues its write-back copies on its own stream (its module
docstring says why), and a side stream is what a write-through store would use. One copy per block of every
layer's K and V, [2, L, S, H_kv, D] out of the cache [2, L, N, S, H_kv, D], Qwen3-0.6B's KV shape (28 layers,
8 KV heads, head_dim 128, bf16), 64 blocks per transfer, block sizes 16, 64 and 256.
1. Per block size and direction (save: GPU -> CPU, load: CPU -> GPU), with the CPU tier pinned and pageable:
   GPU time of the copies between two events on the side stream, and the HOST time queueing them takes
   (pinned: it only queues; pageable: the host waits for every copy), GB/s against PCIe 5.0 x16's nominal
   63 GB/s one way.
2. Overlap: a decode-like step on the main stream (SDPA over B = 64 contexts of 4096 tokens, 32 query heads,
   8 KV heads, head_dim 128, bf16; its backend named from its kernels) alone, the pinned copies of 64
   blocks of 16 alone, and both issued together; hidden = (step + copies - both) / the shorter of the
   two: the share of the shorter one that ran under the longer (1 = perfect overlap, 0 = none).
Device-to-device copy bandwidth is measured in the same run. --smoke: tiny shapes on the CPU, plain copies,
to show the script runs end to end (its times mean nothing). Writes OUT/bench_offload.json and .txt.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from gpu_harness import (
    CUDA,
    Budget,
    environment,
    event_ms,
    finish,
    kernel_names,
    measure_copy_bandwidth,
    sdpa_backend,
)

from pagedkv_lib.engine.kv_offload import KVTransfers, OffloadWorker
from pagedkv_lib.studies.swap_or_recompute import PCIE5_X16_GBS

FULL = dict(L=28, H=8, D=128, block_sizes=(16, 64, 256), blocks=64, B=64, ctx=4096, Hq=32)
SMOKE = dict(L=2, H=2, D=8, block_sizes=(4,), blocks=4, B=2, ctx=16, Hq=4)


def make_worker(shape: dict, S: int, pinned: bool) -> OffloadWorker:
    device = "cuda" if CUDA else "cpu"
    n = shape["blocks"]
    kv_cache = torch.randn(2, shape["L"], 2 * n, S, shape["H"], shape["D"], device=device).to(
        torch.bfloat16)                                                         # [2, L, N, S, H_kv, D]
    worker = OffloadWorker(kv_cache, n)
    if CUDA and not pinned:
        pageable = torch.zeros_like(worker.cpu_cache, device="cpu")            # [N_cpu, 2, L, S, H_kv, D]
        worker.cpu_cache = pageable
    return worker


def side_stream():
    """A CUDA stream for the copies (None on a CPU: plain copies)."""
    return torch.cuda.Stream() if CUDA else None


def queue_copies(worker: OffloadWorker, transfers: KVTransfers, side) -> None:
    """The worker's copies on the side stream, after the main stream's work so far."""
    if side is None:
        worker.copy(transfers)
        return
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        worker.copy(transfers)


def time_transfers(worker: OffloadWorker, transfers: KVTransfers, samples: int = 5) -> dict:
    """{'gpu_ms': median event time of the copies on the side stream, 'host_ms': median time queueing
    them takes}."""
    gpu, host = [], []
    side = side_stream()
    for _ in range(samples):
        if CUDA:
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(side)
        t = time.perf_counter()
        queue_copies(worker, transfers, side)
        host.append((time.perf_counter() - t) * 1e3)
        if CUDA:
            end.record(side)
            end.synchronize()
            gpu.append(start.elapsed_time(end))
    gpu = gpu or host
    return {"gpu_ms": sorted(gpu)[len(gpu) // 2], "host_ms": sorted(host)[len(host) // 2]}


def bench_copies(shape: dict) -> list[dict]:
    rows = []
    for S in shape["block_sizes"]:
        n = shape["blocks"]
        nbytes = n * 2 * shape["L"] * S * shape["H"] * shape["D"] * 2
        saves = KVTransfers(saves=[(b, b) for b in range(n)])
        loads = KVTransfers(loads=[(b, n + b) for b in range(n)])
        for pinned in (True, False):
            worker = make_worker(shape, S, pinned)
            for direction, transfers in (("save", saves), ("load", loads)):
                t = time_transfers(worker, transfers)
                rows.append(dict(block_size=S, pinned=pinned, direction=direction, bytes=nbytes, **t,
                                 gbs=nbytes / (t["gpu_ms"] * 1e-3) / 1e9))
    return rows


def bench_overlap(shape: dict) -> dict:
    device = "cuda" if CUDA else "cpu"
    B, n, Hq, H, D = shape["B"], shape["ctx"], shape["Hq"], shape["H"], shape["D"]
    q = torch.randn(B, Hq, 1, D, device=device).to(torch.bfloat16)            # [B, H, 1, D]
    k = torch.randn(B, H, n, D, device=device).to(torch.bfloat16)             # [B, H_kv, n, D]
    v = torch.randn_like(k)                                                    # [B, H_kv, n, D]

    def step():
        torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    worker = make_worker(shape, shape["block_sizes"][0], pinned=True)
    loads = KVTransfers(loads=[(b, shape["blocks"] + b) for b in range(shape["blocks"])])
    side = side_stream()

    def copies():
        queue_copies(worker, loads, side)

    def both():
        queue_copies(worker, loads, side)
        step()

    if not CUDA:
        times = {}
        for name, fn in (("step", step), ("copies", copies), ("both", both)):
            t = time.perf_counter()
            fn()
            times[name] = (time.perf_counter() - t) * 1e3
        return dict(backend="cpu", **{f"{k}_ms": v for k, v in times.items()}, hidden=float("nan"))

    def timed(fn):
        def run():
            fn()
            torch.cuda.current_stream().wait_stream(side)
        run()
        return sorted(event_ms(run, 10))[5]

    backend = sdpa_backend(kernel_names(step))
    t_step, t_copies, t_both = timed(step), timed(copies), timed(both)
    return dict(backend=backend, step_ms=t_step, copies_ms=t_copies, both_ms=t_both,
                hidden=(t_step + t_copies - t_both) / min(t_step, t_copies))


def table(result: dict) -> str:
    lines = [f"{result['env'].get('device', 'cpu')}: device copy {result['copy_gbs']:.0f} GB/s (read + "
             f"write); PCIe 5.0 x16 nominal {PCIE5_X16_GBS:.1f} GB/s one way",
             f"{'block':>5} {'host mem':>8} {'copy':>5} {'MiB':>6} {'GPU ms':>8} {'host ms':>8} {'GB/s':>7} "
             f"{'of PCIe':>7}"]
    for r in result["copies"]:
        lines.append(f"{r['block_size']:>5} {'pinned' if r['pinned'] else 'pageable':>8} {r['direction']:>5} "
                     f"{r['bytes'] / 2**20:6.1f} {r['gpu_ms']:8.3f} {r['host_ms']:8.3f} {r['gbs']:7.1f} "
                     f"{r['gbs'] / PCIE5_X16_GBS:7.0%}")
    o = result["overlap"]
    lines.append(f"overlap: decode-like step (SDPA, backend {o['backend']}) {o['step_ms']:.3f} ms, pinned "
                 f"loads {o['copies_ms']:.3f} ms, both {o['both_ms']:.3f} ms: {o['hidden']:.0%} of the "
                 "shorter one ran under the longer")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU")
    ap.add_argument("--budget-s", type=float, default=300.0)
    args = ap.parse_args()
    torch.manual_seed(0)
    shape = SMOKE if args.smoke or not CUDA else FULL
    budget = Budget(args.budget_s)
    result = dict(env=environment(), shape=dict(shape), copy_gbs=measure_copy_bandwidth())
    result["copies"] = bench_copies(shape)
    result["overlap"] = bench_overlap(shape)
    finish(result, budget, Path(args.out), "bench_offload", table)


if __name__ == "__main__":
    main()
