"""What a preemption costs on one GPU: a request's K/V over PCIe to host memory and back (swap), or a
prefill of the whole model over its tokens (recompute). Notebook 16 reads what it writes
(`preemption_h200.json`).

    PYTHONPATH=. python benchmarks/bench_preemption.py [--out benchmarks/results] [--budget-s 300]

Swap, on pinned (page-locked) host memory unless said otherwise, each figure the median of CUDA-event timings:
  contiguous  one copy of 1 MiB .. 1 GiB, device to host (d2h, swap out) and host to device (h2d, swap in);
              both directions at once on two streams; a pageable 256 MiB copy for contrast.
  per block   the same bytes as many small copies, one per block, to random block ids, the way vLLM V0
              swapped (`csrc/cache_kernels.cu`, `swap_blocks`: one cudaMemcpyAsync per block, called for
              each layer's K and V cache): 4 KiB .. 4 MiB per copy, issued eagerly from Python and captured
              in a CUDA graph (the graph leaves the device-side cost of each copy, without the host's launch
              overhead).
Recompute: a dense bf16 forward of each shape of `pagedkv_lib.studies.swap_or_recompute.PREFILL_SHAPES`
(random weights, RMSNorm, fused QKV, SDPA causal with GQA, gated or plain MLP, no LM head), batch 1, n tokens,
beside its FLOP count: how far a real forward is from the FLOP model's floor.
The PCIe link's generation and width, as nvidia-smi reports them, are recorded before and after.
"""
from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
from pathlib import Path

import torch
from gpu_harness import CUDA, Budget, attempt, event_ms, kernel_names, log, sdpa_backend, write_json

from pagedkv_lib.studies.swap_or_recompute import PREFILL_SHAPES, PrefillShape

MiB = 2**20
CONTIGUOUS = [MiB * 2**k for k in range(0, 11, 2)]            # 1 MiB .. 1 GiB
CHUNKS = [4096 * 2**k for k in range(0, 11)]                  # 4 KiB .. 4 MiB per copy
PER_BLOCK_BYTES = 64 * MiB                                    # moved by each per-block measurement
MAX_COPIES = 4096
PREFILL_TOKENS = [512, 2048, 8192, 32768]


def median_ms(fn, reps: int = 7) -> float:
    """Median milliseconds of fn() between two CUDA events (gpu_harness.event_ms), after one warm-up call."""
    fn()
    torch.cuda.synchronize()
    return statistics.median(event_ms(fn, reps))


def pcie_link() -> str:
    fields = "pcie.link.gen.current,pcie.link.width.current,pcie.link.gen.max,pcie.link.width.max"
    try:
        done = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20)
        return f"gen, width now / max: {done.stdout.strip()}"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"nvidia-smi failed: {exc}"


def contiguous(nbytes: int, pinned: bool = True) -> dict:
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")                     # [nbytes]
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)                # [nbytes]
    row = {"bytes": nbytes, "pinned": pinned}
    for direction, dst, src in (("d2h", host, dev), ("h2d", dev, host)):
        ms = median_ms(lambda dst=dst, src=src: dst.copy_(src, non_blocking=pinned))
        row[direction] = nbytes / (ms * 1e-3) / 1e9
    return row


def duplex(nbytes: int) -> dict:
    """Both directions at once, on two streams: GB/s of each and of the pair."""
    dev_a, dev_b = (torch.empty(nbytes, dtype=torch.uint8, device="cuda") for _ in range(2))  # [nbytes] each
    host_a, host_b = (torch.empty(nbytes, dtype=torch.uint8, pin_memory=True) for _ in range(2))
    out_stream, in_stream = torch.cuda.Stream(), torch.cuda.Stream()

    def both():
        here = torch.cuda.current_stream()
        out_stream.wait_stream(here)
        in_stream.wait_stream(here)
        with torch.cuda.stream(out_stream):
            host_a.copy_(dev_a, non_blocking=True)
        with torch.cuda.stream(in_stream):
            dev_b.copy_(host_b, non_blocking=True)
        here.wait_stream(out_stream)
        here.wait_stream(in_stream)

    ms = median_ms(both)
    return {"bytes_each_way": nbytes, "total_gbs": 2 * nbytes / (ms * 1e-3) / 1e9}


