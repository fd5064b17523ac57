"""Notebook 01's pictures of the paper's four policies: where their KV memory goes, and what fits.

    draw_breakdown(ax, shares, paper=None)   a stacked bar per policy: token / reserved / internal / external
    category_legend_html()                   the categories' colours as HTML, for a widget's text line
    PolicyExplorer()                         dropdowns "workload", "view", slider "block size", "KV dtype"
Every number comes from `pagedkv_lib.studies.waste` and `pagedkv_lib.studies.policies`; this module only
draws. The colours of the categories and of the policies are shared with `viz.serving_plots`.
"""
from __future__ import annotations

from matplotlib.figure import Figure

from pagedkv_lib.studies.memory import MODELS, GiB, KiB
from pagedkv_lib.studies.policies import LABELS, POLICY_KEYS, make_policy
from pagedkv_lib.studies.waste import CATEGORIES, waste_shares
from pagedkv_lib.studies.workload import MAX_LEN, WORKLOADS, make_trace, request_arrays
from pagedkv_lib.viz.block_map import bench_cycle, figure_png, picture_widget

CATEGORY_COLORS = {"token": "#6aa84f", "reserved": "#edae49", "internal": "#e63946", "external": "#c0c0c0"}
CATEGORY_NAMES = {"token": "token states", "reserved": "reservation", "internal": "internal frag.",
                  "external": "external frag. & others"}
POLICY_COLORS = {"orca_max": "#d62728", "orca_pow2": "#ff7f0e", "orca_oracle": "#9467bd", "paged": "#2ca02c"}
KV_DTYPES = ("bf16", "fp8")


def _breakdown_rows(shares, paper) -> list[tuple[float, float, dict[str, float]]]:
    """(y, bar height, {category: %}) per bar: one per policy, or the course's and the paper's."""
    rows = []
    for i, key in enumerate(k for k in POLICY_KEYS if k in shares):
        course = {c: 100 * shares[key][c] for c in CATEGORIES}
        if paper and key in paper:
            theirs = {c: paper[key].get(c, 0.0) for c in CATEGORIES}
            rows += [(i - 0.18, 0.32, course), (i + 0.2, 0.28, theirs)]
        else:
            rows.append((i, 0.6, course))
    return rows


