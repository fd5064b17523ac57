"""Which Triton program wrote which element (notebook 09): a grid of programs over a 1-D or 2-D output.

The notebook runs a kernel that stores its own program id into the elements it owns; an element still NaN
was written by no program (masked, or missed by a grid too small). The picture colours each element by its
program and leaves unwritten ones white. Figures are built with `matplotlib.figure.Figure`: nothing shows
unless asked.
"""
from __future__ import annotations

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

PALETTE = ["#5B8E7D", "#F4A259", "#3B6EA5", "#BC4B51", "#8CB369", "#9B7EDE", "#F4E285", "#6C9BD2"]


def plot_program_map(owner, title: str = "", ax=None, tile: tuple | None = None) -> Figure:
    """`owner` [M, N] (or [N]): the id of the program that wrote each element, NaN where none did (a masked
    lane of a tile that reaches past the output, or an element no program covered). With `tile` =
    (BLOCK_M, BLOCK_N) the tile edges are drawn and each tile is labelled with its program, in the middle of
    the part it wrote (never on its masked lanes); without it, a small map labels every element."""
    owner = np.atleast_2d(np.asarray(owner, dtype=float))                   # [M, N]
    if ax is None:
        ax = Figure(figsize=(7.5, 0.5 + 0.32 * owner.shape[0]), dpi=80).add_subplot()
    ids = np.nan_to_num(owner, nan=-1).astype(int)
    colors = ListedColormap(["#FFFFFF"] + [PALETTE[i % len(PALETTE)] for i in range(max(ids.max() + 1, 1))])
    ax.imshow(ids + 1, cmap=colors, vmin=0, vmax=colors.N - 1, aspect="auto", interpolation="nearest")
    if tile is not None:
        bm, bn = tile
        for i in range(0, owner.shape[0] + 1, bm):
            ax.axhline(i - 0.5, color="#333333", lw=0.8)
        for j in range(0, owner.shape[1] + 1, bn):
            ax.axvline(j - 0.5, color="#333333", lw=0.8)
        for i0 in range(0, owner.shape[0], bm):
            for j0 in range(0, owner.shape[1], bn):
                written = np.argwhere(ids[i0:i0 + bm, j0:j0 + bn] >= 0)          # [k, 2] this tile's lanes
                if len(written):                       # the label goes in the middle of what was written
                    (r0, c0), (r1, c1) = written.min(axis=0), written.max(axis=0)
                    pid = ids[i0 + r0, j0 + c0]
                    ax.text(j0 + (c0 + c1) / 2, i0 + (r0 + r1) / 2, f"program {pid}", ha="center",
                            va="center", fontsize=8)
    elif owner.size <= 400:
        for (i, j), pid in np.ndenumerate(ids):
            ax.text(j, i, "-" if pid < 0 else str(pid), ha="center", va="center", fontsize=7)
    ax.set_xlabel("column", fontsize=8)
    ax.set_ylabel("row", fontsize=8)
    ax.set_title(title or "each element coloured by the program that wrote it; white: no program", fontsize=9)
    return ax.figure
