"""The KV cache across GPUs, for real: notebook 17's three two-process experiments, on NCCL with two GPUs.

    PYTHONPATH=. python benchmarks/bench_kv_transfer.py --out OUT [--backend nccl|gloo] | tee OUT/kv.log

Each experiment is a rank program of `pagedkv_lib.distributed`, started by `launch_ranks` (nccl when there is
a GPU per rank, else gloo; `--backend` forces one):
- tp_decode: decode attention over two tensor-parallel ranks (H = 8, H_kv = 4 and 1), the gathered output
  against fp64 SDPA on contiguous K/V computed here (max abs error);
- prefill_decode: a request prefilled on rank 0 and decoded on rank 1, its K/V sent after the prefill and
  layer by layer; the tokens of both ranks against the no-cache reference, and how long after the prefill's
  end the last layer reached rank 1;
- transfer_timing: per token of context, moving a context's K/V to rank 1 vs recomputing its prefill there.
Writes OUT/kv_transfer_<backend>.json.
"""
from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch

from pagedkv_lib.distributed.disaggregation import prefill_decode_rank
from pagedkv_lib.distributed.rank_launcher import choose_backend, launch_ranks
from pagedkv_lib.distributed.tp_decode import tp_decode_rank
from pagedkv_lib.distributed.transfer_timing import transfer_timing_rank
from pagedkv_lib.engine import ModelConfig, Qwen3ForCausalLM, greedy_reference
from pagedkv_lib.testing.paged_batch import make_paged_batch
from pagedkv_lib.testing.sdpa_reference import sdpa_batch

SEQ_LENS, BLOCK_SIZE, HEADS, HEAD_DIM = [37, 5, 64, 1000], 16, 8, 64
CONTEXTS = [256, 1024, 4096]


def tp_decode(backend: str) -> list[dict]:
    runs = launch_ranks(tp_decode_rank, world_size=2, timeout_s=300, backend=backend, seq_lens=SEQ_LENS,
                        block_size=BLOCK_SIZE, num_heads=HEADS, kv_head_counts=[4, 1], head_dim=HEAD_DIM)
    rows = []
    for rank0, rank1 in zip(*runs):
        H_kv = rank0["num_kv_heads"]
        reference = sdpa_batch(make_paged_batch(SEQ_LENS, BLOCK_SIZE, HEADS, H_kv, HEAD_DIM))  # [B, H, D] f64
        err = (torch.tensor(rank0["out"], dtype=torch.float64) - reference).abs().max().item()
        rows.append({"num_kv_heads": H_kv, "kv_heads": [rank0["kv_heads"], rank1["kv_heads"]],
                     "max_abs_err": err, "correct": err < 1e-4})
        print(f"tp_decode H_kv={H_kv}: kv heads {rows[-1]['kv_heads']}, max |error| {err:.2e}")
    return rows


def prefill_decode(backend: str) -> list[dict]:
    rng = random.Random(0)
    prompt = [rng.randrange(512) for _ in range(45)]
    p_side, d_side = launch_ranks(prefill_decode_rank, world_size=2, timeout_s=300, backend=backend,
                                  prompt=prompt, system_len=20, max_tokens=8, block_size=8, num_blocks=16,
                                  prefill_busy_blocks=3, decode_busy_blocks=10)
    reference = greedy_reference(Qwen3ForCausalLM(ModelConfig(seed=0)), prompt, 8)
    rows = []
    for p, d in zip(p_side, d_side):
        rows.append({"mode": p["mode"], "tokens_equal": p["tokens"] == d["tokens"] == reference,
                     "table_prefill": p["table"], "table_decode": d["table"], "bytes": d["bytes_received"],
                     "prefill_ms": 1e3 * (p["prefill_end"] - p["prefill_start"]),
                     "kv_after_prefill_ms": 1e3 * (d["received"] - p["prefill_end"])})
        row = rows[-1]
        print(f"prefill_decode {p['mode']:9s}: tokens equal the reference {row['tokens_equal']}, prefill "
              f"{row['prefill_ms']:.2f} ms, last layer on rank 1 {row['kv_after_prefill_ms']:+.2f} ms")
    print("\n".join(p_side[0]["events"] + d_side[0]["events"]))
    return rows


def transfer_timing(backend: str) -> list[dict]:
    _, rank1 = launch_ranks(transfer_timing_rank, world_size=2, timeout_s=300, backend=backend,
                            context_lens=CONTEXTS, block_size=BLOCK_SIZE, repeats=5)
    for r in rank1["rows"]:
        print(f"transfer_timing C={r['context_len']:6d}: {r['bytes']:12,d} bytes, transfer "
              f"{1e6 * r['transfer_s'] / r['context_len']:8.3f} us/token, recompute "
              f"{1e6 * r['recompute_s'] / r['context_len']:8.3f} us/token")
    return rank1["rows"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--backend", choices=["nccl", "gloo"], default=None)
    args = ap.parse_args()
    backend = args.backend or choose_backend(2)
    print(f"backend {backend}, {torch.cuda.device_count()} CUDA GPU(s), torch {torch.__version__}")
    started = time.time()
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    result = {"backend": backend, "gpus": gpus, "torch": torch.__version__, "tp_decode": tp_decode(backend),
              "prefill_decode": prefill_decode(backend), "transfer_timing": transfer_timing(backend)}
    result["seconds"] = time.time() - started
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"kv_transfer_{backend}.json").write_text(json.dumps(result, indent=1))
    print(f"wrote {out / f'kv_transfer_{backend}.json'} in {result['seconds']:.0f} s")


if __name__ == "__main__":
    main()