def draw_breakdown(ax, shares: dict[str, dict[str, float]], paper: dict[str, dict[str, float]] | None = None,
                   legend: bool = True):
    """One horizontal bar per policy key of `shares` ({key: {category: share in 0..1}}); with `paper` ({key:
    {category: %}}), a thinner bar of the paper's figure under each. Called again with the same policies it
    moves the bars and labels in place (a redraw costs its text; a widget leaves the legend out and puts
    `category_legend_html()` in its HTML line)."""
    rows = _breakdown_rows(shares, paper)
    if len(ax.patches) != len(rows) * len(CATEGORIES):          # first call, or another layout: build
        ax.clear()
        for r, (y, height, _) in enumerate(rows):
            for c in CATEGORIES:
                ax.barh(y, 0, height, color=CATEGORY_COLORS[c], label=CATEGORY_NAMES[c] if r == 0 else None)
                ax.text(0, y, "", ha="center", va="center", fontsize=7)
        keys = [k for k in POLICY_KEYS if k in shares]
        ax.set_yticks(range(len(keys)), [LABELS[k] + ("\ncourse / paper" if paper and k in paper else "")
                                         for k in keys], fontsize=8)
        ax.set_ylim(len(keys) - 0.5, -0.5)
        ax.set_xlim(0, 100)
        ax.set_xticks([0, 25, 50, 75, 100])
        ax.set_xlabel("% of KV memory", fontsize=8)
        ax.tick_params(labelsize=7)
        if legend:
            ax.legend(fontsize=7, ncols=4, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    bars, labels = iter(ax.patches), iter(ax.texts)
    for _, _, values in rows:
        left = 0.0
        for c in CATEGORIES:
            next(bars).set(x=left, width=values[c])
            next(labels).set(x=left + values[c] / 2, text=f"{values[c]:.1f}" if values[c] >= 6 else "")
            left += values[c]


def category_legend_html() -> str:
    """The four categories' colours and names, for a widget's HTML line."""
    return " ".join(f'<span style="color:{CATEGORY_COLORS[c]}">&#9632;</span> {CATEGORY_NAMES[c]}'
                    for c in CATEGORIES)


class PolicyExplorer:
    """Dropdowns "workload" (synthetic, sharegpt, alpaca) and "view" (lifetime, final), slider "block size"
    (1..256) and toggle "KV dtype" (bf16, fp8) over the first `num_requests` seeded requests of the workload,
    each workload at its own max_len (synthetic 4096, the others 2048). The HTML line gives each policy's
    token-state share and how many of the requests fit at once, at their final lengths, in the paper's memory:
    12 GiB of OPT-13B KV (Table 1, p. 9), 15,728 slots in bf16 and twice as many in fp8.
    CSS classes: pagedkv-policy-workload, pagedkv-policy-view, pagedkv-policy-block-size,
    pagedkv-policy-kv-dtype, pagedkv-policy-shares, pagedkv-policy-plot."""

    def __init__(self, workload: str = "synthetic", view: str = "lifetime", block_size: int = 16,
                 kv_dtype: str = "bf16", num_requests: int = 2000, seed: int = 0, figsize=(8, 2.4), dpi=80):
        import ipywidgets as widgets

        self.traces = {w: make_trace(w, num_requests, seed) for w in WORKLOADS}
        self.workload = widgets.Dropdown(options=WORKLOADS, value=workload, description="workload")
        self.view = widgets.Dropdown(options=("lifetime", "final"), value=view, description="view")
        self.block_size = widgets.IntSlider(value=block_size, min=1, max=256, description="block size",
                                            continuous_update=False)
        self.kv_dtype = widgets.ToggleButtons(options=KV_DTYPES, value=kv_dtype, description="KV dtype")
        self.text, self.image = widgets.HTML(), picture_widget()
        controls = (self.workload, self.view, self.block_size, self.kv_dtype)
        for w, css in zip((*controls, self.text, self.image),
                          ("workload", "view", "block-size", "kv-dtype", "shares", "plot"), strict=True):
            w.add_class(f"pagedkv-policy-{css}")
        for w in controls:
            w.observe(lambda _: self.update(), names="value")
        self.fig = Figure(figsize=figsize, dpi=dpi)
        self.ax = self.fig.add_axes((0.17, 0.2, 0.8, 0.75))
        self.widget = widgets.VBox([widgets.HBox([self.workload, self.view]),
                                    widgets.HBox([self.block_size, self.kv_dtype]), self.text, self.image])
        self.update()

    def policies(self) -> dict:
        w, b = self.workload.value, self.block_size.value
        return {k: make_policy(k, max_len=MAX_LEN[w], block_size=b) for k in POLICY_KEYS}

    def fits(self) -> tuple[int, dict[str, int]]:
        """(KV slots of the paper's memory in the chosen dtype, {policy key: requests that fit at once})."""
        opt = MODELS["OPT-13B"].with_kv_dtype(self.kv_dtype.value)
        slots = 12 * GiB // opt.bytes_per_token
        prompt, output = request_arrays(self.traces[self.workload.value])
        return slots, {k: p.fit(prompt, output, slots) for k, p in self.policies().items()}

    def summary_text(self) -> str:
        slots, fits = self.fits()
        tokens = ", ".join(f"{LABELS[k]} {100 * s['token']:.1f}%" for k, s in self.current.items())
        held = ", ".join(f"{LABELS[k]} {n}" for k, n in fits.items())
        bpt = MODELS["OPT-13B"].with_kv_dtype(self.kv_dtype.value).bytes_per_token
        return (f"token states ({self.workload.value}, max_len {MAX_LEN[self.workload.value]}, "
                f"{self.view.value} view): {tokens}\n12 GiB of OPT-13B KV in {self.kv_dtype.value} "
                f"({bpt // KiB} KiB per token) = {slots:,} slots hold at once, at their final lengths: "
                f"{held} of the first {len(self.traces[self.workload.value]):,} requests")

    def update(self) -> None:
        self.current = {k: waste_shares(self.traces[self.workload.value], p, self.view.value)
                        for k, p in self.policies().items()}
        draw_breakdown(self.ax, self.current, legend=False)
        self.text.value = f"<pre>{self.summary_text()}</pre>{category_legend_html()}"
        self.image.value = figure_png(self.fig)


def _move(x: PolicyExplorer, control_value) -> None:
    """One control moved (one redraw), as a learner does."""
    control, value = control_value
    getattr(x, control).value = value


BENCH_CALLBACKS = {"policy_plots.PolicyExplorer.update": bench_cycle(
    PolicyExplorer, _move, [("workload", "sharegpt"), ("block_size", 64), ("kv_dtype", "fp8"),
                            ("workload", "alpaca"), ("view", "final"), ("block_size", 16),
                            ("kv_dtype", "bf16"), ("workload", "synthetic"), ("view", "lifetime")])}