def per_block(chunk: int, graph: bool) -> dict:
    """PER_BLOCK_BYTES in copies of `chunk` bytes between random block ids, each direction."""
    n = min(MAX_COPIES, PER_BLOCK_BYTES // chunk)
    gen = torch.Generator().manual_seed(chunk)
    dev = torch.empty(2 * n, chunk, dtype=torch.uint8, device="cuda")                # [2n, chunk] blocks
    host = torch.empty(2 * n, chunk, dtype=torch.uint8, pin_memory=True)             # [2n, chunk] blocks
    src_ids = torch.randperm(2 * n, generator=gen)[:n].tolist()
    dst_ids = torch.randperm(2 * n, generator=gen)[:n].tolist()
    row = {"chunk_bytes": chunk, "copies": n, "timing": "cuda graph" if graph else "eager python loop"}
    for direction, dst, src in (("d2h", host, dev), ("h2d", dev, host)):
        pairs = [(dst[j], src[i]) for i, j in zip(src_ids, dst_ids, strict=True)]

        def copies(pairs=pairs):
            for d, s in pairs:
                d.copy_(s, non_blocking=True)

        if graph:
            g = torch.cuda.CUDAGraph()
            copies()
            torch.cuda.synchronize()
            with torch.cuda.graph(g):
                copies()
            ms = median_ms(g.replay)
        else:
            ms = median_ms(copies, reps=5)
        row[direction] = n * chunk / (ms * 1e-3) / 1e9
        row[f"{direction}_us_per_copy"] = 1e3 * ms / n
    return row


class DenseModel:
    """A bf16 transformer of `shape` with random weights: enough to time a prefill, nothing else."""

    def __init__(self, shape: PrefillShape, seed: int = 0):
        torch.manual_seed(seed)
        E, D, kv = shape.hidden_size, shape.kv.head_dim, shape.kv
        self.shape, H, H_kv, inter = shape, shape.num_heads, kv.num_kv_heads, shape.intermediate_size
        up = (2 if shape.gated_mlp else 1) * inter

        def w(rows, cols):
            return torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16) * cols**-0.5

        self.layers = [dict(qkv=w((H + 2 * H_kv) * D, E), o=w(E, H * D), up=w(up, E), down=w(E, inter))
                       for _ in range(kv.num_layers)]

    @torch.inference_mode()
    def prefill(self, x: torch.Tensor) -> torch.Tensor:                  # x [T, E]
        s = self.shape
        H, H_kv, D, T = s.num_heads, s.kv.num_kv_heads, s.kv.head_dim, x.shape[0]
        F = torch.nn.functional
        for p in self.layers:
            qkv = F.rms_norm(x, (x.shape[-1],)) @ p["qkv"].T                         # [T, (H + 2 H_kv) D]
            q, k, v = qkv.split([H * D, H_kv * D, H_kv * D], dim=-1)
            q = q.view(1, T, H, D).transpose(1, 2)                                          # [1, H, T, D]
            k = k.view(1, T, H_kv, D).transpose(1, 2)                                       # [1, H_kv, T, D]
            v = v.view(1, T, H_kv, D).transpose(1, 2)                                       # [1, H_kv, T, D]
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # [1, H, T, D]
            x = x + o.transpose(1, 2).reshape(T, H * D) @ p["o"].T                         # [T, E]
            h = F.rms_norm(x, (x.shape[-1],)) @ p["up"].T                             # [T, 2I] or [T, I]
            if s.gated_mlp:
                gate, up = h.chunk(2, dim=-1)
                h = F.silu(gate) * up                                                          # [T, I]
            else:
                h = F.relu(h)
            x = x + h @ p["down"].T                                                            # [T, E]
        return x


def prefill_row(model: DenseModel, n: int) -> dict:
    shape = model.shape
    x = torch.randn(n, shape.hidden_size, device="cuda", dtype=torch.bfloat16)              # [T, E]
    ms = median_ms(lambda: model.prefill(x), reps=3)
    matrix, attention = shape.prefill_flops(n)
    log(f"{shape.name} prefill of {n} tokens: {ms:.2f} ms")
    return {"model": shape.name, "tokens": n, "ms": ms, "matrix_flops": matrix, "attention_flops": attention,
            "tflops": (matrix + attention) / (ms * 1e-3) / 1e12}


