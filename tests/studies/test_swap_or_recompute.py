"""pagedkv_lib.studies.swap_or_recompute and the swap mode of the serving simulation.

The cost model: parameter counts against the models' published non-embedding sizes, the prefill FLOP
formula against torch's FlopCounterMode on a dense forward, the per-copy fit against a known line, the
crossover where the two costs meet; then `simulate_serving(..., preemption="swap")` step for step against a
naive loop, with the default (recompute) unchanged.
"""
from __future__ import annotations

import json
import shutil
from collections import deque

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from pagedkv_lib.studies import results
from pagedkv_lib.studies import swap_or_recompute as sr
from pagedkv_lib.studies.memory import ModelShape
from pagedkv_lib.studies.serving.simulation import simulate_serving
from pagedkv_lib.studies.workload import arrival_steps, make_workload


def test_pcie5_x16_is_63_gb_per_s_each_way():
    assert sr.PCIE5_X16_GBS == pytest.approx(63.015, abs=1e-3)


@pytest.mark.parametrize("name, billions", [("Qwen3-0.6B", 0.44), ("Qwen2.5-7B", 6.53), ("LLaMA-2-7B", 6.48),
                                            ("OPT-13B", 12.58)])
def test_weights_a_token_goes_through_match_the_published_non_embedding_sizes(name, billions):
    """Qwen's model cards print 0.44B and 6.53B non-embedding parameters; LLaMA-2-7B is 6.74B with 0.26B of
    embeddings, OPT-13B 12.85B with 0.26B (norms and biases left out: under 0.1%)."""
    assert sr.PREFILL_SHAPES[name].non_embedding_params / 1e9 == pytest.approx(billions, abs=0.01)


