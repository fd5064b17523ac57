"""Notebook 14's pictures of the serving simulation: paging against the paper's three reservations.

    draw_serving(ax_run, ax_mem, results)        running requests and KV slots over time, a colour per policy
    serving_legend_html(policies)                the same legend as HTML, for a widget's text line
    serving_summary(results)                     one line per policy: batch, throughput, utilization
    ServingExplorer()                            "workload", "KV dtype", "KV budget (GiB)", "block size"
    draw_throughput_sweep(ax, requests, budgets_k)   tokens per step against the budget, per policy
    draw_latency_curves(ax, rates, curves)       normalized latency against the request rate (Fig. 12's shape)
Every number comes from `pagedkv_lib.studies.serving.simulation` and `pagedkv_lib.studies.serving.measures`;
this module only draws. Colours: `viz.policy_plots.POLICY_COLORS`.
"""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from pagedkv_lib.studies.memory import MODELS, GiB, KiB
from pagedkv_lib.studies.policies import LABELS, POLICY_KEYS
from pagedkv_lib.studies.serving.simulation import simulate_serving
from pagedkv_lib.studies.workload import MAX_LEN, WORKLOADS, make_trace
from pagedkv_lib.viz.block_map import bench_cycle, figure_png, picture_widget
from pagedkv_lib.viz.policy_plots import KV_DTYPES, POLICY_COLORS

MAX_POINTS = 500  # points drawn per curve
MODEL = MODELS["Qwen3-0.6B"]  # the model whose KV the explorer's budget holds


