"""Notebook 22's picture: each bar stacks the run's GPU hits, CPU loads and computed prompt tokens."""
from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from pagedkv_lib.studies import cpu_offload as co
from pagedkv_lib.viz.offload_plots import draw_tier_sweep


def test_the_tier_sweep_stacks_each_runs_tokens():
    sweeps = {w: co.tier_sweep(w, factors=(0, 1, 4)) for w in ("chat", "few_shot")}
    fig = Figure(figsize=(8, 3))
    draw_tier_sweep(fig, sweeps)
    assert len(fig.axes) == 2
    ax, runs = fig.axes[1], sweeps["few_shot"]
    bars = ax.patches                                               # 3 parts x 3 runs, part by part
    assert [b.get_height() for b in bars[3:6]] == pytest.approx([r.loaded_tokens for r in runs])
    assert [b.get_y() + b.get_height() for b in bars[6:9]] == pytest.approx(
        [r.stats.prompt_tokens for r in runs])
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(r.num_cpu_blocks) for r in runs]
