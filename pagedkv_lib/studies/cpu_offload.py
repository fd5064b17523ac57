"""What a CPU tier under the GPU pool buys: prefix hits and prompt tokens recomputed, and the time a load
back costs against the time the recompute it replaces would have cost.

Exports: `TierRun`, `CPU_TIER_FACTORS`, `serve_with_cpu_tier`, `tier_sweep`, `tier_table`,
`recomputed_by_cause`, `load_seconds`, `recompute_seconds`, `load_or_recompute_table`.
`python -m pagedkv_lib.studies.cpu_offload` prints both tables. Units: tokens, blocks of 16, seconds.

No model runs: the replay of prefix_cache_comparison.py (the engine's own `schedule`, fixed outputs) on its
multi-turn chat and few-shot workloads and GPU pools (POOL_TOKENS), with a `TieredBlockManager`
(core/tiered_block_manager.py) whose CPU tier holds 0 (the GPU tier alone, BlockManager), 1/2, 1, 2 or 4 times
the GPU pool's blocks. Per run: the hit rate split by tier (tokens found on the GPU, tokens loaded from the
CPU, over all prompt tokens admitted), prompt tokens computed, and those beyond an unbounded cache
(`ideal_computed`: what eviction costs). A CPU tier does not bring that last count to 0: `recomputed_by_cause`
splits it into the tails of prompts that fill no whole block (an unbounded cache of 16-token blocks computes
them too), what requests readmitted after a preemption compute again, and what both tiers lost to eviction.
Then each load is priced on the H200 rates of notebook 16 (swap_or_recompute.load_cost_model: its pinned
host-to-device copies, overhead + bytes / bandwidth per copy, and its prefill FLOP rates) for a model shape:
loading n tokens is one host-to-device copy per 16-token block, per layer, for K and for V (the unit vLLM
V0 swapped), or one per block with every layer in it; recomputing them is the prefill of tokens
g .. g + n - 1 after the g tokens the GPU held (their matrix FLOPs and their causal attention to everything
before them).
"""
from __future__ import annotations

from dataclasses import dataclass

from pagedkv_lib.core.block_manager import BlockManager
from pagedkv_lib.core.tiered_block_manager import TieredBlockManager

from .prefix_cache_comparison import POOL_TOKENS, WORKLOADS, ReplayStats, ideal_computed, serve
from .swap_or_recompute import PREFILL_SHAPES, CostModel, PrefillShape, load_cost_model

BLOCK_SIZE = 16
CPU_TIER_FACTORS = (0, 0.5, 1, 2, 4)       # CPU blocks as a multiple of the GPU pool's


@dataclass(frozen=True)
class TierRun:
    workload: str
    num_gpu_blocks: int
    num_cpu_blocks: int
    stats: ReplayStats
    loaded_tokens: int                       # prompt tokens loaded back from the CPU tier
    admissions: tuple[tuple[int, int], ...]  # per admission: (tokens hit on the GPU, tokens loaded)

    @property
    def gpu_hit_rate(self) -> float:
        return (self.stats.cached_tokens - self.loaded_tokens) / max(self.stats.prompt_tokens, 1)

    @property
    def cpu_hit_rate(self) -> float:
        return self.loaded_tokens / max(self.stats.prompt_tokens, 1)


def serve_with_cpu_tier(workload: str, num_cpu_blocks: int, seed: int = 0) -> TierRun:
    """One replay of `workload` over its GPU pool with a CPU tier of `num_cpu_blocks` (0: none)."""
    if workload not in WORKLOADS:
        raise ValueError(f"workload: expected one of {tuple(WORKLOADS)}, got {workload!r}")
    num_gpu = POOL_TOKENS[workload] // BLOCK_SIZE
    manager = TieredBlockManager(num_gpu, BLOCK_SIZE, num_cpu_blocks) if num_cpu_blocks \
        else BlockManager(num_gpu, BLOCK_SIZE)
    stats = serve(WORKLOADS[workload](seed=seed), manager, BLOCK_SIZE,
                  ReplayStats(f"gpu {num_gpu} + cpu {num_cpu_blocks}", num_gpu * BLOCK_SIZE))
    admissions = tuple(getattr(manager, "admissions", ()))
    return TierRun(workload, num_gpu, num_cpu_blocks, stats, sum(n for _, n in admissions), admissions)


def tier_sweep(workload: str, factors=CPU_TIER_FACTORS, seed: int = 0) -> list[TierRun]:
    num_gpu = POOL_TOKENS[workload] // BLOCK_SIZE
    return [serve_with_cpu_tier(workload, int(f * num_gpu), seed) for f in factors]


