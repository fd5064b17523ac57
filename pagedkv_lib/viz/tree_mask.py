"""The picture of a draft tree and its attention mask (notebook 20): the tree on the left (node 0, the last
verified token, at the root; each draft under its parent), the mask on the right (row i: the keys node i
reads; the context before the tree as one column, read by every node).

Trees are pagedkv_lib.core.tree_attention's: parents[0] == -1, 0 <= parents[i] < i.
Figures are built with `matplotlib.figure.Figure`: nothing shows unless asked.
"""
from __future__ import annotations

from matplotlib.figure import Figure

from pagedkv_lib.core.tree_attention import tree_attention_mask, tree_depths


def tree_layout(parents: list[int]) -> list[tuple[float, int]]:
    """(x, depth) of each node: leaves spread left to right in node order, a parent over its children."""
    depths = tree_depths(parents)
    children = {i: [c for c in range(len(parents)) if parents[c] == i] for i in range(len(parents))}
    where: dict[int, tuple[float, int]] = {}
    next_x = [0.0]

    def place(i: int) -> None:
        for c in children[i]:
            place(c)
        if children[i]:
            where[i] = (sum(where[c][0] for c in children[i]) / len(children[i]), depths[i])
        else:
            where[i] = (next_x[0], depths[i])
            next_x[0] += 1

    place(0)
    return [where[i] for i in range(len(parents))]


def plot_tree_mask(parents: list[int], labels: list[str], accepted: list[int] | None = None,
                   fig: Figure | None = None) -> Figure:
    """The tree (nodes labelled `labels[i]`, the nodes of `accepted` filled) beside its mask, drawn into
    `fig` (a notebook passes plt.figure(...) so that plt.show() displays it) or a new Figure."""
    if len(labels) != len(parents):
        raise ValueError(f"labels: expected one per node ({len(parents)}), got {len(labels)}")
    accepted = set(accepted or [])
    if fig is None:
        fig = Figure(figsize=(8.5, 3.2), dpi=80)
    tree_ax, mask_ax = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.2]})
    where = tree_layout(parents)
    for i, p in enumerate(parents):
        if p >= 0:
            tree_ax.plot([where[p][0], where[i][0]], [-where[p][1], -where[i][1]], color="#555555", lw=1)
    for i, (x, d) in enumerate(where):
        tree_ax.scatter([x], [-d], s=420, color="#5B8E7D" if i in accepted else "#FFFFFF",
                        edgecolor="#333333", zorder=3)
        tree_ax.text(x, -d, labels[i], ha="center", va="center", fontsize=7, zorder=4)
    tree_ax.set_title("draft tree (filled: accepted)", fontsize=9)
    tree_ax.axis("off")
    tree_ax.margins(0.2)
    mask = tree_attention_mask(parents, 1)[1:].int().numpy()                     # [N, 1 + N]
    mask_ax.imshow(mask, cmap="Greens", vmin=0, vmax=1.4)
    mask_ax.set_xticks(range(len(parents) + 1), ["ctx", *labels], fontsize=7, rotation=90)
    mask_ax.set_yticks(range(len(parents)), labels, fontsize=7)
    mask_ax.set_xlabel("key", fontsize=8)
    mask_ax.set_ylabel("query (node)", fontsize=8)
    mask_ax.set_title("tree mask: a node reads the context and its branch", fontsize=9)
    fig.tight_layout()
    return fig
