"""The merge-tree picture of notebook 11: leaves in tree order at the bottom, each merge above its
children."""
from pagedkv_lib.viz.merge_tree import layout, plot_merge_tree


def test_layout_puts_each_merge_above_and_between_its_children():
    where, edges = layout(((2, 0), (1, (3, 4))))
    assert [where[p] for p in ((0, 0), (0, 1), (1, 0), (1, 1, 0), (1, 1, 1))] == [(0, 0), (1, 0), (2, 0),
                                                                               (3, 0), (4, 0)]
    assert where[(1, 1)] == (3.5, 1) and where[(1,)] == (2.75, 2) and where[()] == (1.625, 3)
    assert len(edges) == 8                                            # 2 per merge, 4 merges


def test_every_leaf_is_labelled():
    labels = ["tokens 0..3", "empty", "tokens 4..9"]
    fig = plot_merge_tree(((0, 1), 2), labels)
    shown = [t.get_text() for t in fig.axes[0].texts]
    assert all(label in shown for label in labels) and "row" in shown
