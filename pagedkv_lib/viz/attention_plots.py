"""Pictures of varlen paged attention (notebook 05): the causal mask of a mixed batch; a block-size explorer.

Shapes: docs/conventions.md. A sequence's new tokens are the LAST q_len of its seq_len-token context, so its
query i sits at position seq_len - q_len + i and reads keys 0 .. seq_len - q_len + i of its own sequence only.
Figures are built with `matplotlib.figure.Figure` (not pyplot), so nothing is shown unless asked.
"""
from __future__ import annotations

import html
import math

import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from pagedkv_lib.core.paged_attention import paged_attention_varlen
from pagedkv_lib.testing.paged_batch import make_paged_batch, round_robin_tables
from pagedkv_lib.testing.sdpa_reference import sdpa_batch

from .block_map import FREE_COLOR, bench_cycle, figure_png, owner_colors, picture_widget

OTHER = "#FFFFFF"                              # another sequence's keys: never read
AXES_RECT = (0.11, 0.12, 0.87, 0.70)           # fixed margins: no tight_layout, cheap to redraw


def varlen_mask(seq_lens: list[int], q_lens: list[int]) -> torch.Tensor:
    """[T, K] bool: query row t may read key column k (columns laid out sequence after sequence)."""
    T, K = sum(q_lens), sum(seq_lens)
    mask = torch.zeros(T, K, dtype=torch.bool)                       # [T, K]
    row = col = 0
    for n, t in zip(seq_lens, q_lens):
        q_pos = torch.arange(n - t, n)                               # [t] positions of the new tokens
        mask[row : row + t, col : col + n] = torch.arange(n)[None, :] <= q_pos[:, None]  # [t, n]
        row, col = row + t, col + n
    return mask


def plot_varlen_mask(seq_lens: list[int], q_lens: list[int], block_size: int,
                     block_tables: list[list[int]] | None = None, names: str = "ABCDEF", ax=None) -> Figure:
    """The batch's mask: a row per query token, a column per key, block boundaries and physical ids on top.

    Draws into `ax` when given (e.g. from plt.subplots(figsize=(8, 3.4), dpi=80); a second call on the same
    axes and batch updates the picture in place, fast enough for a slider), else into a new figure that no
    pyplot window shows; returns the figure.
    """
    tables = block_tables if block_tables is not None else round_robin_tables(seq_lens, block_size)
    allowed = varlen_mask(seq_lens, q_lens).numpy()                   # [T, K]
    codes = np.zeros(allowed.shape, dtype=int)                        # 0 other, 1 future, 2 + b: readable
    ylabels, thin, thick, ids = [], [], [], []
    row = col = 0
    for b, (n, t) in enumerate(zip(seq_lens, q_lens)):
        codes[row : row + t, col : col + n] = np.where(allowed[row : row + t, col : col + n], 2 + b, 1)
        ylabels += [f"{names[b]} pos {p}" for p in range(n - t, n)]
        starts = [col + i * block_size - 0.5 for i in range(len(tables[b]))]   # where logical block i starts
        thick.append(starts[0])
        thin += starts[1:]
        ids += [(x0 + min(block_size, n - i * block_size) / 2, str(blk))
                for i, (x0, blk) in enumerate(zip(starts, tables[b]))]
        row, col = row + t, col + n
    if ax is None:
        ax = Figure(figsize=(8, 3.4), dpi=80).add_axes(AXES_RECT)
    if not ax.images:                                                 # first call: create the artists
        cmap = ListedColormap([OTHER, FREE_COLOR, *owner_colors(range(len(seq_lens)))])
        ax.imshow(codes, cmap=cmap, vmin=0, vmax=len(seq_lens) + 1, aspect="auto", interpolation="nearest")
        ax.vlines([], -0.5, row - 0.5, color="black", lw=0.6)
        ax.vlines([], -0.5, row - 0.5, color="black", lw=1.6)
        ax.hlines(np.cumsum(q_lens)[:-1] - 0.5, -0.5, col - 0.5, color="black", lw=1.6)
        ax.set_xticks([])
        ax.set_yticks([])                                             # row labels are texts: ticks are slow
        for y, label in enumerate(ylabels):
            ax.text(-0.01, y, label, transform=ax.get_yaxis_transform(), ha="right", va="center", fontsize=7)
        ax.set_xlabel("keys: each sequence's positions 0 .. seq_len - 1", fontsize=8)
    ax.images[0].set_data(codes)
    for lines, xs in zip(ax.collections[:2], (thin, thick)):
        lines.set_segments([[(x, -0.5), (x, row - 0.5)] for x in xs])
    for text in ax.texts[len(ylabels):]:                              # the block ids of the last call
        text.remove()
    if block_size >= 3:                                               # room for the physical block ids
        for x, label in ids:
            ax.text(x, -0.9, label, ha="center", va="bottom", fontsize=7)
    ax.set_title(f"block_size {block_size}" + (", physical block ids on top" if block_size >= 3 else ""),
                 fontsize=9, pad=16)
    return ax.figure


