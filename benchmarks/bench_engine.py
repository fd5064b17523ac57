"""The capstone's speed: the mini engine's tokens/s, the 10,000-request serving simulation, notebook 14.

    python benchmarks/bench_engine.py                  # all three, on CPU
    python benchmarks/bench_engine.py --no-notebook    # seconds, not a minute
    python benchmarks/bench_engine.py --device cuda    # the engine on a GPU (Triton store + decode kernels)

Engine: the default tiny Qwen3-like model (4 layers, hidden 256, 8/2 heads, vocab 512), 16 requests of 32-96
prompt tokens and 64 generated tokens each, block size 16, a pool that holds them all; one warm-up run, then
the median of `--repeat` runs of `LLM.generate`. Reported: generated tokens/s (decode) and all tokens/s
(prompt + generated). Simulation: `simulate_serving` of 10,000 requests, all queued at step 0 (the most
steps, and for paging the most preemptions), under the four policies, per workload: synthetic at a
256K-token budget and max_len 4096 (notebook 14's setup), sharegpt and alpaca in the paper's 15,728 slots at
max_len 2048; block 16 (target: the four policies in 2 s). Notebook: 14_capstone top to bottom in a fresh
kernel through nbclient, as notebooks/build.py runs it (target: 60 s on CPU). Prints only; asserts nothing.
"""
from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent


def bench_engine(device: str, repeat: int, threads: int) -> None:
    from pagedkv_lib.engine import LLM, EngineConfig, SamplingParams

    torch.set_num_threads(threads)
    rng = random.Random(0)
    prompts = [[rng.randrange(512) for _ in range(rng.randint(32, 96))] for _ in range(16)]
    params = SamplingParams(max_tokens=64)
    config = EngineConfig(block_size=16, num_kvcache_blocks=128, max_num_seqs=16, max_num_batched_tokens=2048,
                          max_model_len=256, device=device)
    times = []
    for i in range(repeat + 1):
        llm = LLM(config)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        llm.generate(prompts, params, use_tqdm=False)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        if i:                                    # the first run warms up (and compiles the Triton kernels)
            times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    generated = len(prompts) * params.max_tokens
    total = generated + sum(len(p) for p in prompts)
    steps = len(llm.stats)
    kernels, threads = llm.model_runner.kernels.name, torch.get_num_threads()
    print(f"engine on {device} ({kernels} kernels, {threads} thread(s)): {len(prompts)} requests, "
          f"{steps} steps in {seconds:.2f} s (median of {repeat})")
    print(f"  {generated / seconds:8.0f} generated tokens/s   {total / seconds:8.0f} tokens/s with prompts   "
          f"{1e3 * seconds / steps:6.1f} ms per step")


def bench_simulation(repeat: int) -> None:
    from pagedkv_lib.studies.policies import POLICY_KEYS
    from pagedkv_lib.studies.serving.paper import PAPER_SETUP
    from pagedkv_lib.studies.serving.simulation import simulate_serving
    from pagedkv_lib.studies.workload import make_trace

    setups = {"synthetic": {"budget_tokens": 256 * 1024, "max_len": 4096, "block_size": 16},
              "sharegpt": PAPER_SETUP, "alpaca": PAPER_SETUP}
    for workload, setup in setups.items():
        requests = make_trace(workload, 10_000, seed=0)
        total, parts = 0.0, []
        for policy in POLICY_KEYS:
            times = []
            for _ in range(repeat):
                start = time.perf_counter()
                r = simulate_serving(requests, policy, **setup)
                times.append(time.perf_counter() - start)
            total += statistics.median(times)
            parts.append(f"  {policy:11s} {statistics.median(times):5.2f} s - {r.num_steps:7d} steps, "
                         f"{r.throughput:6.1f} tokens/step, {r.num_preemptions} preemptions")
        print(f"serving simulation, 10,000 {workload} requests x 4 policies: {total:5.2f} s (median of "
              f"{repeat} per policy; target 2 s)")
        print("\n".join(parts))


def bench_notebook() -> None:
    import nbformat
    from nbclient import NotebookClient

    path = ROOT / "notebooks" / "14_capstone.ipynb"
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    print(f"notebook {path.stem}: {time.perf_counter() - start:.1f} s top to bottom (target 60 s on CPU)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads for the engine")
    parser.add_argument("--no-notebook", action="store_true")
    args = parser.parse_args()
    bench_engine(args.device, args.repeat, args.threads)
    bench_simulation(args.repeat)
    if not args.no_notebook:
        bench_notebook()


if __name__ == "__main__":
    main()
