"""Notebook 13's pictures: the mini engine's steps, its block pool over time, and the serving simulation.

    plot_engine_stats(stats, fig=None)       batch size, prefix-cache hits and preemptions, step by step
    engine_frames(llm)                       run an LLMEngine to the end, one block-map Frame per step
    frame_figure(frame, fig=None)            one of those frames as a static picture
    EngineStepper(frames)                    block_map.BlockMapStepper over those frames
    draw_serving(ax_run, ax_mem, results)    running requests and KV memory over time, one line per policy
    ServingExplorer()                        sliders "budget (K tokens)" and "block size": paged vs reserve
    draw_throughput_sweep(ax, requests, budgets, block_size)   tokens per step vs budget, both policies
Every number comes from `pagedkv_lib.engine` or `pagedkv_lib.studies.serving_sim`; this module only draws.
A notebook passes a pyplot figure (`fig=plt.figure(...)`) and calls `plt.show()`, so that the picture is
stored as an image; without `fig` the functions make a standalone Figure (widgets, tests).
Owner keys follow `viz.prefix_cache`: a sequence's id, SHARED for ref_count > 1, RELEASED for a free block
whose hash can still be hit (so at most RELEASED = 7 sequences per stepper run).
"""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from pagedkv_lib.studies.memory import KiB, kv_bytes_per_token
from pagedkv_lib.studies.serving_sim import simulate_serving
from pagedkv_lib.studies.workload import make_workload
from pagedkv_lib.viz.block_map import (
    BlockMapStepper,
    Frame,
    bench_cycle,
    draw_block_map,
    figure_png,
    picture_widget,
)
from pagedkv_lib.viz.prefix_cache import RELEASED, SHARED, block_state

COLORS = {"prefill": "#1f77b4", "decode": "#ff7f0e", "cached": "#2ca02c", "preempted": "#d62728",
          "paged": "#2ca02c", "reserve": "#7f7f7f"}
QWEN3_0P6B_BYTES = kv_bytes_per_token(28, 8, 128, 2)      # 112 KiB per token (notebook 01)


def plot_engine_stats(stats, fig: Figure | None = None, figsize=(8, 3.6), dpi=80) -> Figure:
    """Three panels over the steps of one run (`LLMEngine.stats`): sequences per step (prefill / decode),
    prompt tokens computed vs found in the prefix cache, preemptions with the free blocks. Drawn into `fig`
    (empty) if given."""
    steps = np.arange(len(stats))                                                 # [S]
    prefill = np.array([s.is_prefill for s in stats])                             # [S]
    fig = fig if fig is not None else Figure(figsize=figsize, dpi=dpi)
    ax_batch, ax_tokens, ax_pre = fig.subplots(3, 1, sharex=True)
    seqs = np.array([s.num_seqs for s in stats])
    ax_batch.bar(steps, seqs, color=[COLORS["prefill" if p else "decode"] for p in prefill], width=0.8)
    ax_batch.set_ylabel("batch", fontsize=8)
    legend = [Patch(color=COLORS["prefill"], label="prefill step"),
              Patch(color=COLORS["decode"], label="decode step")]
    ax_batch.legend(handles=legend, fontsize=7, loc="upper right", ncols=2)
    computed = np.array([s.num_computed_tokens if s.is_prefill else 0 for s in stats])
    cached = np.array([s.num_cached_tokens for s in stats])
    ax_tokens.bar(steps, computed, color=COLORS["prefill"], width=0.8, label="prompt tokens computed")
    ax_tokens.bar(steps, cached, bottom=computed, color=COLORS["cached"], width=0.8,
                  label="from prefix cache")
    ax_tokens.set_ylabel("tokens", fontsize=8)
    ax_tokens.legend(fontsize=7, loc="upper right", ncols=2)
    ax_pre.bar(steps, [s.num_preempted for s in stats], color=COLORS["preempted"], width=0.8,
               label="preempted")
    ax_pre.set_ylabel("preempted", fontsize=8)
    ax_free = ax_pre.twinx()
    ax_free.plot(steps, [s.num_free_blocks for s in stats], color="0.3", lw=1, label="free blocks")
    ax_free.set_ylabel("free", fontsize=8)
    ax_free.set_ylim(bottom=0)
    legend = [Patch(color=COLORS["preempted"], label="preempted"),
              Line2D([], [], color="0.3", label="free blocks")]
    ax_pre.legend(handles=legend, fontsize=7, loc="upper right", ncols=2)
    ax_pre.set_xlabel("engine step", fontsize=8)
    for ax in (ax_batch, ax_tokens, ax_pre, ax_free):
        ax.tick_params(labelsize=7)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    fig.subplots_adjust(left=0.07, right=0.93, top=0.97, bottom=0.12, hspace=0.15)
    return fig


# ----------------------------------------------------------------------------------------------------------
# the block pool, step by step

