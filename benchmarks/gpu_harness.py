"""How the GPU benchmarks measure: anchors (copy bandwidth, dense matmul), CUDA-graph timing over rotated
input sets, the SDPA backend read from profiler kernel names, a time budget, robust recording.

Methodology (benchmarks/NOTES.md): a CUDA graph cycles through R input sets (R * bytes >= 3 x L2) and holds
>= `min_calls` calls; the median over samples of replay time / calls. The copy anchor is an EAGER 2 GiB
device-to-device copy timed by triton.testing.do_bench (median, L2 flushed): captured in a graph, the copy
becomes a memcpy node that ran at 2.77 TB/s on the H200 instead of 4.27. On a machine without a GPU the
kernels run in Triton's interpreter: timing is wall clock and only proves that a script runs end to end.
"""
import functools
import json
import math
import statistics
import time
import traceback
from pathlib import Path

import torch

from pagedkv_lib.kernels import backend

L2_BYTES = 60e6          # H200
CUDA = torch.cuda.is_available() and not backend.is_interpreted()


def log(*args) -> None:
    print(f"[{time.strftime('%H:%M:%S')}]", *args, flush=True)


class Budget:
    """Wall-clock budget: `over()` once `seconds` have passed since construction."""

    def __init__(self, seconds: float):
        self.start, self.seconds = time.time(), seconds

    def used(self) -> float:
        return time.time() - self.start

    def over(self) -> bool:
        return self.used() > self.seconds


def sync() -> None:
    if CUDA:
        torch.cuda.synchronize()


def rotated_sets(make, nbytes: int, max_sets: int = 16) -> list:
    """R input sets, R * nbytes >= 3 x L2 (so L2 holds none of the next call's data), at least 2."""
    R = min(max_sets, max(2, math.ceil(3 * L2_BYTES / max(nbytes, 1)))) if CUDA else 1
    return [make(i) for i in range(R)]


def time_calls(calls, samples: int = 20, min_calls: int = 24) -> dict:
    """{'us': median microseconds per call, 'timing': 'graph' | 'eager ...'}."""
    if not CUDA:
        t = time.perf_counter()
        calls[0]()
        return {"us": (time.perf_counter() - t) * 1e6, "timing": "cpu wall clock (smoke only)"}
    for c in calls:
        c()
    torch.cuda.synchronize()
    reps = calls * math.ceil(min_calls / len(calls))
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for c in reps:
                c()
        for _ in range(2):
            graph.replay()
        times = [ms * 1e3 / len(reps) for ms in event_ms(graph.replay, samples)]
        del graph
        return {"us": statistics.median(times), "timing": f"graph x{len(reps)}, {len(calls)} sets"}
    except Exception as exc:  # noqa: BLE001  (a baseline that cannot be captured: time it eagerly)
        torch.cuda.synchronize()
        import triton

        us = triton.testing.do_bench(calls[0], warmup=5, rep=50, return_mode="median") * 1e3
        return {"us": us, "timing": f"eager do_bench: graph capture failed ({type(exc).__name__})"}


def event_ms(fn, samples: int) -> list[float]:
    """Milliseconds of each of `samples` calls of fn, timed between two CUDA events."""
    times = []
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def measure_copy_bandwidth(nbytes: int = 2**31) -> float:
    """GB/s of an eager device-to-device copy of 2 GiB, counting bytes read + written (do_bench median)."""
    if not CUDA:
        return float("nan")
    import triton.testing

    src = torch.randn(nbytes // 4, device="cuda")                      # [nbytes / 4] fp32
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(functools.partial(dst.copy_, src), warmup=25, rep=200, return_mode="median")
    del src, dst
    return 2 * nbytes / (ms * 1e-3) / 1e9


def measure_matmul_tflops(n: int = 8192) -> float:
    """TFLOP/s of a dense bf16 n x n x n matmul (the compute anchor)."""
    if not CUDA:
        return float("nan")
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    us = time_calls([lambda: torch.mm(a, b, out=c)], samples=20, min_calls=8)["us"]
    return 2 * n**3 / (us * 1e-6) / 1e12


def kernel_names(fn) -> list[str]:
    """Names of the GPU kernels one call of fn launches (torch.profiler)."""
    if not CUDA:
        return []
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = []
    for e in prof.events():
        dev = getattr(e, "device_type", None)
        if dev is not None and "CUDA" in str(dev) and e.name not in names:
            names.append(e.name)
    return names


def sdpa_backend(names: list[str]) -> str:
    """cudnn / flash / efficient / math from kernel names (cuDNN's own names contain 'flash' too)."""
    low = " ".join(names).lower()
    if "cudnn" in low or "cudnn_generated" in low:
        return "cudnn"
    if "flash_fwd" in low or "flash::" in low or "pytorch_flash" in low:
        return "flash"
    if "fmha" in low or "cutlassf" in low or "attentionkernel" in low or "efficient" in low:
        return "efficient"
    return "math" if names else "unknown"


def attempt(entry: dict, fn, *args, **kwargs):
    """Run fn, recording an exception in entry['error'] instead of raising; returns fn's result or None."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001
        entry["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        entry["trace"] = traceback.format_exc(limit=3)[-600:]
        if CUDA:
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001  (a sticky CUDA error: nothing more will run)
                pass
        return None


def rel_err(out, ref) -> float:
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str))
    tmp.replace(path)


def environment() -> dict:
    import triton

    env = {"torch": torch.__version__, "triton": triton.__version__, "backend": backend.describe()}
    if CUDA:
        p = torch.cuda.get_device_properties(0)
        env.update(device=p.name, sms=p.multi_processor_count,
                   capability=list(torch.cuda.get_device_capability()))
    return env


def num_sms() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count if CUDA else 4


def run_shapes(result: dict, names, budget: Budget, bench_shape, out: Path, stem: str, table) -> None:
    """bench_shape(name) -> row for each named shape until the budget is spent (the rest: `skipped`),
    writing OUT/<stem>.json after every shape; then OUT/<stem>.txt, the table, also printed."""
    for name in names:
        if budget.over():
            result["skipped"].append(name)
            continue
        entry = {"shape": name, "methods": {}}
        row = attempt(entry, bench_shape, name)
        result["shapes"].append(row or entry)
        write_json(out / f"{stem}.json", result)
        log(f"{name} done at {budget.used():.0f} s")
    finish(result, budget, out, stem, table)


def finish(result: dict, budget: Budget, out: Path, stem: str, table) -> None:
    """The end of a benchmark: its seconds into `result`, OUT/<stem>.json, and OUT/<stem>.txt, the table
    (also printed)."""
    result["seconds"] = budget.used()
    write_json(out / f"{stem}.json", result)
    text = table(result)
    (out / f"{stem}.txt").write_text(text + "\n")
    print(text, flush=True)
