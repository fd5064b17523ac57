"""Notebook 14's serving pictures: the explorer's controls redraw text and picture to what the simulation
computes; fp8 doubles the slots of a budget in GiB; the sweep and the latency curves draw their numbers."""
from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure

from pagedkv_lib.studies.policies import POLICY_KEYS
from pagedkv_lib.studies.serving.simulation import simulate_serving
from pagedkv_lib.studies.workload import make_trace, make_workload
from pagedkv_lib.viz import serving_plots as sp


@pytest.fixture(scope="module")
def explorer():
    return sp.ServingExplorer()


def test_explorer_states_the_simulation_of_every_policy(explorer):
    explorer.update(workload="synthetic", kv_dtype="bf16", budget=7, block_size=16)
    assert explorer.budget_tokens == 64 * 1024
    assert "7 GiB of Qwen3-0.6B KV in bf16 (112 KiB per token) = 65,536 slots" in explorer.text.value
    requests = make_workload(200, seed=0)
    for i, policy in enumerate(POLICY_KEYS):
        r = simulate_serving(requests, policy, budget_tokens=64 * 1024, block_size=16, max_len=4096)
        assert f"{r.throughput:6.1f} tokens/step" in explorer.text.value
        line = explorer.ax_run.lines[i]                                   # drawn at most MAX_POINTS
        np.testing.assert_array_equal(line.get_ydata(), r.num_running[line.get_xdata()])
        assert line.get_xdata()[-1] >= len(r.num_running) - len(r.num_running) // sp.MAX_POINTS - 1
    assert explorer.results["orca_max"].max_concurrency == 16             # 65,536 // 4096 chunks


def test_fp8_toggle_doubles_the_slots_and_the_reservations_that_fit(explorer):
    explorer.update(workload="synthetic", kv_dtype="bf16", budget=7, block_size=16)
    bf16 = dict(explorer.results)
    explorer.kv_dtype.value = "fp8"                                       # what clicking the toggle does
    assert explorer.budget_tokens == 128 * 1024 and "131,072 slots" in explorer.text.value
    assert explorer.results["orca_max"].max_concurrency == 2 * bf16["orca_max"].max_concurrency == 32
    for key in POLICY_KEYS:                                    # memory-bound: about twice the batch
        ratio = explorer.results[key].batched_requests / bf16[key].batched_requests
        assert 1.6 < ratio < 2.3, key


@pytest.mark.parametrize("control, value", [("budget", 28), ("block_size", 64), ("workload", "alpaca")])
def test_each_control_redraws_text_and_picture(explorer, control, value):
    explorer.update(workload="synthetic", kv_dtype="bf16", budget=7, block_size=16)
    before_text, before_image = explorer.text.value, explorer.image.value
    getattr(explorer, control).value = value                               # what moving the control does
    assert explorer.text.value != before_text and explorer.image.value != before_image
    workload = explorer.workload.value
    paged = simulate_serving(make_trace(workload, 200, 0), "paged", budget_tokens=explorer.budget_tokens,
                             block_size=explorer.block_size.value)
    assert explorer.results["paged"].throughput == paged.throughput
    assert explorer.results["orca_max"].max_len == (4096 if workload == "synthetic" else 2048)


def test_widgets_carry_css_classes_and_the_legend_is_in_the_text(explorer):
    classes = {c for w in (explorer.workload, explorer.kv_dtype, explorer.budget, explorer.block_size,
                           explorer.text, explorer.image) for c in w._dom_classes}
    assert {"pagedkv-serving-workload", "pagedkv-kv-dtype", "pagedkv-budget", "pagedkv-block-size",
            "pagedkv-serving-summary", "pagedkv-serving-plot"} <= classes
    assert explorer.ax_run.get_legend() is None and "Orca (Pow2)" in explorer.text.value


def test_draw_serving_with_legends_moves_lines_in_place():
    fig = Figure()
    ax_run, ax_mem = fig.subplots(2, 1)
    requests = make_workload(50, seed=1)
    for budget in (16 * 1024, 64 * 1024):
        results = {k: simulate_serving(requests, k, budget_tokens=budget) for k in ("orca_max", "paged")}
        sp.draw_serving(ax_run, ax_mem, results)
        assert len(ax_run.lines) == 2 and len(ax_mem.lines) == 5
        texts = [t.get_text() for t in ax_run.get_legend().get_texts()]
        assert texts == [f"Orca (Max): {results['orca_max'].mean_concurrency:.1f} on average",
                         f"vLLM (paged): {results['paged'].mean_concurrency:.1f} on average"]
        assert ax_mem.lines[-1].get_ydata()[0] == budget / 1e3


def test_throughput_sweep_matches_the_simulation():
    ax = Figure().add_subplot()
    requests = make_workload(50, seed=1)
    out = sp.draw_throughput_sweep(ax, requests, [16, 64])
    for key in POLICY_KEYS:
        expect = [simulate_serving(requests, key, budget_tokens=b * 1024, block_size=16).throughput
                  for b in (16, 64)]
        assert out[key] == expect
    assert out["paged"][0] > out["orca_oracle"][0] > out["orca_max"][0]


def test_latency_curves_one_line_per_policy():
    ax = Figure().add_subplot()
    curves = {"orca_max": np.array([1.0, 5.0]), "paged": np.array([1.0, 1.0])}
    sp.draw_latency_curves(ax, [0.01, 0.02], curves)
    assert len(ax.lines) == 2 and ax.lines[0].get_xdata().tolist() == [10.0, 20.0]
    assert ax.lines[0].get_ydata().tolist() == [1.0, 5.0]