def engine_frames(llm) -> tuple[list[Frame], dict[int, list[int]]]:
    """Step `llm` until it is done; returns (one Frame before the first step and one after each step,
    {seq_id: completion token ids})."""
    scheduler = llm.scheduler
    seqs = {s.seq_id: s for s in scheduler.waiting}
    if len(seqs) > RELEASED or any(i >= RELEASED for i in seqs):
        raise ValueError(f"engine_frames: expected at most {RELEASED} requests with ids < {RELEASED} "
                         f"(colours), got ids {sorted(seqs)}")
    frames = [_engine_frame(llm, seqs, f"{len(seqs)} requests waiting, "
                                       f"{llm.block_manager.num_free_blocks} blocks free")]
    outputs = {}
    while not llm.is_finished():
        running = [s.seq_id for s in scheduler.running]
        finished = llm.step()
        st = llm.stats[-1]
        outputs.update((s.seq_id, s.completion_token_ids) for s in finished)
        waiting = {s.seq_id for s in scheduler.waiting}
        what = f"step {st.step}: {'prefill' if st.is_prefill else 'decode'} {st.num_seqs} seq(s)"
        if st.num_cached_tokens:
            what += f", {st.num_cached_tokens} prompt tokens from the prefix cache"
        preempted = [i for i in running if i in waiting]
        if preempted:
            what += f", preempted {preempted}"
        if finished:
            what += f", finished {[s.seq_id for s in finished]}"
        frames.append(_engine_frame(llm, seqs, what))
    return frames, outputs


def _engine_frame(llm, seqs: dict, description: str) -> Frame:
    bm = llm.block_manager
    n = len(bm.blocks)
    owners, labels = [None] * n, [""] * n
    for b in range(n):
        state = block_state(bm, b)
        if state == "shared":
            owners[b], labels[b] = SHARED, f"x{bm.blocks[b].ref_count}"
        elif state == "released":
            owners[b], labels[b] = RELEASED, "#"
    tables = {}
    for sid, seq in seqs.items():
        if seq.block_table:
            tables[f"s{sid}"] = list(seq.block_table)
        for i, b in enumerate(seq.block_table):
            if owners[b] is None:
                owners[b], labels[b] = sid, f"s{sid}.{i}"
    names = {sid: f"seq {sid}" for sid in seqs} | {SHARED: "shared", RELEASED: "released (can hit)"}
    return Frame(description, owners, labels, list(bm.free_block_ids), tables, names)


def frame_figure(frame: Frame, fig: Figure | None = None, figsize=(8, 1.7), dpi=80) -> Figure:
    """One frame as a static picture (what the stepper shows), with the owners' legend on the right; drawn
    into `fig` (empty) if given."""
    fig = fig if fig is not None else Figure(figsize=figsize, dpi=dpi)
    ax = fig.add_axes((0.01, 0.02, 0.8, 0.84))
    draw_block_map(ax, frame.owners, labels=frame.labels, names=frame.names, title=frame.description)
    return fig


class EngineStepper(BlockMapStepper):
    """The engine's pool after each step: "back" / "step" buttons (block_map's CSS classes)."""

    def __init__(self, frames: list[Frame], figsize=(8, 1.6), dpi=80):
        super().__init__(frames, figsize=figsize, dpi=dpi)


# ----------------------------------------------------------------------------------------------------------
# the serving simulation (no model): paged vs reserve-max-length

MAX_POINTS = 500  # points drawn per curve


