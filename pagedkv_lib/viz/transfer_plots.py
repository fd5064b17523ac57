"""Notebook 17's pictures: moving a prompt's K/V between instances vs recomputing it.

    draw_break_even(ax, model, shapes, lengths, links)   per model, the link bandwidth at which transferring
                                                         costs what recomputing does, by context length;
                                                         the links as horizontal lines, crossovers marked,
                                                         each link named where no curve runs
    draw_measured(ax, rows)                              the two ranks' measured seconds per token of context
Every number comes from `pagedkv_lib.studies.transfer_cost` or from the rows `transfer_timing_rank` returns;
this module only draws.
"""
from __future__ import annotations

import numpy as np

from pagedkv_lib.studies.transfer_cost import LINKS, break_even_gbs, transfer_crossover_tokens

from .labels import place_text

LINK_STYLES = ("-", "--", "-.", ":")


def draw_break_even(ax, model, shapes, lengths, links=LINKS) -> dict:
    """One curve per model shape: break-even GB/s at each context length (log-log); above a model's curve
    a link moves the K/V faster than the decode GPU recomputes them. Returns {(model, link): crossover}."""
    lengths = np.asarray(lengths)
    crossings = {}
    for shape in shapes:
        gbs = [break_even_gbs(model, shape, int(n)) for n in lengths]
        label = f"{shape.name} ({shape.kv.bytes_per_token // 1024} KiB/token)"
        line, = ax.plot(lengths, gbs, lw=2, label=label)
        for link in links:
            cross = transfer_crossover_tokens(model, shape, link.gbs)
            crossings[(shape.name, link.name)] = cross
            if lengths[0] <= cross <= lengths[-1]:
                ax.plot([cross], [link.gbs], "o", color=line.get_color(), ms=6, zorder=3)
    for style, link in zip(LINK_STYLES * 2, links):
        ax.axhline(link.gbs, color="0.35", lw=1, ls=style)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("break-even link bandwidth (GB/s)")
    ax.set_ylim(top=6 * max(link.gbs for link in links))                        # room for the legend
    ax.legend(fontsize=8, loc="upper right", ncol=2)
    ax.grid(True, which="major", alpha=0.3)
    for link in links:                       # each name just above or below its line, where no curve runs
        above, below = (link.gbs * 1.08, "bottom"), (link.gbs / 1.08, "top")
        crowded = any(link.gbs < other.gbs < 1.5 * link.gbs for other in links)   # a label just above
        sides = (below, above) if crowded else (above, below)
        positions = [(x, y, ha, va) for x, ha in ((lengths[-1], "right"), (lengths[0], "left"))
                     for y, va in sides]
        place_text(ax, f"{link.name}, {link.gbs:.0f} GB/s", positions, fontsize=8, color="0.25")
    return crossings


def draw_measured(ax, rows: list[dict]) -> None:
    """Seconds per token of context, measured: transfer between the ranks vs recomputing the prefill."""
    lengths = [r["context_len"] for r in rows]
    ax.plot(lengths, [1e6 * r["transfer_s"] / r["context_len"] for r in rows], "o-", label="transfer (gloo)")
    ax.plot(lengths, [1e6 * r["recompute_s"] / r["context_len"] for r in rows], "s-",
            label="recompute the prefill")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("microseconds per token of context")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
