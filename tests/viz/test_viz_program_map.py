"""The program map of notebook 09: elements coloured by the program that wrote them, white where none did."""
import numpy as np
from matplotlib.figure import Figure

from pagedkv_lib.viz.program_map import plot_program_map


def test_every_tile_is_labelled_with_its_program_and_masked_lanes_stay_white():
    owner = np.full((8, 6), np.nan)                                   # a 2 x 2 grid of 4 x 3 tiles
    owner[:5, :4] = np.array([[0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 0, 1], [2, 2, 2, 3]])
    fig = plot_program_map(owner, tile=(4, 3))
    labels = sorted(t.get_text() for t in fig.axes[0].texts)
    assert labels == ["program 0", "program 1", "program 2", "program 3"]
    image = fig.axes[0].images[0].get_array()
    assert image[7, 5] == 0 and image[0, 0] == 1                      # masked: index 0 (white)


def test_a_small_map_labels_each_element():
    fig = plot_program_map([0, 0, 1, 1, np.nan], ax=Figure().add_subplot())
    assert [t.get_text() for t in fig.axes[0].texts] == ["0", "0", "1", "1", "-"]