def draw_serving(ax_run, ax_mem, results: dict) -> None:
    """Running requests (ax_run) and used / allocated KV slots (ax_mem) over the steps, per policy."""
    for ax in (ax_run, ax_mem):
        ax.clear()
    for policy, r in results.items():
        c = COLORS[policy]
        every = max(1, len(r.num_running) // MAX_POINTS)        # a redraw costs per point, the eye does not
        steps = np.arange(0, len(r.num_running), every)
        ax_run.plot(steps, r.num_running[::every], color=c, lw=1,
                    label=f"{policy}: {r.mean_concurrency:.1f} on average")
        ax_mem.plot(steps, r.allocated_tokens[::every] / 1e3, color=c, lw=1, ls="--")
        ax_mem.plot(steps, r.used_tokens[::every] / 1e3, color=c, lw=1)
    budget = next(iter(results.values())).budget_tokens
    ax_mem.axhline(budget / 1e3, color="k", lw=0.6)
    ax_run.set_ylabel("running", fontsize=8)
    ax_mem.set_ylabel("K slots", fontsize=8)
    ax_mem.set_xlabel("step (one token per running request)", fontsize=8)
    ax_run.legend(fontsize=7, loc="upper right")
    legend = [Line2D([], [], color="0.3", label="allocated (dashed) / used (solid)"),
              Line2D([], [], color="k", label="budget")]
    ax_mem.legend(handles=legend, fontsize=7, loc="upper right")
    for ax in (ax_run, ax_mem):
        ax.tick_params(labelsize=7)
        ax.locator_params(nbins=4)           # tick labels are most of a redraw's cost


def serving_summary(results: dict) -> str:
    """One line per policy: concurrency, throughput, memory utilization, preemptions; then the ratio."""
    lines = []
    for policy, r in results.items():
        used, waste = 100 * r.mean_utilization, 100 * (1 - r.mean_utilization)
        lines.append(f"{policy:7s}: {r.mean_concurrency:6.1f} running on average "
                     f"(max {r.max_concurrency:3d}), {r.throughput:6.1f} tokens/step, "
                     f"{r.num_steps:6d} steps, KV utilization {used:5.1f}% (waste {waste:4.1f}%), "
                     f"{r.num_preemptions} preemptions")
    if {"paged", "reserve"} <= set(results):
        ratio = results["paged"].throughput / results["reserve"].throughput
        lines.append(f"paged / reserve throughput: {ratio:.2f}x")
    return "\n".join(lines)


class ServingExplorer:
    """Sliders "budget (K tokens)" (8..512) and "block size" (1..256) over `simulate_serving` on
    make_workload(num_requests, seed) for both policies. The HTML line holds `serving_summary` and the budget
    in GiB for Qwen3-0.6B; the picture is `draw_serving`. CSS classes: pagedkv-budget, pagedkv-block-size,
    pagedkv-serving-summary, pagedkv-serving-plot."""

    def __init__(self, budget_k: int = 64, block_size: int = 16, num_requests: int = 200, max_len: int = 4096,
                 seed: int = 0, figsize=(8, 3), dpi=80):
        import ipywidgets as widgets

        self.requests, self.max_len, self._syncing = make_workload(num_requests, seed), max_len, False
        self.budget = widgets.IntSlider(value=budget_k, min=8, max=512, step=8, description="budget (K tok)",
                                        continuous_update=False)
        self.block_size = widgets.IntSlider(value=block_size, min=1, max=256, description="block size",
                                            continuous_update=False)
        self.text, self.image = widgets.HTML(), picture_widget()
        for w, css in ((self.budget, "pagedkv-budget"), (self.block_size, "pagedkv-block-size"),
                       (self.text, "pagedkv-serving-summary"), (self.image, "pagedkv-serving-plot")):
            w.add_class(css)
        for w in (self.budget, self.block_size):
            w.observe(lambda _: None if self._syncing else self.update(), names="value")
        self.fig = Figure(figsize=figsize, dpi=dpi)
        self.ax_run, self.ax_mem = self.fig.subplots(2, 1, sharex=True)
        self.fig.subplots_adjust(left=0.08, right=0.98, top=0.97, bottom=0.14, hspace=0.12)
        self.widget = widgets.VBox([widgets.HBox([self.budget, self.block_size]), self.text, self.image])
        self.update()

    def simulate(self) -> dict:
        budget = self.budget.value * 1024
        return {p: simulate_serving(self.requests, p, budget_tokens=budget, block_size=self.block_size.value,
                                    max_len=self.max_len) for p in ("paged", "reserve")}

    def update(self, budget_k: int | None = None, block_size: int | None = None) -> None:
        self._syncing = True
        try:
            if budget_k is not None:
                self.budget.value = budget_k
            if block_size is not None:
                self.block_size.value = block_size
        finally:
            self._syncing = False
        self.results = self.simulate()
        draw_serving(self.ax_run, self.ax_mem, self.results)
        gib = self.budget.value * 1024 * QWEN3_0P6B_BYTES / 2**30
        self.text.value = (f"<pre>{serving_summary(self.results)}\nbudget {self.budget.value}K tokens = "
                           f"{gib:.1f} GiB of KV for Qwen3-0.6B ({QWEN3_0P6B_BYTES // KiB} KiB per token)"
                           "</pre>")
        self.image.value = figure_png(self.fig)


def draw_throughput_sweep(ax, requests, budgets_k, block_size: int = 16, max_len: int = 4096) -> dict:
    """Generated tokens per step vs budget (K tokens), paged and reserve; returns {policy: [throughput]}."""
    out = {}
    for policy in ("paged", "reserve"):
        out[policy] = [simulate_serving(requests, policy, budget_tokens=b * 1024, block_size=block_size,
                                        max_len=max_len).throughput for b in budgets_k]
        ax.plot(budgets_k, out[policy], "o-", color=COLORS[policy], label=policy, ms=3)
    ax.set_xscale("log", base=2)
    ax.set_xticks(budgets_k, [str(b) for b in budgets_k])
    ax.set_xlabel("KV budget (K tokens)", fontsize=8)
    ax.set_ylabel("tokens / step", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=8)
    return out


BENCH_CALLBACKS = {"engine_plots.ServingExplorer.update": bench_cycle(
    ServingExplorer, lambda x, v: x.update(*v), [(64, 16), (256, 16), (32, 1), (128, 256)])}
