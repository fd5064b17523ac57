"""Notebook 14's pictures of the mini engine: its steps and its block pool over time.

    plot_engine_stats(stats, fig=None)       batch size, prefix-cache hits and preemptions, step by step
    engine_frames(llm)                       run an LLMEngine to the end, one block-map Frame per step
    frame_figure(frame, fig=None)            one of those frames as a static picture
    EngineStepper(frames)                    block_map.BlockMapStepper over those frames
    decode_step_rows(result)                 benchmarks/results/bench_engine.json as one row per batch size
    plot_decode_steps(rows, fig=None)        ms per decode step: eager, CUDA graphs, the floor, transformers
    host_spans(timeline, first_step, n)      LLMEngine.timeline (HostSpans) as span dicts, steps first..+n
    ordinal_spans(spans)                     the same spans one unit wide each, in host order (the CPU's
                                             picture: the order is deterministic, the times are not)
    plot_step_timeline(runs, fig=None)       host and device lanes per step, one panel per run (CPU order
                                             or measured ms)
Every number comes from `pagedkv_lib.engine` or a stored benchmark; this module only draws. The serving
simulation's pictures are in `viz.serving_plots`. A notebook passes a pyplot figure (`fig=plt.figure(...)`)
and calls `plt.show()`, so that the picture is stored as an image; without `fig` the functions make a
standalone Figure (widgets, tests).
Owner keys follow `viz.prefix_cache`: a sequence's id, SHARED for ref_count > 1, RELEASED for a free block
whose hash can still be hit (so at most RELEASED = 7 sequences per stepper run).
"""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from pagedkv_lib.viz.block_map import BlockMapStepper, Frame, draw_block_map
from pagedkv_lib.viz.prefix_cache import RELEASED, SHARED, block_state

COLORS = {"prefill": "#1f77b4", "decode": "#ff7f0e", "cached": "#2ca02c", "preempted": "#d62728"}


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


def decode_step_rows(result: dict) -> list[dict]:
    """One row per batch size of bench_engine.json: mean decode ms/step eager and graphed, the floor, the
    graph replay alone, and the fastest transformers method (name and ms/step) where it ran; graphed with
    overlap scheduling (overlap_ms, its kernels per step) where the run has that mode, else None."""
    rows = []
    hf = result.get("hf", {}).get("methods", {})
    for B in result["batches"]:
        eager = result["modes"]["eager"]["batches"].get(str(B), {})
        graphed = result["modes"]["graphed"]["batches"].get(str(B), {})
        overlap = result["modes"].get("overlap", {}).get("batches", {}).get(str(B), {})   # issue 32's runs
        if "ms_per_step" not in eager or "ms_per_step" not in graphed:
            continue
        timed = {name: m["batches"][str(B)]["ms_per_step"] for name, m in hf.items()
                 if "ms_per_step" in m.get("batches", {}).get(str(B), {})}
        best = min(timed, key=timed.get) if timed else None
        rows.append(dict(B=B, eager_ms=eager["ms_per_step"], graphed_ms=graphed["ms_per_step"],
                         floor_ms=graphed["floor_ms"], replay_ms=graphed.get("graph_replay_ms"),
                         replay_floor_ms=graphed.get("replay_floor_ms"), hf_method=best,
                         hf_ms=timed.get(best), kernels=graphed.get("profile", {}).get("kernels"),
                         overlap_ms=overlap.get("ms_per_step"),
                         overlap_kernels=overlap.get("profile", {}).get("kernels")))
    return rows


def plot_decode_steps(rows: list[dict], fig: Figure | None = None, figsize=(7, 2.8), dpi=80) -> Figure:
    """Bars per batch size, log scale: eager, CUDA graphs, the fastest transformers method, the floor."""
    fig = fig if fig is not None else Figure(figsize=figsize, dpi=dpi)
    ax = fig.subplots()
    x = np.arange(len(rows))                                                     # [batch sizes]
    series = [("eager", "eager_ms", "#d62728"), ("CUDA graphs", "graphed_ms", "#1f77b4"),
              ("transformers (fastest)", "hf_ms", "0.55"),
              ("floor: bytes / copy rate", "floor_ms", "#2ca02c")]
    width = 0.2
    for i, (label, key, color) in enumerate(series):
        values = [r[key] if r[key] is not None else np.nan for r in rows]
        ax.bar(x + (i - 1.5) * width, values, width, color=color, label=label)
    ax.set_yscale("log")
    ax.set_xticks(x, [f"batch {r['B']}" for r in rows], fontsize=8)
    ax.set_ylabel("ms per decode step", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7, ncols=4, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    return fig


PHASE_COLORS = {"schedule": "#9467bd", "launch": "#1f77b4", "read": "#d62728", "postprocess": "#2ca02c",
                "forward": "#ff7f0e"}


def host_spans(timeline, first_step: int, num_steps: int) -> list[dict]:
    """The HostSpans of steps first_step .. first_step + num_steps - 1, in host order, as the benchmark's
    span dicts (lane "host", start_ms / end_ms from the first of them)."""
    chosen = [h for h in timeline if first_step <= h.step < first_step + num_steps]
    t0 = chosen[0].start
    return [dict(lane="host", step=h.step, phase=h.phase, start_ms=(h.start - t0) * 1e3,
                 end_ms=(h.end - t0) * 1e3) for h in chosen]


def ordinal_spans(spans: list[dict]) -> list[dict]:
    """Each span one unit wide, in order of start, gaps dropped: a picture of the order alone. On a CPU the
    device is the host: its lane repeats the launches (the forward runs inside them)."""
    out = []
    for i, s in enumerate(sorted(spans, key=lambda s: s["start_ms"])):
        out.append(dict(s, start_ms=float(i), end_ms=i + 0.9))
        if s["phase"] == "launch":
            out.append(dict(out[-1], lane="device", phase="forward"))
    return out


def plot_step_timeline(runs: dict[str, list[dict]], fig: Figure | None = None, figsize=(8, 3.2),
                       dpi=80) -> Figure:
    """One panel per run (name, its unit included -> span dicts with lane, step, phase, start_ms, end_ms): a
    host and a device lane, a box per span coloured by phase and labelled with its step."""
    fig = fig if fig is not None else Figure(figsize=figsize, dpi=dpi)
    axes = np.atleast_1d(fig.subplots(len(runs), 1))
    lanes = {"host": 1, "device": 0}
    for ax, (name, spans) in zip(axes, runs.items(), strict=True):
        for s in spans:
            y = lanes[s["lane"]]
            ax.barh(y, s["end_ms"] - s["start_ms"], left=s["start_ms"], height=0.6,
                    color=PHASE_COLORS[s["phase"]], edgecolor="white", linewidth=0.5)
            ax.text((s["start_ms"] + s["end_ms"]) / 2, y, str(s["step"]), ha="center", va="center",
                    fontsize=6, color="white")
        ax.set_yticks(list(lanes.values()), list(lanes), fontsize=7)
        ax.set_ylim(-0.6, 1.6)
        ax.set_title(name, fontsize=8, loc="left")
        ax.tick_params(labelsize=7)
    handles = [Patch(color=c, label=p) for p, c in PHASE_COLORS.items()]
    fig.legend(handles=handles, fontsize=7, ncols=5, loc="upper center", frameon=False)
    fig.subplots_adjust(top=0.82, hspace=0.6)
    return fig
