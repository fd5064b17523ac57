"""Notebook 01's pictures: where reserving max_len wastes KV memory, and what paging leaves.

    draw_waste(ax_requests, ax_totals, requests, block_size, max_len)   per-request stacked bars + totals
    UtilizationExplorer()                                                sliders "block size", "requests"
    draw_utilization_curve(ax, requests, block_sizes, max_len)           paged utilization vs block size
    draw_memory_map(ax, result) / draw_queue(ax, results)                `simulate_fragmentation` over time
Every number comes from `pagedkv_lib.studies.workload` / `pagedkv_lib.studies.fragmentation`; this module
only draws.
"""
from __future__ import annotations

import matplotlib as mpl
import numpy as np
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from pagedkv_lib.studies.waste import waste_breakdown
from pagedkv_lib.studies.workload import make_workload, utilization_paged, utilization_reserved
from pagedkv_lib.viz.block_map import bench_cycle, figure_png, picture_widget

COLORS = {"used": "#2ca02c", "tail": "#d62728", "rest": "#c7c7c7"}
LABELS = {"used": "used (prompt + output)", "tail": "tail of the last block (paging's internal frag.)",
          "rest": "rest of the max_len chunk (reserving's internal frag.)"}
BLOCK_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def waste_layers(requests, block_size: int, max_len: int) -> dict[str, np.ndarray]:
    """Per request [N]: used tokens, the paged tail, the rest of a max_len reservation (sum: max_len)."""
    w = waste_breakdown(requests, block_size, max_len)
    used, tail = w["paged"].token, w["paged"].internal
    return {"used": used, "tail": tail, "rest": w["reserve"].allocated - used - tail}


def draw_waste(ax_requests, ax_totals, requests, block_size: int, max_len: int = 4096) -> dict:
    """Left: one bar per request, stacked used / tail / rest of the reservation (the whole bar is what
    reserving max_len allocates; used + tail is what paging allocates). Right: both schemes' totals.
    Called again on the same axes it updates in place. Returns the layers drawn."""
    layers = waste_layers(requests, block_size, max_len)
    n = len(requests)
    edges = np.arange(n + 1) - 0.5                                               # [N + 1]
    base = np.zeros(n)
    fresh = not ax_requests.patches
    for i, key in enumerate(("used", "tail", "rest")):
        top = base + layers[key]
        if fresh:
            ax_requests.stairs(top, edges, baseline=base, fill=True, color=COLORS[key], label=LABELS[key])
        else:
            ax_requests.patches[i].set_data(top, edges, baseline=base)
        base = top
    ax_requests.set_xlim(-0.5, n - 0.5)
    ax_requests.set_ylim(0, max_len)
    used = layers["used"].sum() / 1e3
    totals = {"reserve": (used, (layers["tail"] + layers["rest"]).sum() / 1e3),
              "paged": (used, layers["tail"].sum() / 1e3)}
    if fresh:  # few tick labels: text is most of a redraw's cost
        ax_requests.set_yticks(np.linspace(0, max_len, 3))
        ax_requests.xaxis.set_major_locator(MaxNLocator(4, integer=True))
        ax_requests.set_xlabel("request", fontsize=8)
        ax_requests.set_ylabel("token slots", fontsize=8)
        ax_requests.tick_params(labelsize=7)
        for y, key, color in ((1, "reserve", COLORS["rest"]), (0, "paged", COLORS["tail"])):
            u, waste = totals[key]
            ax_totals.barh(y, u, color=COLORS["used"])
            ax_totals.barh(y, waste, left=u, color=color)
            ax_totals.text(u + waste, y, "", va="center", fontsize=8)
        ax_totals.set_yticks([1, 0], [f"reserve\n{max_len}", "paged"], fontsize=8)
        ax_totals.set_xticks([])
        ax_totals.set_xlabel("token slots allocated", fontsize=8)
    for y, (u, waste), util in ((1, totals["reserve"], utilization_reserved(requests, max_len)),
                                (0, totals["paged"], utilization_paged(requests, block_size))):
        ax_totals.patches[2 * (1 - y) + 1].set(x=u, width=waste)
        ax_totals.patches[2 * (1 - y)].set_width(u)
        ax_totals.texts[1 - y].set(x=u + waste, text=f" {u + waste:,.0f}k\n {100 * util:.1f}% used")
    ax_totals.set_xlim(0, 1.6 * sum(totals["reserve"]))
    return layers