@pytest.mark.parametrize("gated", [True, False])
def test_prefill_flops_equal_a_flop_counter_on_a_dense_forward(gated):
    T, H, H_kv, D, E, I, L = 48, 6, 2, 8, 24, 40, 3
    shape = sr.PrefillShape(ModelShape("tiny", L, H_kv, D, 2), hidden_size=E, intermediate_size=I,
                            num_heads=H, gated_mlp=gated)
    g = torch.Generator().manual_seed(0)
    up = 2 * I if gated else I
    x = torch.randn(T, E, generator=g)                                                # [T, E]
    with FlopCounterMode(display=False) as counter:
        for _ in range(L):
            qkv = x @ torch.randn((H + 2 * H_kv) * D, E, generator=g).T                 # [T, (H + 2 H_kv) D]
            q, k, v = qkv.split([H * D, H_kv * D, H_kv * D], dim=-1)
            q = q.view(T, H, D).transpose(0, 1)                                       # [H, T, D]
            k, v = (t.view(T, H_kv, D).transpose(0, 1).repeat_interleave(H // H_kv, 0) for t in (k, v))
            o = (q @ k.transpose(1, 2)).softmax(-1) @ v                               # [H, T, D] (full n x n)
            x = x + o.transpose(0, 1).reshape(T, H * D) @ torch.randn(E, H * D, generator=g).T
            h = x @ torch.randn(up, E, generator=g).T                                 # [T, up]
            h = h[:, :I] * h[:, I:] if gated else h.relu()                            # [T, I]
            x = x + h @ torch.randn(E, I, generator=g).T                              # [T, E]
    matrix, attention = shape.prefill_flops(T)
    assert counter.get_total_flops() == matrix + 2 * attention      # the counter sees both causal halves


def test_a_fitted_host_link_recovers_the_line_it_was_fitted_to():
    rows = [{"chunk_bytes": b, "d2h_us_per_copy": 2.0 + b / 50e3, "h2d_us_per_copy": 3.0 + b / 40e3}
            for b in (4096, 65536, 2**20, 2**22)]
    link = sr.fit_host_link(rows, "synthetic")
    assert (link.d2h_gbs, link.h2d_gbs) == (pytest.approx(50.0), pytest.approx(40.0))
    assert (link.d2h_overhead_s, link.h2d_overhead_s) == (pytest.approx(2e-6), pytest.approx(3e-6))
    assert link.round_trip_seconds(1e9, num_copies=10) == pytest.approx(1 / 50 + 1 / 40 + 10 * 5e-6)


def test_per_block_swap_counts_one_copy_per_block_layer_and_k_or_v():
    model = sr.CostModel(sr.HostLink(10.0, 20.0, 1e-6, 2e-6), 100.0, 50.0, "synthetic")
    shape = sr.PREFILL_SHAPES["Qwen3-0.6B"]                      # 28 layers, 32 KiB per block of K at S = 16
    copies = 2 * 28 * 3                                          # 40 tokens: 3 blocks
    nbytes = copies * 16 * 8 * 128 * 2
    assert model.swap_seconds(shape, 40, block_size=16) == pytest.approx(
        copies * 3e-6 + nbytes / 10e9 + nbytes / 20e9)
    assert model.swap_seconds(shape, 40) == pytest.approx(3e-6 + 40 * 114688 * (1 / 10e9 + 1 / 20e9))


@pytest.mark.parametrize("block_size", [None, 16])
@pytest.mark.parametrize("name", list(sr.PREFILL_SHAPES))
def test_recompute_wins_exactly_below_the_crossover(name, block_size):
    model, shape = sr.load_cost_model(), sr.PREFILL_SHAPES[name]
    cross = model.crossover_tokens(shape, block_size)
    unit = block_size or 1

    fixed = model.link.d2h_overhead_s + model.link.h2d_overhead_s if block_size is None else 0.0

    def margin(n):                         # recompute minus swap (a copy's fixed cost out), at whole blocks
        n = max(unit, round(n / unit) * unit)
        return model.recompute_seconds(shape, n) - (model.swap_seconds(shape, n, block_size) - fixed)

    if cross == 0:
        assert all(margin(n) > 0 for n in (16, 512, 8192, 65536))
    else:
        assert margin(cross * 0.8) < 0 < margin(cross * 1.25)


def test_the_stored_results_give_the_h200_numbers(tmp_path):
    model = sr.load_cost_model()
    assert 40 < model.link.d2h_gbs < sr.PCIE5_X16_GBS and 40 < model.link.h2d_gbs < sr.PCIE5_X16_GBS
    assert 0 < model.link.d2h_overhead_s < 1e-5 and model.attention_tflops < model.matmul_tflops
    shutil.copy(results.RESULTS / sr.PREFILL_RESULT, tmp_path / sr.PREFILL_RESULT)   # no preemption run there
    nominal = sr.load_cost_model(tmp_path)
    assert nominal.link.d2h_gbs == sr.PCIE5_X16_GBS and "nominal" in nominal.source
    with pytest.raises(ValueError, match="link: expected 'measured' or 'nominal'"):
        sr.load_cost_model(link="fast")
    prefill = json.loads((results.RESULTS / sr.PREFILL_RESULT).read_text())
    assert model.matmul_tflops == prefill["matmul_tflops"]


def test_the_table_and_the_pricing_of_a_run():
    model, shape = sr.load_cost_model(), sr.PREFILL_SHAPES["LLaMA-2-7B"]
    text = sr.crossover_table(model, lengths=(512, 4096))
    assert text.count("\n") == 1 + len(sr.PREFILL_SHAPES) and "LLaMA-2-7B" in text
    lengths = [100, 3000, 20000]
    cost = {m: sr.preemption_seconds(lengths, shape, model, m) for m in sr.PRICING_MODES}
    assert cost["cheaper"] <= min(cost["swap"], cost["recompute"])
    assert cost["recompute"] == pytest.approx(sum(model.recompute_seconds(shape, n) for n in lengths))
    with pytest.raises(ValueError, match="mode: expected one of"):
        sr.preemption_seconds(lengths, shape, model, "both")


# ------------------------------------------------------------------------------------------------------------
# the serving simulation's swap mode

def naive_swap_serving(requests, budget_tokens, block_size, arrivals, max_num_seqs=None):
    """The paged policy written the slow obvious way, with vLLM V0's swap: a preempted request joins the END
    of a swapped queue, served first; nobody is admitted in a step that began with one swapped out."""
    num_units, n = budget_tokens // block_size, len(requests)
    length, held = [r.prompt_len for r in requests], [0] * n
    running, waiting, swapped, free = [], deque(), deque(), num_units
    waiting_series, finish, preempted_lengths, t = [], [-1] * n, [], 0

    def cost(r):
        return -(-(length[r] + 1) // block_size)

    while min(finish) < 0:
        waiting.extend(i for i in range(n) if arrivals[i] == t)
        preempted, had_swapped = False, bool(swapped)
        while sum(cost(r) - held[r] for r in running) > free:
            r = running.pop()
            free, held[r] = free + held[r], 0
            swapped.append(r)
            preempted_lengths.append(length[r])
            preempted = True
        for r in running:
            free -= cost(r) - held[r]
            held[r] = cost(r)
        for queue, allowed in ((swapped, True), (waiting, not had_swapped)):
            while not preempted and allowed and queue and len(running) < (max_num_seqs or n) \
                    and cost(queue[0]) <= free:
                r = queue.popleft()
                held[r], free = cost(r), free - cost(r)
                running.append(r)
        for r in running:
            length[r] += 1
        waiting_series.append(len(waiting) + len(swapped))
        for r in [r for r in running if length[r] == requests[r].total_len]:
            running.remove(r)
            free, finish[r] = free + held[r], t
        t += 1
    return waiting_series, finish, preempted_lengths


@pytest.mark.parametrize("budget, block_size, rate, max_num_seqs",
                         [(700, 16, None, None), (900, 4, 0.5, None), (1500, 7, 2.0, 6)])
@pytest.mark.parametrize("seed", [0, 1])
def test_swap_mode_matches_a_naive_loop_step_for_step(budget, block_size, rate, max_num_seqs, seed):
    requests = make_workload(60, seed, prompt_range=(1, 300), output_range=(1, 150))
    res = simulate_serving(requests, "paged", budget_tokens=budget, block_size=block_size, arrival_rate=rate,
                           seed=seed, max_num_seqs=max_num_seqs, preemption="swap")
    waiting, finish, lengths = naive_swap_serving(requests, budget, block_size, arrival_steps(60, rate, seed),
                                                  max_num_seqs)
    assert res.num_waiting.tolist() == waiting and res.finish_step.tolist() == finish
    assert res.preempted_lengths.tolist() == lengths and res.num_preemptions == len(lengths) > 0
    assert (res.swapped_tokens, res.recomputed_tokens) == (sum(lengths), 0)


def test_recompute_stays_the_default_and_records_its_preemptions():
    requests = make_workload(200, seed=0)
    default = simulate_serving(requests, "paged", budget_tokens=16 * 4096)
    explicit = simulate_serving(requests, "paged", budget_tokens=16 * 4096, preemption="recompute")
    assert default.preemption == "recompute" and default.swapped_tokens == 0
    assert np.array_equal(default.num_running, explicit.num_running)
    assert default.recomputed_tokens == int(default.preempted_lengths.sum()) > 0
    with pytest.raises(ValueError, match="preemption: expected one of"):
        simulate_serving(requests, "paged", budget_tokens=16 * 4096, preemption="drop")
