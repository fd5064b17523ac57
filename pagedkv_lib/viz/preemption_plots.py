"""Notebook 16's pictures: the host link measured on the H200, and swap against recompute by length and model.

    plot_host_link(ax, preemption, link)             GB/s against bytes per copy: measured, fitted, nominal
    draw_swap_or_recompute(fig, model, measured)     one panel per model: milliseconds against tokens
Every number comes from `pagedkv_lib.studies.swap_or_recompute` and the JSON of
benchmarks/bench_preemption.py; this module only draws.
"""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from pagedkv_lib.studies.swap_or_recompute import PCIE5_X16_GBS, PREFILL_SHAPES, CostModel, HostLink

COLORS = {"recompute": "#d62728", "measured": "#7f0000", "swap": "#1f77b4", "per_block": "#9467bd"}


def plot_host_link(ax, preemption: dict, link: HostLink) -> None:
    """Bandwidth of one copy of b bytes: per-block copies (CUDA graph: dots; eager Python loop: crosses),
    whole contiguous copies (squares), the fit b / (overhead + b / bandwidth), and PCIe 5.0 x16's nominal."""
    pcie = preemption["pcie"]
    for timing, marker in (("cuda graph", "o"), ("eager python loop", "x")):
        rows = [r for r in pcie["per_block"] if r.get("timing") == timing and "d2h" in r]
        for d, color in (("d2h", "#1f77b4"), ("h2d", "#ff7f0e")):
            ax.plot([r["chunk_bytes"] for r in rows], [r[d] for r in rows], marker, color=color, ms=4,
                    label=f"{d}, per block ({timing})", alpha=0.9 if marker == "o" else 0.6)
    rows = [r for r in pcie["contiguous"] if "d2h" in r]
    for d, color in (("d2h", "#1f77b4"), ("h2d", "#ff7f0e")):
        ax.plot([r["bytes"] for r in rows], [r[d] for r in rows], "s", color=color, ms=4, mfc="none",
                label=f"{d}, one contiguous copy")
    b = np.logspace(11, 31, 80, base=2)                                              # bytes per copy
    for gbs, t0, color in ((link.d2h_gbs, link.d2h_overhead_s, "#1f77b4"),
                           (link.h2d_gbs, link.h2d_overhead_s, "#ff7f0e")):
        ax.plot(b, b / (t0 + b / (gbs * 1e9)) / 1e9, "-", color=color, lw=0.8)
    ax.axhline(PCIE5_X16_GBS, color="black", ls="--", lw=0.8, label="PCIe 5.0 x16 nominal")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("bytes per copy", fontsize=8)
    ax.set_ylabel("GB/s", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, loc="lower right")


def draw_swap_or_recompute(fig: Figure, model: CostModel, measured: list[dict] | None = None,
                           block_size: int = 16) -> None:
    """Milliseconds to bring back a preempted request of n tokens, per model shape: recompute (the FLOP
    model; measured whole-model prefills as dots), swap gathered into one copy each way, swap one copy per
    block of `block_size` tokens, per layer, K and V (vLLM V0). A dotted line where recompute stops
    winning against the contiguous swap."""
    n = np.unique(np.logspace(7, 16, 60, base=2).astype(int))                       # tokens
    shapes = list(PREFILL_SHAPES.values())
    for i, shape in enumerate(shapes):
        ax = fig.add_subplot(1, len(shapes), i + 1)
        ax.plot(n, [1e3 * model.recompute_seconds(shape, int(k)) for k in n], color=COLORS["recompute"],
                label="recompute (FLOPs / measured rates)")
        rows = [r for r in measured or [] if r.get("model") == shape.name and "ms" in r]
        ax.plot([r["tokens"] for r in rows], [r["ms"] for r in rows], "o", color=COLORS["measured"], ms=4,
                label="prefill timed alone")
        ax.plot(n, [1e3 * model.swap_seconds(shape, int(k)) for k in n], color=COLORS["swap"],
                label="swap, one copy each way")
        ax.plot(n, [1e3 * model.swap_seconds(shape, int(k), block_size) for k in n], "--",
                color=COLORS["per_block"], label=f"swap, a copy per block of {block_size} (V0)")
        cross = model.crossover_tokens(shape)
        if cross:
            ax.axvline(cross, color="#555555", ls=":", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{shape.name} ({shape.kv.bytes_per_token // 1024} KiB/token)", fontsize=8)
        ax.set_xlabel("tokens", fontsize=8)
        if i == 0:
            ax.set_ylabel("ms", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    handles, labels = fig.axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.subplots_adjust(left=0.06, right=0.99, top=0.9, bottom=0.3, wspace=0.3)
