"""One shape of one of the course's attention kernels, launched a few times, for a profiler to read (issue 39:
what limits a kernel that misses its target, measured rather than guessed):

    ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        -k regex:KERNEL --launch-skip 2 -c 1 python benchmarks/profile_kernels.py KIND [options]

    KIND     the kernel (regex for -k)                         shape (the benchmarks')
    mla      _mla_decode_tuned                                 --batch 64 x --context 4096, 128 heads, C 512,
                                                               R 64, page 64 (bench_mla.py); --tma
    prefill  _prefill_attention_kernel                         --shape cold8x2048 (bench_prefill.py's shapes)
    decode   chunked_decode_kernel|_merge_chunks, -c 2       --shape 1x4096 (bench_decode.py's shapes)

bf16, the tiles and splits the library chooses by default (PDL off: a profiler serialises kernels anyway).
Each kernel is launched four times (--launch-skip 2 skips the first two, the compile and a warm-up). On a
CPU (TRITON_INTERPRET=1) prefill and decode run the benchmarks' tiny shapes, to prove the script runs.
"""
from __future__ import annotations

import argparse

import gpu_harness as gh
import torch
from attention_workloads import DECODE_SHAPES, H_KV, PREFILL_SHAPES, D, H, decode_set, prefill_set
from bench_mla import FULL, make_set

from pagedkv_lib.core.mla_attention import mla_scale
from pagedkv_lib.kernels.decode_config import choose_config
from pagedkv_lib.kernels.triton_decode_attention import launch_decode_attention
from pagedkv_lib.kernels.triton_mla_decode_tuned import choose_tuned_splits, launch_mla_decode_tuned
from pagedkv_lib.kernels.triton_prefill_attention import choose_prefill_config, launch_prefill_attention

LAUNCHES = 4
SCALE = D**-0.5


def mla(args) -> tuple[str, torch.Tensor]:
    s = make_set(FULL, args.batch, args.context, seed=1)
    splits = choose_tuned_splits(args.batch, FULL["H"], args.context, gh.num_sms())
    for _ in range(LAUNCHES):
        launch_mla_decode_tuned(s["q"], s["kv_cache"], s["block_tables"], s["context_lens"], FULL["C"],
                                mla_scale(FULL["Dn"], FULL["R"]), s["out"], splits, tma=args.tma)
    return f"B {args.batch} context {args.context} splits {splits} tma {args.tma}", s["out"]


def prefill(args) -> tuple[str, torch.Tensor]:
    seq_lens, q_lens, S = PREFILL_SHAPES[args.shape]
    s = prefill_set(seq_lens, q_lens, S, seed=1, contiguous=False)
    cfg = choose_prefill_config(H, H_KV, D, torch.bfloat16, interpreted=not gh.CUDA)
    for _ in range(LAUNCHES):
        out = launch_prefill_attention(s["q"], s["k_cache"], s["v_cache"], s["block_tables"], s["seq_lens"],
                                       s["cu_seqlens_q"], SCALE, cfg)
    return f"prefill {args.shape} {cfg}", out


def decode(args) -> tuple[str, torch.Tensor]:
    lens, S = DECODE_SHAPES[args.shape]
    s = decode_set(lens, S, seed=1)
    B, M = s["block_tables"].shape
    cfg = choose_config(B, H, H_KV, D, M * S, num_sms=gh.num_sms(), interpreted=not gh.CUDA)
    for _ in range(LAUNCHES):
        out = launch_decode_attention(s["q"], s["k_cache"], s["v_cache"], s["block_tables"],
                                      s["context_lens"], SCALE, cfg)
    return f"decode {args.shape} {cfg}", out


KINDS = {"mla": mla, "prefill": prefill, "decode": decode}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=sorted(KINDS))
    ap.add_argument("--batch", type=int, default=64, help="mla: sequences")
    ap.add_argument("--context", type=int, default=4096, help="mla: tokens per sequence")
    ap.add_argument("--tma", action="store_true", help="mla: the TMA variant")
    ap.add_argument("--shape", help="prefill or decode: a benchmark's shape (default cold8x2048 / 1x4096)")
    args = ap.parse_args()
    if args.shape is None:
        args.shape = {"prefill": "cold8x2048", "decode": "1x4096"}.get(args.kind)
    what, out = KINDS[args.kind](args)
    if gh.CUDA:
        torch.cuda.synchronize()
    print(f"{what}: out finite", bool(out.isfinite().all()))


if __name__ == "__main__":
    main()
