"""Notebook 22's picture: where each admitted prompt token came from, as the CPU tier grows.

    draw_tier_sweep(fig, sweeps)     one panel per workload: stacked bars of prompt tokens served by the
                                     GPU tier, loaded from the CPU tier, and computed, per CPU tier size
    copy_findings(result)            sentences from bench_offload.json (benchmarks/bench_offload.py): pinned
                                     against pageable copies per block size, the side-stream overlap
Every number comes from `pagedkv_lib.studies.cpu_offload` (its `TierRun`s) or a stored GPU run; this module
only draws and words them.
"""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from pagedkv_lib.studies.cpu_offload import TierRun
from pagedkv_lib.studies.swap_or_recompute import PCIE5_X16_GBS

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


def copy_findings(result: dict | None) -> str:
    """What bench_offload.json measured, one line per block size and one for the overlap; None: not run."""
    if result is None:
        return ("Not measured yet: no bench_offload.json in benchmarks/results/. On a GPU: "
                "PYTHONPATH=. python benchmarks/bench_offload.py")
    pcie = PCIE5_X16_GBS
    lines = [f"{result['env'].get('device', 'no GPU')}, PCIe 5.0 x16 nominal {pcie:.0f} GB/s one way; "
             f"each run moves {result['shape']['blocks']} blocks, every layer's K and V:"]
    by_size: dict[int, dict] = {}
    for r in result["copies"]:
        kind = "pinned" if r["pinned"] else "pageable"
        by_size.setdefault(r["block_size"], {})[(kind, r["direction"])] = r
    for size, runs in by_size.items():
        pinned_save = runs[("pinned", "save")]
        pinned_load = runs[("pinned", "load")]
        pageable_load = runs[("pageable", "load")]
        slower = pinned_load["gbs"] / pageable_load["gbs"]
        lines.append(f"  blocks of {size:>3}: pinned save {pinned_save['gbs']:.1f} GB/s, load "
                     f"{pinned_load['gbs']:.1f} GB/s ({pinned_load['gbs'] / pcie:.0%} of PCIe); pageable "
                     f"load {pageable_load['gbs']:.1f} GB/s ({slower:.1f}x slower); the host spends "
                     f"{pinned_load['host_ms']:.2f} ms queueing the pinned load's copies "
                     f"({pinned_load['gpu_ms']:.2f} ms on the GPU)")
    o = result["overlap"]
    lines.append(f"  side stream: a decode-like step (SDPA, {o['backend']}) {o['step_ms']:.2f} ms, pinned "
                 f"loads {o['copies_ms']:.2f} ms, both {o['both_ms']:.2f} ms: {o['hidden']:.0%} of the "
                 f"shorter ran under the longer")
    return "\n".join(lines)