def tier_table(workloads=("chat", "few_shot"), seed: int = 0) -> str:
    lines = [f"{'workload':9s} {'GPU':>5s} {'CPU':>5s} {'GPU hits':>8s} {'CPU hits':>8s} {'computed':>9s} "
             f"{'recomputed':>10s} {'loaded':>7s}"]
    for w in workloads:
        ideal = ideal_computed(WORKLOADS[w](seed=seed))
        for run in tier_sweep(w, seed=seed):
            s = run.stats
            lines.append(f"{w:9s} {run.num_gpu_blocks:5d} {run.num_cpu_blocks:5d} {run.gpu_hit_rate:8.1%} "
                         f"{run.cpu_hit_rate:8.1%} {s.computed_tokens:9,d} {s.computed_tokens - ideal:10,d} "
                         f"{run.loaded_tokens:7,d}")
    return "\n".join(lines)


def recomputed_by_cause(workload: str, num_cpu_blocks: int, seed: int = 0) -> dict[str, int]:
    """The prompt tokens one run computes beyond an unbounded token-level cache (tier_table's "recomputed"),
    by cause: "block tails", computed by an unbounded cache of BLOCK_SIZE-token blocks too (a hit stops at
    the last full block); "readmitted", what requests readmitted after a preemption computed again (their
    last, partial block, and any block both tiers lost); "evicted", the rest: blocks lost from both tiers.
    Also "recomputed", the sum, and "preemptions"."""
    requests = WORKLOADS[workload](seed=seed)
    ideal = ideal_computed(requests)
    run = serve_with_cpu_tier(workload, num_cpu_blocks, seed)
    recomputed = run.stats.computed_tokens - ideal
    tails = ideal_computed(requests, f"hash/{BLOCK_SIZE}") - ideal
    readmitted = run.stats.readmitted_computed
    return {"recomputed": recomputed, "block tails": tails, "readmitted": readmitted,
            "evicted": recomputed - tails - readmitted, "preemptions": run.stats.preemptions}


def load_seconds(model: CostModel, shape: PrefillShape, num_tokens: int, per_layer: bool = True) -> float:
    """Host-to-device copies of `num_tokens` tokens' K/V: one per block of BLOCK_SIZE, per layer, for K and
    for V (`per_layer`), or one per block holding every layer's K and V (a layout with the layers inside
    the block, as vLLM's `register_cross_layers_kv_cache` offers its offloading worker)."""
    num_blocks = -(-num_tokens // BLOCK_SIZE)
    nbytes = 2 * shape.kv.num_layers * num_blocks * shape.block_copy_bytes(BLOCK_SIZE)
    copies = 2 * shape.kv.num_layers * num_blocks if per_layer else num_blocks
    return copies * model.link.h2d_overhead_s + nbytes / (model.link.h2d_gbs * 1e9)


def recompute_seconds(model: CostModel, shape: PrefillShape, start: int, num_tokens: int) -> float:
    """The prefill of tokens start .. start + num_tokens - 1 after `start` cached ones, at the measured
    rates: the marginal cost of the longer prefill."""
    return model.recompute_seconds(shape, start + num_tokens) - model.recompute_seconds(shape, start)


def load_or_recompute_table(run: TierRun, model: CostModel | None = None) -> str:
    """Per model shape: the run's loads priced as copies and as the recompute they replace."""
    model = model or load_cost_model()
    lines = [f"{run.workload}, GPU {run.num_gpu_blocks} + CPU {run.num_cpu_blocks} blocks: "
             f"{run.loaded_tokens:,d} prompt tokens loaded back in {sum(1 for _, n in run.admissions if n)} "
             "admissions",
             f"{'model':11s} {'load ms, per layer':>19s} {'per block':>10s} {'recompute ms':>13s}  cheapest"]
    for shape in PREFILL_SHAPES.values():
        load = sum(load_seconds(model, shape, n) for _, n in run.admissions if n)
        whole = sum(load_seconds(model, shape, n, per_layer=False) for _, n in run.admissions if n)
        recompute = sum(recompute_seconds(model, shape, g, n) for g, n in run.admissions if n)
        costs = {"load per layer": load, "load per block": whole, "recompute": recompute}
        cheapest = min(costs, key=costs.get)
        lines.append(f"{shape.name:11s} {1e3 * load:19.2f} {1e3 * whole:10.2f} {1e3 * recompute:13.2f}  "
                     f"{cheapest}")
    return "\n".join(lines)


def main() -> None:
    print(tier_table(), end="\n\n")
    model = load_cost_model()
    print(model.source, end="\n\n")
    for w in ("chat", "few_shot"):
        print(load_or_recompute_table(tier_sweep(w, factors=(2,))[0], model), end="\n\n")


if __name__ == "__main__":
    main()
