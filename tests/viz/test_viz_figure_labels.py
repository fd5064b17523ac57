"""The labelled pictures of notebooks 09, 11 and 17, drawn as the notebooks draw them and measured with the
renderer's boxes (`get_window_extent`): no label overlaps another, the legend, a plotted line or a marker
(`labels.overlaps`); a program's label lies on the lanes it wrote, never on masked ones; a roofline's shape
label is one line."""
from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure

from pagedkv_lib.studies import results
from pagedkv_lib.studies.swap_or_recompute import PREFILL_SHAPES, load_cost_model
from pagedkv_lib.viz import labels, roofline
from pagedkv_lib.viz.program_map import plot_program_map
from pagedkv_lib.viz.transfer_plots import draw_break_even

DECODE_COLUMNS = ["triton_v1", "triton_v2", "triton_v3", "sdpa_default", "sdpa_flash", "sdpa_cudnn",
                  "flash_varlen"]                                     # notebook 11's final table


def notebook_axes():
    return Figure(figsize=(7.5, 4.2), dpi=80).add_subplot()           # the notebooks' size


def program_lanes(m: int, n: int, block: int) -> np.ndarray:
    """What notebook 09's who_wrote_2d leaves: each element's program id (row-major over the grid), NaN on
    the lanes of the tiles that reach past the m x n output."""
    grid_n = -(-n // block)
    rows, cols = np.arange(m)[:, None] // block, np.arange(n)[None, :] // block
    lanes = np.full((-(-m // block) * block, grid_n * block), np.nan)   # [48, 32] for 37 x 21
    lanes[:m, :n] = rows * grid_n + cols
    return lanes


def draw_program_map(ax):
    plot_program_map(program_lanes(37, 21, 16), ax=ax, tile=(16, 16),
                     title="a 3 x 2 grid of 16 x 16 tiles over a 37 x 21 output; white lanes are masked")


def draw_decode_earlier(ax):
    earlier = results.load("decode_h200.json")
    roofline.plot_roofline(roofline.decode_points(earlier), earlier["copy_gbs"], ax=ax)


def draw_decode_final(ax):
    final = results.load("bench_decode.json")
    roofline.plot_roofline(roofline.decode_points(final, DECODE_COLUMNS), final["copy_gbs"], ax=ax)


def draw_break_even_17(ax):
    draw_break_even(ax, load_cost_model(link="nominal"), list(PREFILL_SHAPES.values()),
                    [2**i for i in range(7, 18)])
    ax.set_title("move or recompute on an H200: break-even link bandwidth")


PICTURES = {"09 program map": draw_program_map, "11 decode roofline, first run": draw_decode_earlier,
            "11 decode roofline, final": draw_decode_final, "17 break-even links": draw_break_even_17}


@pytest.mark.parametrize("draw", PICTURES.values(), ids=PICTURES.keys())
def test_no_label_covers_another_label_the_legend_a_line_or_a_marker(draw):
    ax = notebook_axes()
    draw(ax)
    assert len(ax.texts) >= 4
    assert labels.overlaps(ax) == []


def test_the_checker_sees_a_label_on_a_line_and_on_a_marker():
    ax = notebook_axes()
    ax.plot([0, 1], [0, 1])
    ax.plot([0.8], [0.2], "o")
    ax.text(0.5, 0.5, "on the line", ha="center", va="center")
    ax.text(0.8, 0.2, "on the dot", ha="center", va="center")
    assert labels.overlaps(ax) == ["'on the line' over a plotted line", "'on the dot' over a marker"]


def test_a_label_placed_by_place_text_avoids_the_curve_at_its_first_choice():
    ax = notebook_axes()
    ax.plot([0, 1], [0.1, 0.9])
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    label = labels.place_text(ax, "a name", [(1, 0.92, "right", "top"), (0, 0.92, "left", "top")])
    assert label.get_position() == (0, 0.92) and labels.overlaps(ax) == []


def test_each_program_label_lies_on_lanes_that_program_wrote():
    ax = notebook_axes()
    draw_program_map(ax)
    lanes = program_lanes(37, 21, 16)
    r = labels.renderer(ax.figure)
    to_data = ax.transData.inverted()
    for text in ax.texts:
        box = text.get_window_extent(r)
        (x0, y0), (x1, y1) = to_data.transform([(box.x0, box.y0), (box.x1, box.y1)])
        cols = range(int(np.floor(min(x0, x1) + 0.5)), int(np.floor(max(x0, x1) + 0.5)) + 1)
        rows = range(int(np.floor(min(y0, y1) + 0.5)), int(np.floor(max(y0, y1) + 0.5)) + 1)
        under = lanes[np.ix_(list(rows), list(cols))]                 # the elements the label covers
        pid = int(text.get_text().split()[-1])
        assert (under == pid).all(), f"{text.get_text()!r} covers lanes it did not write"


@pytest.mark.parametrize("draw", [draw_decode_earlier, draw_decode_final], ids=["first run", "final"])
def test_shapes_that_share_a_point_of_the_roofline_share_one_line_of_label(draw):
    ax = notebook_axes()
    draw(ax)
    stacked = [t.get_text() for t in ax.texts if "\n" in t.get_text()]
    assert not stacked, f"stacked labels: {stacked}"
    assert any(" = " in t.get_text() for t in ax.texts), "the shapes of equal bytes must share a label"
