"""store_kvcache on one GPU: the course's Triton kernel vs PyTorch indexing, as a fraction of copy bandwidth.

    PYTHONPATH=. python benchmarks/bench_store_kvcache.py [--out benchmarks/results]

Shapes: docs/conventions.md (T tokens stored, H = 32, H_kv = 8, D = 128, S = 16).
key/value are row views into a fused qkv [T, (H + 2 H_kv) D] (as in nano-vllm), slots a random permutation.
Bytes = K and V rows read + written (2 * 2 * T * H_kv * D * 2) + the slots; times as in bench_decode.py
(median CUDA-graph replay over rotated input sets; eager do_bench with L2 flushed beside it).
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch
import triton
from gpu_harness import L2_BYTES, measure_copy_bandwidth, time_calls

from pagedkv_lib.core.store_kvcache import store_kvcache
from pagedkv_lib.kernels import backend
from pagedkv_lib.kernels.triton_store_kvcache import launch_store_kvcache, store_kvcache_triton

H, H_KV, D, S, DTYPE = 32, 8, 128, 16, torch.bfloat16
TOKENS = [1, 64, 256, 4096, 32768]


def make_set(T: int, seed: int) -> dict:
    gen = torch.Generator(device="cuda").manual_seed(seed)
    qkv = torch.randn(T, (H + 2 * H_KV) * D, device="cuda", generator=gen).to(DTYPE)   # [T, (H + 2 H_kv) D]
    key = qkv[:, H * D : (H + H_KV) * D].view(T, H_KV, D)                             # [T, H_kv, D] strided
    value = qkv[:, (H + H_KV) * D :].view(T, H_KV, D)                                 # [T, H_kv, D]
    num_blocks = max(4 * T, 4096) // S
    k_cache = torch.zeros(num_blocks, S, H_KV, D, dtype=DTYPE, device="cuda")         # [N, S, H_kv, D]
    slots = torch.randperm(num_blocks * S, device="cuda", generator=gen)[:T]          # [T] distinct
    return dict(key=key, value=value, k_cache=k_cache, v_cache=torch.zeros_like(k_cache),
                slots=slots.to(torch.int32), slots_long=slots)


def torch_index_put(s: dict) -> None:
    s["k_cache"].view(-1, H_KV, D)[s["slots_long"]] = s["key"]
    s["v_cache"].view(-1, H_KV, D)[s["slots_long"]] = s["value"]


def triton_store(s: dict) -> None:
    launch_store_kvcache(s["key"], s["value"], s["k_cache"], s["v_cache"], s["slots"])


def bench_tokens(T: int, copy_gbs: float) -> dict:
    nbytes = 2 * 2 * T * H_KV * D * 2 + 4 * T
    R = min(64, max(2, math.ceil(3 * L2_BYTES / nbytes)))
    sets = [make_set(T, seed=T + i) for i in range(R)]
    s0 = sets[0]
    k_ref, v_ref = s0["k_cache"].clone(), s0["v_cache"].clone()
    store_kvcache(s0["key"], s0["value"], k_ref, v_ref, s0["slots"])          # the PyTorch reference
    store_kvcache_triton(s0["key"], s0["value"], s0["k_cache"], s0["v_cache"], s0["slots"])
    row = dict(T=T, bytes=nbytes, rotated_sets=R, methods={},
               correct=bool(torch.equal(k_ref, s0["k_cache"]) and torch.equal(v_ref, s0["v_cache"])))
    for name, fn in (("triton", triton_store), ("torch_index_put", torch_index_put)):
        us = time_calls([lambda s=s, fn=fn: fn(s) for s in sets])["us"]
        tbps = nbytes / (us * 1e-6) / 1e12
        eager = triton.testing.do_bench(lambda fn=fn: fn(s0), warmup=10, rep=60, return_mode="median") * 1e3
        row["methods"][name] = dict(us=us, eager_us=eager, tbps=tbps, frac_copy=tbps * 1e3 / copy_gbs)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = dict(device=backend.describe(), torch=torch.__version__, triton=triton.__version__,
                  copy_gbs=measure_copy_bandwidth(), tokens=[])
    for T in TOKENS:
        result["tokens"].append(bench_tokens(T, result["copy_gbs"]))
    (out / "store_kvcache_h200.json").write_text(json.dumps(result, indent=1))
    print(f"{result['device']}; copy bandwidth {result['copy_gbs']:.0f} GB/s (read + write)")
    print(f"{'T':>6} {'method':>16} {'graph us':>9} {'eager us':>9} {'TB/s':>6} {'of copy':>8} correct")
    for r in result["tokens"]:
        for name, m in r["methods"].items():
            print(f"{r['T']:>6} {name:>16} {m['us']:9.2f} {m['eager_us']:9.2f} {m['tbps']:6.2f} "
                  f"{m['frac_copy']:8.1%} {r['correct']}")


if __name__ == "__main__":
    main()
