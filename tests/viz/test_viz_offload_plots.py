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


def test_copy_findings_words_a_run_and_says_when_there_is_none():
    from pagedkv_lib.viz.offload_plots import copy_findings

    assert copy_findings(None).startswith("Not measured yet")

    def copy(pinned, direction, gbs):
        return dict(block_size=16, pinned=pinned, direction=direction, gbs=gbs, host_ms=0.5, gpu_ms=2.0)

    run = dict(env=dict(device="GPU X"), shape=dict(blocks=64),
               copies=[copy(True, "save", 40.0), copy(True, "load", 31.5), copy(False, "save", 9.0),
                       copy(False, "load", 7.0)],
               overlap=dict(backend="flash", step_ms=1.0, copies_ms=3.0, both_ms=3.25, hidden=0.75))
    text = copy_findings(run)
    assert "GPU X" in text and "moves 64 blocks" in text
    assert "load 31.5 GB/s (50% of PCIe)" in text and "pageable load 7.0 GB/s (4.5x slower)" in text
    assert "(SDPA, flash) 1.00 ms" in text and "75% of the shorter" in text
