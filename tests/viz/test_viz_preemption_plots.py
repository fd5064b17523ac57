"""Notebook 16's pictures: the host link's points are the stored measurements, and the crossover figure
draws what the cost model computes, one panel per model shape."""
from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from pagedkv_lib.studies import results
from pagedkv_lib.studies import swap_or_recompute as sr
from pagedkv_lib.viz.preemption_plots import draw_swap_or_recompute, plot_host_link


def test_the_host_link_plot_shows_the_stored_copies_and_the_fit():
    preemption = results.load(sr.PREEMPTION_RESULT)
    model = sr.load_cost_model()
    ax = Figure().add_subplot()
    plot_host_link(ax, preemption, model.link)
    graph_d2h = [r["d2h"] for r in preemption["pcie"]["per_block"] if r.get("timing") == "cuda graph"]
    assert list(ax.lines[0].get_ydata()) == pytest.approx(graph_d2h)
    assert ax.get_xscale() == "log" and any(line.get_linestyle() == "--" for line in ax.lines)


def test_the_crossover_figure_has_a_panel_per_model_with_the_models_costs():
    model = sr.load_cost_model()
    fig = Figure(figsize=(10, 3))
    draw_swap_or_recompute(fig, model, results.load(sr.PREEMPTION_RESULT)["prefill"])
    assert len(fig.axes) == len(sr.PREFILL_SHAPES)
    shape = sr.PREFILL_SHAPES["Qwen3-0.6B"]
    recompute = fig.axes[0].lines[0]
    n, ms = recompute.get_xdata()[10], recompute.get_ydata()[10]
    assert ms == pytest.approx(1e3 * model.recompute_seconds(shape, int(n)))
    assert fig.axes[0].get_title().startswith("Qwen3-0.6B")
