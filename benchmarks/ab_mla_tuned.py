"""The tuned MLA decode kernel of two git revisions, timed in one process on one GPU: the module
`pagedkv_lib/kernels/triton_mla_decode_tuned.py` of each revision is loaded beside the working tree's library,
and the two alternate (A B, then B A) at the shapes where the kernel is compute-bound and at B = 1, with
bench_mla's inputs, its best config (TUNED) and CUDA-graph medians (gpu_harness.time_calls). Outputs must be
bitwise equal. For a change whose SASS differs (benchmarks/kernel_sass.py).

    PYTHONPATH=. python benchmarks/ab_mla_tuned.py REV_A REV_B --out OUT      # writes OUT/ab_mla_tuned.json
"""
import argparse
import functools
import importlib.util
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from bench_mla import FULL, make_set
from gpu_harness import environment, log, rotated_sets, time_calls, write_json

from pagedkv_lib.core.mla_attention import mla_scale
from pagedkv_lib.kernels.triton_mla_decode_tuned import TUNED, choose_tuned_splits

MODULE = "pagedkv_lib/kernels/triton_mla_decode_tuned.py"
BATCHES = (64, 128, 1)
CONTEXT = 4096
ROUNDS = 6                                      # each an A and a B timing, the order alternating


def load_revision(rev: str, folder: Path):
    """The module as it was at `rev`, its relative imports made absolute (the working tree's library)."""
    shown = subprocess.run(["git", "show", f"{rev}:{MODULE}"], capture_output=True, text=True, check=True)
    path = folder / f"mla_tuned_{re.sub(r'[^0-9A-Za-z]', '_', rev)}.py"
    path.write_text(re.sub(r"^from \.", "from pagedkv_lib.kernels.", shown.stdout, flags=re.M))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rev_a")
    parser.add_argument("rev_b")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        versions = {rev: load_revision(rev, Path(tmp)) for rev in (args.rev_a, args.rev_b)}
        rows = []
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        H, C, R = FULL["H"], FULL["C"], FULL["R"]
        scale = mla_scale(FULL["Dn"], R)
        for B in BATCHES:
            sets = rotated_sets(lambda i, B=B: make_set(FULL, B, CONTEXT, seed=1000 * B + CONTEXT + i),
                                B * CONTEXT * (C + R) * 2, max_sets=8)
            splits = choose_tuned_splits(B, H, CONTEXT, sms, TUNED["block_h"], TUNED["block_n"], min_tiles=2)
            outs, times = {}, {rev: [] for rev in versions}
            for round_ in range(ROUNDS):
                order = list(versions) if round_ % 2 == 0 else list(versions)[::-1]
                for rev in order:
                    launch = functools.partial(versions[rev].launch_mla_decode_tuned, num_splits=splits,
                                               block_h=TUNED["block_h"], block_n=TUNED["block_n"],
                                               num_warps=TUNED["num_warps"], num_stages=TUNED["num_stages"],
                                               tma=TUNED["tma"])
                    calls = [functools.partial(launch, s["q"], s["kv_cache"], s["block_tables"],
                                               s["context_lens"], C, scale, s["out"]) for s in sets]
                    times[rev].append(time_calls(calls)["us"])
                    outs.setdefault(rev, sets[0]["out"].clone())     # what calls[0] wrote, once timed
            same = torch.equal(*outs.values())
            row = dict(B=B, context_len=CONTEXT, num_splits=splits, same_output=same, us=times,
                       median_us={rev: statistics.median(t) for rev, t in times.items()})
            rows.append(row)
            log(f"B {B}: " + ", ".join(f"{rev} {us:.1f} us" for rev, us in row["median_us"].items())
                + f", outputs {'equal' if same else 'DIFFER'}")
    write_json(args.out / "ab_mla_tuned.json", dict(environment=environment(), config=TUNED, rows=rows))


if __name__ == "__main__":
    sys.exit(main())
