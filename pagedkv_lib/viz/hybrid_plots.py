"""Pictures of notebook 19 (hybrid models): the block tables of each KV cache group as a sequence grows, and
the KV bytes of a sequence by context length for each layer pattern.

    window_frames(block_size, window, lengths)   the tables of one request in a full-attention and a
                                                  sliding-window group, read off a KVCacheCoordinator
    draw_group_tables(ax, frames, block_size)    those tables, one row per (length, group): held blocks
                                                  coloured by group, null entries light grey
    plot_kv_bytes(ax, rows)                       MiB per sequence against context length, one line per
                                                  model (rows of hybrid_memory.capacity_table)
Figures are made without pyplot (matplotlib.figure.Figure), like the other pictures of the course.
"""
from __future__ import annotations

from matplotlib.patches import Rectangle

from pagedkv_lib.core.kv_cache_coordinator import KVCacheCoordinator, KVCacheGroupSpec
from pagedkv_lib.viz.block_map import FREE_COLOR, PALETTE

GROUP_NAMES = ("full", "sliding")


def window_frames(block_size: int, window: int, lengths) -> list[tuple[int, list[list[int]], int]]:
    """[(num_tokens, [full table, sliding table], null block)] of one request computed up to each length."""
    specs = [KVCacheGroupSpec("full_attention"), KVCacheGroupSpec("sliding_window", window)]
    coord = KVCacheCoordinator(2 * (max(lengths) // block_size + 1) + 1, block_size, specs)
    frames = []
    for n in lengths:
        coord.allocate_slots("r", n)
        coord.remove_skipped_blocks("r", n)
        frames.append((n, [list(m.block_tables["r"]) for m in coord.managers], coord.null_block))
    return frames


def draw_group_tables(ax, frames, block_size: int, window: int) -> list[tuple]:
    """One row of squares per (frame, group): entry i of the table at x = i. Returns the colours drawn."""
    colors = []
    y = 0
    width = max(len(t) for _, tables, _ in frames for t in tables)
    for n, tables, null in frames:
        for g, table in enumerate(tables):
            for i, block in enumerate(table):
                color = FREE_COLOR if block == null else PALETTE[g]
                ax.add_patch(Rectangle((i, -y), 0.92, 0.8, facecolor=color, edgecolor="#333", lw=0.6))
                ax.text(i + 0.46, -y + 0.4, "-" if block == null else str(block), ha="center", va="center",
                        fontsize=7)
                colors.append(color)
            ax.text(-0.3, -y + 0.4, f"{n} tokens, {GROUP_NAMES[g]}", ha="right", va="center", fontsize=8)
            y += 1
        y += 0.4
    ax.set_xlim(-0.2, width + 0.2)
    ax.set_ylim(-y + 0.6, 1.0)
    ax.set_axis_off()
    ax.set_title(f"block tables, block_size {block_size}, window {window} (grey: null block, freed)",
                 fontsize=9)
    return colors


def plot_kv_bytes(ax, rows) -> list:
    """MiB of KV per sequence against context length (log-log), one line per model of `rows`."""
    lines = []
    for i, model in enumerate(dict.fromkeys(r["model"] for r in rows)):
        mine = [r for r in rows if r["model"] == model]
        (line,) = ax.plot([r["context_len"] for r in mine], [r["kv_mib"] for r in mine], "o-",
                          color=PALETTE[i], label=model)
        lines.append(line)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("KV cache per sequence (MiB)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return lines
