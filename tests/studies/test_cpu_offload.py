"""The CPU tier study: a bigger CPU tier never recomputes more, the GPU tier's own hits do not change, what it
still recomputes has its causes counted, and the pricing of a load follows the copies it counts."""
from __future__ import annotations

import pytest

from pagedkv_lib.core.tiered_block_manager import TieredBlockManager
from pagedkv_lib.studies import cpu_offload as co
from pagedkv_lib.studies.prefix_cache_comparison import ReplayStats, ideal_computed, replay, serve
from pagedkv_lib.studies.swap_or_recompute import PREFILL_SHAPES, load_cost_model


@pytest.fixture(scope="module")
def sweeps():
    return {w: co.tier_sweep(w, factors=(0, 0.25, 0.5, 1, 2, 4)) for w in ("chat", "few_shot")}


@pytest.mark.parametrize("workload", ["chat", "few_shot"])
def test_a_bigger_cpu_tier_never_recomputes_more(sweeps, workload):
    computed = [r.stats.computed_tokens for r in sweeps[workload]]
    loaded = [r.loaded_tokens for r in sweeps[workload]]
    assert computed == sorted(computed, reverse=True) and computed[-1] < computed[0]
    assert loaded == sorted(loaded) and loaded[0] == 0


@pytest.mark.parametrize("workload", ["chat", "few_shot"])
def test_the_cpu_tier_leaves_the_gpu_tier_alone(sweeps, workload):
    """A CPU hit takes a fresh GPU block as a miss does: the GPU's hits, steps and admissions are the same,
    and the run without a CPU tier is prefix_cache_comparison's "hash/16"."""
    runs = sweeps[workload]
    assert len({r.gpu_hit_rate for r in runs}) == 1 and len({r.stats.steps for r in runs}) == 1
    for r in runs:
        assert r.stats.computed_tokens + r.loaded_tokens == runs[0].stats.computed_tokens
    plain = replay(co.WORKLOADS[workload](seed=0), "hash/16", co.POOL_TOKENS[workload])
    assert plain.computed_tokens == runs[0].stats.computed_tokens


def test_load_seconds_counts_one_copy_per_block_per_layer_for_k_and_v():
    model, shape = load_cost_model(), PREFILL_SHAPES["LLaMA-2-7B"]
    per_layer = co.load_seconds(model, shape, 17)                    # two blocks
    copies = 2 * 32 * 2
    nbytes = copies * shape.block_copy_bytes(16)
    link = model.link
    assert per_layer == pytest.approx(copies * link.h2d_overhead_s + nbytes / (link.h2d_gbs * 1e9))
    assert co.load_seconds(model, shape, 17, per_layer=False) < per_layer


def test_recompute_seconds_grows_with_the_tokens_before():
    model, shape = load_cost_model(), PREFILL_SHAPES["Qwen2.5-7B"]
    assert co.recompute_seconds(model, shape, 4096, 256) > co.recompute_seconds(model, shape, 0, 256) > 0
    assert co.recompute_seconds(model, shape, 0, 256) == pytest.approx(model.recompute_seconds(shape, 256))


@pytest.mark.parametrize("workload", ["chat", "few_shot"])
def test_the_tokens_a_big_cpu_tier_still_recomputes_are_block_tails_and_readmissions(sweeps, workload):
    """With a CPU tier 4x the pool nothing is lost from both tiers: what is still computed beyond the
    unbounded token-level cache is the tails no full block holds, and what a readmitted request computes
    again, which a manager that logs its allocations counts too."""
    num_cpu = sweeps[workload][-1].num_cpu_blocks
    causes = co.recomputed_by_cause(workload, num_cpu)
    ideal = ideal_computed(co.WORKLOADS[workload](seed=0))
    assert causes["recomputed"] == sweeps[workload][-1].stats.computed_tokens - ideal
    assert causes["evicted"] == 0 and causes["block tails"] > 0 and causes["preemptions"] > 0
    assert causes["recomputed"] == causes["block tails"] + causes["readmitted"]

    again = []

    class Logged(TieredBlockManager):
        def allocate(self, seq):
            super().allocate(seq)
            if seq.num_completion_tokens:                               # admitted before: preempted
                again.append(len(seq) - seq.num_cached_tokens)

    num_gpu = co.POOL_TOKENS[workload] // co.BLOCK_SIZE
    serve(co.WORKLOADS[workload](seed=0), Logged(num_gpu, co.BLOCK_SIZE, num_cpu), co.BLOCK_SIZE,
          ReplayStats("logged", num_gpu * co.BLOCK_SIZE))
    assert len(again) == causes["preemptions"] and sum(again) == causes["readmitted"] > 0
    without = co.recomputed_by_cause(workload, 0)
    assert without["evicted"] > 0 and without["block tails"] == causes["block tails"]
