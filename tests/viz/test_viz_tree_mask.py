"""The draft-tree picture of notebook 20: parents over children, the mask drawn row by row."""
import pytest

from pagedkv_lib.viz.tree_mask import plot_tree_mask, tree_layout


def test_layout_puts_each_parent_over_its_children():
    where = tree_layout([-1, 0, 0, 1, 2])
    assert [d for _, d in where] == [0, 1, 1, 2, 2]
    assert where[1][0] == where[3][0] and where[2][0] == where[4][0] and where[3][0] < where[4][0]
    assert where[0][0] == (where[1][0] + where[2][0]) / 2


def test_the_mask_image_is_the_tree_mask_and_labels_are_checked():
    fig = plot_tree_mask([-1, 0, 0], ["a", "b", "c"], accepted=[0, 1])
    image = fig.axes[1].images[0].get_array()
    assert image.tolist() == [[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 0, 1]]
    with pytest.raises(ValueError, match="labels"):
        plot_tree_mask([-1, 0], ["a"])
