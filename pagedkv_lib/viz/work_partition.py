"""How the paged decode kernel cuts a batch into programs (notebook 11): tokens per program for v1, v2, v3.

Shapes: docs/conventions.md. Every version runs each piece of work once per KV head (H_kv programs per
piece), so the balance between pieces is what the pictures show. The kernel is done when its busiest program
is: with the same total, a partition whose largest piece is close to the mean finishes sooner.
Figures are built with `matplotlib.figure.Figure` (not pyplot), so nothing is shown unless asked.
"""
from __future__ import annotations

from matplotlib.figure import Figure

from pagedkv_lib.kernels.decode_config import DecodeConfig, plan_chunks_reference


def pieces(context_lens: list[int], config: DecodeConfig) -> list[int]:
    """Tokens of each piece of work, in launch order (v2 keeps its empty splits: they are programs too)."""
    if config.version == 1:
        return list(context_lens)
    if config.version == 2:
        size = config.tokens_per_split
        return [max(0, min(size, n - p * size)) for n in context_lens for p in range(config.num_splits)]
    _, items = plan_chunks_reference(context_lens, config)
    return [end - start for _, start, end, _ in items]


def balance(context_lens: list[int], config: DecodeConfig) -> dict:
    """Pieces, the largest and the mean (tokens), and largest / mean: 1.0 is a perfect split."""
    work = pieces(context_lens, config)
    mean = sum(work) / len(work)
    return dict(pieces=len(work), largest=max(work), mean=mean, ratio=max(work) / mean)


def plot_pieces(context_lens: list[int], configs: dict, ax=None, title: str = "") -> Figure:
    """Tokens per piece, largest first, one line per labelled config, with each one's mean dashed."""
    if ax is None:
        ax = Figure(figsize=(7.5, 3.4), dpi=80).add_subplot()
    for label, config in configs.items():
        work = sorted(pieces(context_lens, config), reverse=True)
        b = balance(context_lens, config)
        text = f"{label}: {b['pieces']} pieces, largest {b['largest']} = {b['ratio']:.1f} x mean"
        line, = ax.step(range(len(work)), work, where="post", label=text)
        ax.axhline(b["mean"], color=line.get_color(), lw=0.8, ls="--")
    ax.set_xlim(0, None)
    ax.set_xlabel("pieces of work, largest first (each runs on H_kv programs)")
    ax.set_ylabel("tokens")
    ax.set_title(title or "dashed: the mean; the kernel waits for its largest piece", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(True, lw=0.3)
    return ax.figure
