"""Notebook 22's picture: where each admitted prompt token came from, as the CPU tier grows.

    draw_tier_sweep(fig, sweeps)     one panel per workload: stacked bars of prompt tokens served by the
                                     GPU tier, loaded from the CPU tier, and computed, per CPU tier size
Every number comes from `pagedkv_lib.studies.cpu_offload` (its `TierRun`s); this module only draws.
"""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from pagedkv_lib.studies.cpu_offload import TierRun

COLORS = {"GPU hits": "#2ca02c", "loaded from the CPU": "#1f77b4", "computed": "#d62728"}


def draw_tier_sweep(fig: Figure, sweeps: dict[str, list[TierRun]]) -> None:
    """`sweeps`: workload -> its runs, in order of CPU tier size (the x axis, in blocks)."""
    for i, (workload, runs) in enumerate(sweeps.items()):
        ax = fig.add_subplot(1, len(sweeps), i + 1)
        x = np.arange(len(runs))                                                  # one bar per run
        parts = {"GPU hits": [r.stats.cached_tokens - r.loaded_tokens for r in runs],
                 "loaded from the CPU": [r.loaded_tokens for r in runs],
                 "computed": [r.stats.computed_tokens for r in runs]}
        bottom = np.zeros(len(runs))
        for label, values in parts.items():
            ax.bar(x, values, bottom=bottom, color=COLORS[label], label=label, width=0.7)
            bottom += np.array(values)
        ax.set_xticks(x, [str(r.num_cpu_blocks) for r in runs], fontsize=7)
        ax.set_xlabel(f"CPU tier, blocks (GPU pool: {runs[0].num_gpu_blocks} blocks)", fontsize=8)
        ax.set_ylabel("prompt tokens admitted", fontsize=8)
        ax.set_title(workload, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    fig.axes[-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))   # beside the bars
    fig.tight_layout()