def draw_serving(ax_run, ax_mem, results: dict, legend: bool = True) -> None:
    """Running requests (ax_run) and used / allocated KV slots (ax_mem) over the steps, per policy key.
    Called again with the same policies, it moves the lines in place (a redraw costs its text; a widget
    leaves the legends out, `serving_legend_html` says the same in its HTML line)."""
    if [line.get_color() for line in ax_run.lines] != [POLICY_COLORS[p] for p in results]:
        _build_serving_axes(ax_run, ax_mem, list(results), legend)
    for i, (policy, r) in enumerate(results.items()):
        every = max(1, len(r.num_running) // MAX_POINTS)        # a redraw costs per point, the eye does not
        steps = np.arange(0, len(r.num_running), every)          # [points]
        ax_run.lines[i].set_data(steps, r.num_running[::every])
        if legend:
            label = f"{LABELS[policy]}: {r.mean_concurrency:.1f} on average"
            ax_run.get_legend().get_texts()[i].set_text(label)
        ax_mem.lines[2 * i].set_data(steps, r.allocated_tokens[::every] / 1e3)
        ax_mem.lines[2 * i + 1].set_data(steps, r.used_tokens[::every] / 1e3)
    budget = next(iter(results.values())).budget_tokens / 1e3
    ax_mem.lines[-1].set_ydata([budget, budget])
    ax_run.set_xlim(0, max(r.num_steps for r in results.values()))
    ax_run.set_ylim(0, 1.05 * max(r.max_concurrency for r in results.values()))
    ax_mem.set_ylim(0, 1.05 * budget)


def _build_serving_axes(ax_run, ax_mem, policies: list[str], legend: bool) -> None:
    for ax in (ax_run, ax_mem):
        ax.clear()
    for policy in policies:
        c = POLICY_COLORS[policy]
        ax_run.plot([], [], color=c, lw=1, label=LABELS[policy])
        ax_mem.plot([], [], color=c, lw=1, ls="--")
        ax_mem.plot([], [], color=c, lw=1)
    ax_mem.axhline(0, color="k", lw=0.6)
    ax_run.set_ylabel("running", fontsize=8)
    ax_mem.set_ylabel("K slots", fontsize=8)
    ax_mem.set_xlabel("step (one token per running request)", fontsize=8)
    if legend:
        ax_run.legend(fontsize=7, loc="upper right")
        handles = [Line2D([], [], color="0.3", label="allocated (dashed) / used (solid)"),
                   Line2D([], [], color="k", label="budget")]
        ax_mem.legend(handles=handles, fontsize=7, loc="upper right")
    for ax in (ax_run, ax_mem):
        ax.tick_params(labelsize=7)
        ax.locator_params(nbins=4)           # tick labels are most of a redraw's cost


def serving_legend_html(policies) -> str:
    """The pictures' legend as HTML: a coloured square per policy, then how to read the memory panel."""
    keys = " ".join(f'<span style="color:{POLICY_COLORS[k]}">&#9632;</span> {LABELS[k]}' for k in policies)
    return f"{keys} | memory: allocated dashed, used solid, budget black"


def serving_summary(results: dict) -> str:
    """One line per policy: concurrency, throughput, memory utilization, preemptions; then paging's gain."""
    lines = []
    for policy, r in results.items():
        used, waste = 100 * r.mean_utilization, 100 * (1 - r.mean_utilization)
        lines.append(f"{LABELS[policy]:13s}: {r.mean_concurrency:6.1f} running on average "
                     f"(max {r.max_concurrency:3d}), {r.throughput:6.1f} tokens/step, "
                     f"{r.num_steps:6d} steps, KV utilization {used:5.1f}% (waste {waste:4.1f}%), "
                     f"{r.num_preemptions} preemptions")
    if "paged" in results:
        gains = [f"{results['paged'].throughput / r.throughput:.2f}x {LABELS[k]}"
                 for k, r in results.items() if k != "paged"]
        lines.append("paged throughput over: " + ", ".join(gains))
    return "\n".join(lines)


class ServingExplorer:
    """Dropdown "workload", toggle "KV dtype" (bf16, fp8), sliders "KV budget (GiB)" (1..56) and "block size"
    (1..256) over `simulate_serving` of the first `num_requests` seeded requests of the workload, under the
    four policies (the Orca ones at the workload's max_len). The budget is GiB of Qwen3-0.6B KV: 7 GiB hold
    65,536 slots in bf16 and 131,072 in fp8. The HTML line holds `serving_summary` and the budget in slots;
    the picture is `draw_serving`. CSS classes: pagedkv-serving-workload, pagedkv-kv-dtype, pagedkv-budget,
    pagedkv-block-size, pagedkv-serving-summary, pagedkv-serving-plot."""

    def __init__(self, budget_gib: int = 7, block_size: int = 16, kv_dtype: str = "bf16",
                 workload: str = "synthetic", num_requests: int = 200, seed: int = 0, figsize=(8, 3), dpi=80):
        import ipywidgets as widgets

        self.traces = {w: make_trace(w, num_requests, seed) for w in WORKLOADS}
        self.workload = widgets.Dropdown(options=WORKLOADS, value=workload, description="workload")
        self.kv_dtype = widgets.ToggleButtons(options=KV_DTYPES, value=kv_dtype, description="KV dtype")
        self.budget = widgets.IntSlider(value=budget_gib, min=1, max=56, description="KV budget (GiB)",
                                        continuous_update=False, style={"description_width": "initial"})
        self.block_size = widgets.IntSlider(value=block_size, min=1, max=256, description="block size",
                                            continuous_update=False)
        self.text, self.image = widgets.HTML(), picture_widget()
        controls = (self.workload, self.kv_dtype, self.budget, self.block_size)
        names = ("serving-workload", "kv-dtype", "budget", "block-size", "serving-summary", "serving-plot")
        for w, css in zip((*controls, self.text, self.image), names, strict=True):
            w.add_class(f"pagedkv-{css}")
        self._syncing = False
        for w in controls:
            w.observe(lambda _: None if self._syncing else self.update(), names="value")
        self.fig = Figure(figsize=figsize, dpi=dpi)
        self.ax_run, self.ax_mem = self.fig.subplots(2, 1, sharex=True)
        self.fig.subplots_adjust(left=0.08, right=0.98, top=0.97, bottom=0.14, hspace=0.12)
        self.widget = widgets.VBox([widgets.HBox([self.workload, self.kv_dtype]),
                                    widgets.HBox([self.budget, self.block_size]), self.text, self.image])
        self.update()

    @property
    def budget_tokens(self) -> int:
        return self.budget.value * GiB // MODEL.with_kv_dtype(self.kv_dtype.value).bytes_per_token

    def simulate(self) -> dict:
        requests, max_len = self.traces[self.workload.value], MAX_LEN[self.workload.value]
        return {p: simulate_serving(requests, p, budget_tokens=self.budget_tokens, max_len=max_len,
                                    block_size=self.block_size.value) for p in POLICY_KEYS}

    def update(self, **values) -> None:
        """Set any of workload, kv_dtype, budget (GiB), block_size at once, then redraw once."""
        self._syncing = True
        try:
            for name, value in values.items():
                getattr(self, name).value = value
        finally:
            self._syncing = False
        self.results = self.simulate()
        draw_serving(self.ax_run, self.ax_mem, self.results, legend=False)
        bpt = MODEL.with_kv_dtype(self.kv_dtype.value).bytes_per_token
        self.text.value = (f"<pre>{serving_summary(self.results)}\nbudget {self.budget.value} GiB of "
                           f"{MODEL.name} KV in {self.kv_dtype.value} ({bpt // KiB} KiB per token) = "
                           f"{self.budget_tokens:,} slots</pre>{serving_legend_html(self.results)}")
        self.image.value = figure_png(self.fig)


def draw_throughput_sweep(ax, requests, budgets_k, block_size: int = 16, max_len: int = 4096,
                          keys=POLICY_KEYS) -> dict:
    """Generated tokens per step against the budget (K tokens), per policy; returns {key: [throughput]}."""
    out = {}
    for key in keys:
        out[key] = [simulate_serving(requests, key, budget_tokens=b * 1024, block_size=block_size,
                                     max_len=max_len).throughput for b in budgets_k]
        ax.plot(budgets_k, out[key], "o-", color=POLICY_COLORS[key], label=LABELS[key], ms=3)
    ax.set_xscale("log", base=2)
    ax.set_xticks(budgets_k, [str(b) for b in budgets_k])
    ax.set_xlabel("KV budget (K tokens)", fontsize=8)
    ax.set_ylabel("tokens / step", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=8)
    return out


def draw_latency_curves(ax, rates, curves: dict[str, np.ndarray], y_max: float = 10.0) -> None:
    """Normalized latency against the request rate, a line per policy; lines leave the top, as in Fig. 12."""
    for key in POLICY_KEYS:
        if key in curves:
            ax.plot(1e3 * np.asarray(rates, dtype=float), curves[key], "o-", ms=3, color=POLICY_COLORS[key],
                    label=LABELS[key])
    ax.set_ylim(0, y_max)
    ax.set_xlabel("request rate (requests per 1,000 steps)", fontsize=8)
    ax.set_ylabel("normalized latency\n(steps per output token)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=8)


BENCH_CALLBACKS = {"serving_plots.ServingExplorer.update": bench_cycle(
    ServingExplorer, lambda x, v: x.update(**v),
    [{"budget": 28}, {"kv_dtype": "fp8"}, {"block_size": 1}, {"workload": "sharegpt"}, {"budget": 7},
     {"block_size": 256}, {"kv_dtype": "bf16"}, {"workload": "synthetic"}, {"block_size": 16}])}