class UtilizationExplorer:
    """Sliders "block size" (any int in 1..256: the arithmetic needs no power of two; kernels do, see
    notebook 02) and "requests" (10..1000) over make_workload(num_requests=requests, seed=0). The HTML line
    says `paged utilization: XX.X%` and `reserved utilization: XX.X%`; the picture is `draw_waste`.
    CSS classes: pagedkv-block-size, pagedkv-requests, pagedkv-utilization, pagedkv-waste-plot."""

    def __init__(self, block_size: int = 16, num_requests: int = 200, max_len: int = 4096, seed: int = 0,
                 figsize=(9, 2.8), dpi=80):
        import ipywidgets as widgets

        self.max_len = max_len
        self.seed = seed
        self._syncing = False
        self.block_size = widgets.IntSlider(value=block_size, min=1, max=256, description="block size",
                                            continuous_update=False)
        self.requests = widgets.IntSlider(value=num_requests, min=10, max=1000, step=10,
                                          description="requests", continuous_update=False)
        self.text, self.image = widgets.HTML(), picture_widget()
        for w, css in ((self.block_size, "pagedkv-block-size"), (self.requests, "pagedkv-requests"),
                       (self.text, "pagedkv-utilization"), (self.image, "pagedkv-waste-plot")):
            w.add_class(css)
        for w in (self.block_size, self.requests):
            w.observe(lambda _: None if self._syncing else self.update(), names="value")
        self.fig = Figure(figsize=figsize, dpi=dpi)
        self.ax_requests = self.fig.add_axes((0.07, 0.17, 0.58, 0.78))
        self.ax_totals = self.fig.add_axes((0.78, 0.17, 0.2, 0.78))
        self.widget = widgets.VBox([widgets.HBox([self.block_size, self.requests]), self.text, self.image])
        self.update()

    def workload(self):
        return make_workload(num_requests=self.requests.value, seed=self.seed)

    def summary_text(self) -> str:
        requests, bs = self.workload(), self.block_size.value
        return (f"paged utilization: {100 * utilization_paged(requests, bs):.1f}% (block size {bs}) | "
                f"reserved utilization: {100 * utilization_reserved(requests, self.max_len):.1f}% "
                f"(max_len {self.max_len}) | {len(requests)} requests")

    def update(self, block_size: int | None = None, num_requests: int | None = None) -> None:
        self._syncing = True
        try:
            if block_size is not None:
                self.block_size.value = block_size
            if num_requests is not None:
                self.requests.value = num_requests
        finally:
            self._syncing = False
        self.layers = draw_waste(self.ax_requests, self.ax_totals, self.workload(), self.block_size.value,
                                 self.max_len)
        legend = " ".join(f'<span style="color:{COLORS[k]}">&#9632;</span> {LABELS[k]}' for k in COLORS)
        self.text.value = f"<b>{self.summary_text()}</b><br>{legend}"
        self.image.value = figure_png(self.fig)


def draw_utilization_curve(ax, requests, block_sizes=BLOCK_SIZES, max_len: int = 4096) -> list[float]:
    """Paged utilization at each block size (log2 axis), with the max_len reservation as a line."""
    utils = [100 * utilization_paged(requests, b) for b in block_sizes]
    ax.plot(block_sizes, utils, "o-", color=COLORS["used"], label="paged")
    ax.axhline(100 * utilization_reserved(requests, max_len), color="0.4", ls="--",
               label=f"reserve max_len = {max_len}")
    for b, u in zip(block_sizes, utils, strict=True):
        ax.annotate(f"{u:.1f}", (b, u), textcoords="offset points", xytext=(0, -12), ha="center", fontsize=7)
    ax.set_xscale("log", base=2)
    ax.set_xticks(block_sizes, [str(b) for b in block_sizes])
    ax.set_ylim(0, 105)
    ax.set_xlabel("block size (tokens)")
    ax.set_ylabel("utilization (%)")
    ax.legend(loc="lower left", fontsize=8)
    return utils


def map_image(memory_map: np.ndarray) -> np.ndarray:
    """[T, C] owners (-1 free) -> RGB [C, T, 3]: address downwards, time to the right, one colour per
    request (20 colours, cycled), free white."""
    palette = np.array([to_rgb(c) for c in mpl.colormaps["tab20"].colors])     # [20, 3]
    rgb = palette[memory_map.T % len(palette)]                                  # [C, T, 3]
    rgb[memory_map.T < 0] = 1.0
    return rgb


def draw_memory_map(ax, result, title: str | None = None) -> None:
    """Who owns each piece of KV memory at each step of a `FragmentationResult`."""
    steps = result.steps
    ax.imshow(map_image(result.memory_map), aspect="auto", interpolation="nearest",
              extent=(steps[0] - 0.5, steps[-1] + 0.5, result.capacity, 0))
    ax.set_ylabel("token slot", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_title(title or result.allocator, fontsize=9, loc="left")


def draw_queue(ax, results: dict) -> None:
    """Requests waiting in the queue at each step, one line per allocator."""
    for name, r in results.items():
        ax.plot(r.steps, r.num_waiting, label=f"{name} (mean wait {r.mean_wait:.0f} steps)")
    ax.set_xlabel("step", fontsize=8)
    ax.set_ylabel("waiting", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=8)


BENCH_CALLBACKS = {"memory_plots.UtilizationExplorer.update": bench_cycle(
    UtilizationExplorer, lambda x, v: x.update(*v), [(16, 200), (64, 500), (1, 1000), (256, 10)])}
