"""Notebook 18's picture: bytes per token of each cache form (a log axis), with the sequences a pool holds.

Every number comes from `pagedkv_lib.studies.mla_memory`; this module only draws.
"""
from __future__ import annotations

from matplotlib.figure import Figure

from pagedkv_lib.studies.mla_memory import capacity_rows

COLORS = {"Llama-3.1-405B": "tab:blue", "DeepSeek-V3": "tab:orange"}


def bytes_per_token_figure(pool_bytes: int, context_len: int, ax=None) -> Figure:
    """One horizontal bar per cache form (`capacity_rows`), its length the bytes per token over all layers,
    labelled with the sequences of context_len tokens that fit in pool_bytes."""
    if ax is None:
        ax = Figure(figsize=(7.5, 2.6), dpi=80).add_subplot()
    rows = capacity_rows(pool_bytes, context_len)
    names = [f"{form.model}: {form.form}" for form, _ in rows]
    widths = [form.bytes_per_token for form, _ in rows]
    ax.barh(range(len(rows)), widths, color=[COLORS.get(form.model, "0.5") for form, _ in rows])
    for i, (form, fits) in enumerate(rows):
        ax.text(form.bytes_per_token * 1.1, i, f"{form.bytes_per_token:,} B, {fits:,} sequences",
                va="center", fontsize=7)
    ax.set_yticks(range(len(rows)), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(min(widths) / 2, max(widths) * 30)
    ax.set_xlabel(f"KV bytes per token, every layer (log scale); sequences of {context_len:,} tokens in "
                  f"{pool_bytes / 2**30:.0f} GiB", fontsize=8)
    return ax.figure
