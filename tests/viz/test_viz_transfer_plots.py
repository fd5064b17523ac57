"""Notebook 17's pictures draw what the study computes: a curve per model, a line per link, the crossovers."""
from __future__ import annotations

from dataclasses import replace

from matplotlib.figure import Figure

from pagedkv_lib.studies.swap_or_recompute import PREFILL_SHAPES, load_cost_model
from pagedkv_lib.studies.transfer_cost import LINKS, transfer_crossover_tokens
from pagedkv_lib.viz.transfer_plots import draw_break_even, draw_measured

RATES = replace(load_cost_model(link="nominal"), matmul_tflops=600.0, attention_tflops=300.0)  # made up


def test_break_even_draws_a_curve_per_model_and_returns_the_crossovers():
    ax = Figure().subplots()
    shapes = list(PREFILL_SHAPES.values())
    crossings = draw_break_even(ax, RATES, shapes, [2**i for i in range(7, 18)])
    assert [t.get_text() for t in ax.get_legend().get_texts()][0].startswith(shapes[0].name)
    assert len(ax.get_lines()) >= len(shapes) + len(LINKS)
    for shape in shapes:
        for link in LINKS:
            assert crossings[(shape.name, link.name)] == transfer_crossover_tokens(RATES, shape, link.gbs)


def test_measured_draws_both_costs_per_token():
    ax = Figure().subplots()
    rows = [{"context_len": 32, "transfer_s": 1e-4, "recompute_s": 1e-2},
            {"context_len": 128, "transfer_s": 2e-4, "recompute_s": 5e-2}]
    draw_measured(ax, rows)
    transfer, recompute = ax.get_lines()
    assert list(transfer.get_ydata()) == [1e6 * 1e-4 / 32, 1e6 * 2e-4 / 128]
    assert list(recompute.get_ydata()) == [1e6 * 1e-2 / 32, 1e6 * 5e-2 / 128]
