"""n-gram speculation in the mini engine, on this machine: acceptance, tokens per step and tokens/s.

    python benchmarks/bench_speculation.py                 # CPU, k = 2 and 4
    python benchmarks/bench_speculation.py --device cuda   # the engine on a GPU (verify steps run eagerly)

For each of the course's workloads (`pagedkv_lib.studies.speculation.engine_workload`: shared system prompt,
few-shot headers, chat) the engine generates without speculation and with k drafts per step; reported:
acceptance (accepted / drafted), tokens a sequence gains per decode step, decode sequence-steps, generated
tokens/s (median of `--repeat` runs after a warm-up) and whether the greedy tokens are identical. The tiny
model has random weights, so its continuations rarely repeat its context: expect low acceptance, and on a
CPU, where a forward over k + 1 positions costs about k + 1 times one, a slowdown. Prints only.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from pagedkv_lib.engine import LLM, EngineConfig, SamplingParams
from pagedkv_lib.studies.speculation import engine_workload


def run(prompts, max_tokens, k: int, device: str, repeat: int) -> tuple[LLM, list, float]:
    params = [SamplingParams(max_tokens=n) for n in max_tokens]
    config = EngineConfig(block_size=16, num_kvcache_blocks=48, max_num_seqs=8, device=device,
                          num_speculative_tokens=k)
    times = []
    for _ in range(repeat + 1):
        llm = LLM(config)
        start = time.perf_counter()
        out = llm.generate(prompts, params, use_tqdm=False)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return llm, out, statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{'workload':<9} {'k':>2} {'acceptance':>10} {'tokens/step':>11} {'seq-steps':>9} "
          f"{'gen tok/s':>9} {'vs plain':>8} {'same':>5}")
    for name in ("system", "few_shot", "chat"):
        prompts, max_tokens = engine_workload(name)
        generated = sum(max_tokens)
        base_llm, base_out, base_s = run(prompts, max_tokens, 0, args.device, args.repeat)
        for k in (0, 2, 4):
            llm, out, seconds = (base_llm, base_out, base_s) if k == 0 else run(prompts, max_tokens, k,
                                                                               args.device, args.repeat)
            drafted = sum(s.num_draft_tokens for s in llm.stats)
            accepted = sum(s.num_accepted_tokens for s in llm.stats)
            seq_steps = sum(s.num_seqs for s in llm.stats if not s.is_prefill)
            acceptance = accepted / drafted if drafted else 0.0
            print(f"{name:<9} {k:>2} {acceptance:>10.1%} {1 + accepted / seq_steps:>11.2f} {seq_steps:>9} "
                  f"{generated / seconds:>9.0f} {base_s / seconds:>7.2f}x {str(out == base_out):>5}")


if __name__ == "__main__":
    main()
