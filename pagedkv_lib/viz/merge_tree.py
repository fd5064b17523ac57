"""A tree of partial-softmax merges (notebook 11): the parts of a row at the bottom, each merge a node above
its two inputs, the row's result at the top.

Trees are pagedkv_lib.core.partial_softmax's: a leaf is a part's index, a node a pair (left, right).
Figures are built with `matplotlib.figure.Figure`: nothing shows unless asked.
"""
from __future__ import annotations

from matplotlib.figure import Figure


def layout(tree) -> tuple[dict, list]:
    """({node path: (x, height)}, edges [(child path, parent path)]): leaves at height 0 in the order they
    appear in the tree, each merge above its two children at the mean of their x. A path is a tuple of 0/1
    steps from the root; the root is ()."""
    where = {}
    edges = []
    leaves = [0]

    def place(node, path):
        if isinstance(node, int):
            where[path] = (leaves[0], 0)
            leaves[0] += 1
            return
        for side, child in enumerate(node):
            place(child, path + (side,))
            edges.append((path + (side,), path))
        (x0, h0), (x1, h1) = where[path + (0,)], where[path + (1,)]
        where[path] = ((x0 + x1) / 2, 1 + max(h0, h1))

    place(tree, ())
    return where, edges


def leaf_at(tree, path):
    for step in path:
        tree = tree[step]
    return tree


def plot_merge_tree(tree, leaf_labels: list[str], ax=None, title: str = "",
                    root_label: str = "row") -> Figure:
    """The tree with `leaf_labels[i]` under leaf i (e.g. "tokens 0..6", "empty"), merges as dots."""
    if ax is None:
        ax = Figure(figsize=(7.5, 2.8), dpi=80).add_subplot()
    where, edges = layout(tree)
    for child, parent in edges:
        (x0, y0), (x1, y1) = where[child], where[parent]
        ax.plot([x0, x1], [y0, y1], color="#555555", lw=1)
    for path, (x, y) in where.items():
        if y == 0:
            label = leaf_labels[leaf_at(tree, path)]
            empty = "empty" in label
            ax.scatter([x], [y], s=90, marker="s", color="#FFFFFF" if empty else "#5B8E7D",
                       edgecolor="#333333", zorder=3)
            ax.text(x, y - 0.35, label, ha="center", va="top", fontsize=7)
        else:
            ax.scatter([x], [y], s=60, color="#F4A259" if path else "#3B6EA5", edgecolor="#333333", zorder=3)
            if not path:
                ax.text(x, y + 0.25, root_label, ha="center", va="bottom", fontsize=8)
    top = max(y for _, y in where.values())
    ax.set_ylim(-1.2, top + 0.8)
    ax.set_xlim(-0.7, max(x for x, _ in where.values()) + 0.7)
    ax.axis("off")
    ax.set_title(title or "parts (squares, white: empty) merged pairwise (dots) up to the row", fontsize=9)
    return ax.figure
