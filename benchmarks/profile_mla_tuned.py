"""One shape of the tuned MLA decode kernel, launched a few times, for a profiler to read (issue 39: what
limits it, measured):

    ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        -k regex:_mla_decode_tuned --launch-skip 2 -c 1 python benchmarks/profile_mla_tuned.py [--tma]

DeepSeek-V3's decode shape of bench_mla.py: B = 64, 4096 tokens each, 128 heads, C = 512, R = 64, page 64,
bf16, the default tiles (triton_mla_decode_tuned.TUNED) and the splits `choose_tuned_splits` gives.
"""
from __future__ import annotations

import argparse

import torch
from bench_mla import FULL, make_set

from pagedkv_lib.core.mla_attention import mla_scale
from pagedkv_lib.kernels.triton_mla_decode_tuned import choose_tuned_splits, launch_mla_decode_tuned


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--tma", action="store_true")
    args = ap.parse_args()
    s = make_set(FULL, args.batch, args.context, seed=1)
    H, C = FULL["H"], FULL["C"]
    splits = choose_tuned_splits(args.batch, H, args.context, torch.cuda.get_device_properties(0)
                                 .multi_processor_count)
    for _ in range(4):
        launch_mla_decode_tuned(s["q"], s["kv_cache"], s["block_tables"], s["context_lens"], C,
                                mla_scale(FULL["Dn"], FULL["R"]), s["out"], splits, tma=args.tma)
    torch.cuda.synchronize()
    print(f"B {args.batch} context {args.context} splits {splits} tma {args.tma}: out finite",
          bool(s["out"].isfinite().all()))


if __name__ == "__main__":
    main()
