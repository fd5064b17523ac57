"""Pictures of paged prefill attention (notebook 12): the causal offset of a chunk, and the tiles a prefill
kernel visits.

Shapes: docs/conventions.md. A sequence's q_len new tokens are the LAST of its seq_len-token context, so
query i sits at position ctx + i (ctx = seq_len - q_len cached tokens) and reads keys 0 .. ctx + i: the
mask is aligned to the bottom right of the [q_len, seq_len] score matrix, not the top left.
`tile_kinds` classifies (query tile, key tile) pairs as the library kernel does
(pagedkv_lib/kernels/triton_prefill_attention.py): below the diagonal a tile needs no mask, on it a mask,
above it nothing is loaded. Figures are built with `matplotlib.figure.Figure`: nothing shows unless asked.
"""
from __future__ import annotations

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

SKIPPED, DIAGONAL, FULL = 0, 1, 2
TILE_COLORS = ListedColormap(["#FFFFFF", "#F4A259", "#5B8E7D"])     # skipped, masked, unmasked


def causal_mask(seq_len: int, q_len: int, bottom_right: bool = True) -> np.ndarray:
    """[q_len, seq_len] bool: query i may read key j (bottom right: j <= ctx + i; top left: j <= i)."""
    ctx = seq_len - q_len if bottom_right else 0
    return np.arange(seq_len)[None, :] <= ctx + np.arange(q_len)[:, None]


def tile_kinds(seq_len: int, q_len: int, block_q: int, block_n: int) -> np.ndarray:
    """[query tiles, key tiles] of SKIPPED / DIAGONAL / FULL for one sequence, as the kernel's two loops
    see them: keys below the tile's first query position (rounded down to BLOCK_N) need no mask."""
    ctx = seq_len - q_len
    rows, cols = -(-q_len // block_q), -(-seq_len // block_n)
    kinds = np.full((rows, cols), SKIPPED)                          # [query tiles, key tiles]
    for qi in range(rows):
        q0 = qi * block_q
        kv_end = ctx + min(q0 + block_q, q_len)                      # last query's position + 1
        unmasked_end = (ctx + q0 + 1) // block_n * block_n
        for kj in range(cols):
            n0 = kj * block_n
            kinds[qi, kj] = FULL if n0 < unmasked_end else DIAGONAL if n0 < kv_end else SKIPPED
    return kinds


def plot_causal_offset(seq_len: int, q_len: int, axes=None) -> Figure:
    """The bottom-right mask of a chunk (right) beside the top-left one a wrong kernel would use (wrong)."""
    if axes is None:
        axes = Figure(figsize=(8, 2.6), dpi=80).subplots(1, 2)
    ctx = seq_len - q_len
    for ax, bottom_right in zip(axes, (True, False)):
        ax.imshow(causal_mask(seq_len, q_len, bottom_right), cmap=ListedColormap(["#FFFFFF", "#3B6EA5"]),
                  aspect="auto", interpolation="nearest", extent=(-0.5, seq_len - 0.5, q_len - 0.5, -0.5))
        ax.axvline(ctx - 0.5, color="#C0392B", lw=1.2)
        ax.set_xlabel(f"key position (left of the red line: the {ctx} cached tokens)", fontsize=8)
        ax.set_ylabel("query i (position ctx + i)" if bottom_right else "query i", fontsize=8)
        ax.set_title("bottom right (right): query i sees keys 0..ctx+i" if bottom_right else
                     "top left (wrong for a chunk): query i sees keys 0..i", fontsize=9)
    return axes[0].figure


def plot_tile_grid(seq_len: int, q_len: int, block_q: int, block_n: int, ax=None) -> Figure:
    """Which (query tile, key tile) pairs a program visits, unmasked or masked, and the causal boundary."""
    if ax is None:
        ax = Figure(figsize=(7, 3.2), dpi=80).add_subplot()
    kinds = tile_kinds(seq_len, q_len, block_q, block_n)
    ax.imshow(kinds, cmap=TILE_COLORS, vmin=0, vmax=2, aspect="auto", interpolation="nearest",
              extent=(0, kinds.shape[1], kinds.shape[0], 0))
    ctx = seq_len - q_len
    queries = np.arange(q_len + 1)
    ax.plot((ctx + queries) / block_n, queries / block_q, color="black", lw=1)   # last visible key + 1
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(f"key tile ({block_n} keys each)", fontsize=8)
    ax.set_ylabel(f"query tile ({block_q} queries)", fontsize=8)
    full, diag = int((kinds == FULL).sum()), int((kinds == DIAGONAL).sum())
    ax.set_title(f"seq_len {seq_len}, q_len {q_len}: {full} unmasked tiles (green), {diag} masked "
                 f"(orange), {kinds.size - full - diag} never loaded (white)", fontsize=9)
    return ax.figure