def prefill_rows(shape: PrefillShape, budget: Budget) -> list[dict]:
    """One row per length of PREFILL_TOKENS (an error recorded in its row); the SDPA backend in the first."""
    model, rows = DenseModel(shape), []
    q = torch.randn(1, shape.num_heads, 256, shape.kv.head_dim, device="cuda", dtype=torch.bfloat16)
    kv = torch.randn(1, shape.kv.num_kv_heads, 256, shape.kv.head_dim, device="cuda", dtype=torch.bfloat16)
    backend = sdpa_backend(kernel_names(lambda: torch.nn.functional.scaled_dot_product_attention(
        q, kv, kv, is_causal=True, enable_gqa=True)))
    for n in PREFILL_TOKENS:
        if budget.over():
            break
        entry = {"model": shape.name, "tokens": n}
        rows.append({**(attempt(entry, prefill_row, model, n) or entry), "sdpa_backend": backend})
    del model
    torch.cuda.empty_cache()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--budget-s", type=float, default=300.0)
    args = ap.parse_args()
    if not CUDA:
        raise SystemExit("bench_preemption.py measures a GPU's host link and prefill: no CUDA device here")
    out, budget = Path(args.out), Budget(args.budget_s)
    p = torch.cuda.get_device_properties(0)
    result = {"env": {"device": p.name, "torch": torch.__version__, "host_kernel": platform.release(),
                      "pcie_before": pcie_link()},
              "pcie": {"contiguous": [], "per_block": [], "errors": {}}, "prefill": []}
    pcie = result["pcie"]
    for nbytes in CONTIGUOUS:
        entry = {"bytes": nbytes}
        pcie["contiguous"].append(attempt(entry, contiguous, nbytes) or entry)
    pcie["pageable"] = attempt(pcie["errors"], contiguous, 256 * MiB, False)
    pcie["duplex"] = attempt(pcie["errors"], duplex, 256 * MiB)
    good = [r for r in pcie["contiguous"] if "d2h" in r]
    pcie["best_gbs"] = {d: max(r[d] for r in good) for d in ("d2h", "h2d")} if good else {}
    log(f"contiguous done: best {pcie['best_gbs']}")
    for graph in (False, True):
        for chunk in CHUNKS:
            if budget.over():
                break
            entry = {"chunk_bytes": chunk}
            pcie["per_block"].append(attempt(entry, per_block, chunk, graph) or entry)
        write_json(out / "preemption_h200.json", result)
    log(f"per-block done at {budget.used():.0f} s")
    for shape in PREFILL_SHAPES.values():
        entry: dict = {}
        rows = attempt(entry, prefill_rows, shape, budget)
        result["prefill"].extend(rows or [{"model": shape.name, **entry}])
        write_json(out / "preemption_h200.json", result)
    result["env"]["pcie_after"] = pcie_link()
    result["seconds"] = budget.used()
    write_json(out / "preemption_h200.json", result)
    print(f"{p.name}: {result['env']['pcie_before']}")
    for r in good:
        print(f"contiguous {r['bytes'] // MiB:5d} MiB  d2h {r['d2h']:6.1f} GB/s  h2d {r['h2d']:6.1f} GB/s")
    for r in pcie["per_block"]:
        if "d2h" in r:
            print(f"per block {r['chunk_bytes'] // 1024:5d} KiB ({r['timing']:17s}) d2h {r['d2h']:6.1f} GB/s "
                  f"h2d {r['h2d']:6.1f} GB/s, {r['d2h_us_per_copy']:.2f} us per copy")
    for r in result["prefill"]:
        if "ms" in r:
            print(f"prefill {r['model']:11s} {r['tokens']:6d} tokens {r['ms']:9.2f} ms "
                  f"{r['tflops']:6.0f} TFLOP/s [{r['sdpa_backend']}]")
        else:
            print(f"prefill {r['model']:11s} {r.get('tokens', '?')}: {r.get('error')}")


if __name__ == "__main__":
    main()