def error_order(err: float) -> str:
    """An error as a bound rounded up to a power of ten ('< 1e-06'): stable from machine to machine."""
    return "0" if err == 0 else f"< 1e{math.ceil(math.log10(err)):+03d}"


class VarlenExplorer:
    """A block-size slider over one batch, re-paged round-robin: its mask picture, tables and SDPA check.

    `update(block_size)` recomputes and redraws, once per block size (the tests call it); `summary_text()` is
    what it shows.
    CSS classes: pagedkv-varlen-block-size, pagedkv-varlen-text, pagedkv-varlen-mask (the picture).
    """

    BLOCK_SIZES = (1, 2, 4, 8, 16, 32)

    def __init__(self, seq_lens=(37, 5, 20), q_lens=(1, 5, 8), num_heads=8, num_kv_heads=2, head_dim=64,
                 block_size=4, seed=0, figsize=(8, 3.4), dpi=80):
        import ipywidgets as widgets

        self.seq_lens, self.q_lens = list(seq_lens), list(q_lens)
        self.heads, self.seed = (num_heads, num_kv_heads, head_dim), seed
        self.block_size = widgets.SelectionSlider(options=self.BLOCK_SIZES, value=block_size,
                                                  description="block size")
        self.text, self.image = widgets.HTML(), picture_widget()
        for w, css in ((self.block_size, "pagedkv-varlen-block-size"), (self.text, "pagedkv-varlen-text"),
                       (self.image, "pagedkv-varlen-mask")):
            w.add_class(css)
        self.block_size.observe(lambda _: self.update(), names="value")
        self.ax = Figure(figsize=figsize, dpi=dpi).add_axes(AXES_RECT)
        self.cache: dict[int, tuple[str, bytes]] = {}      # block size -> (summary, PNG)
        self.widget = widgets.VBox([self.block_size, self.text, self.image])
        self.update()

    def summary_text(self, block_size: int | None = None) -> str:
        """Tables and the check against SDPA for one block size (default: the slider's)."""
        bs = self.block_size.value if block_size is None else block_size
        tables = round_robin_tables(self.seq_lens, bs)
        batch = make_paged_batch(self.seq_lens, bs, *self.heads, q_lens=self.q_lens, seed=self.seed,
                                 block_tables=tables)
        out = paged_attention_varlen(batch.q, batch.k_cache, batch.v_cache, batch.block_tables,
                                     batch.seq_lens, batch.cu_seqlens_q, self.heads[2] ** -0.5)  # [T, H, D]
        err = (out.double() - sdpa_batch(batch)).abs().max().item()
        lines = [f"block size {bs}: {sum(len(t) for t in tables)} blocks, tables {tables}",
                 f"max |paged - SDPA| < 1e-5: {err < 1e-5} ({error_order(err)})"]
        return "\n".join(lines)

    def update(self, block_size: int | None = None) -> str:
        if block_size is not None and block_size != self.block_size.value:
            self.block_size.value = block_size          # the observer calls update() again
            return self.summary
        bs = self.block_size.value
        if bs not in self.cache:                            # each block size is computed and drawn once
            plot_varlen_mask(self.seq_lens, self.q_lens, bs, ax=self.ax)
            self.cache[bs] = (self.summary_text(), figure_png(self.ax.figure))
        self.summary, png = self.cache[bs]
        self.text.value = f"<pre>{html.escape(self.summary)}</pre>"
        self.image.value = png
        return self.summary


def _first_visit(explorer, block_size) -> None:
    explorer.cache.clear()                                  # time the first visit, not the cached one
    explorer.update(block_size)


BENCH_CALLBACKS = {"attention_plots.VarlenExplorer.update": bench_cycle(VarlenExplorer, _first_visit,
                                                                      VarlenExplorer.BLOCK_SIZES)}
