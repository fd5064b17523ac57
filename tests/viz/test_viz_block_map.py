"""The block map and its stepper (notebook 02; reused by 07/08): colours follow BlockPool, buttons step."""
from __future__ import annotations

import time

import pytest
from matplotlib.figure import Figure

from pagedkv_lib.viz import block_map as bm


def test_worked_example_frames_follow_the_block_pool():
    frames = bm.pool_frames(8, bm.WORKED_EXAMPLE)
    assert frames[1].tables == {"A": [0, 1, 2]} and len(frames[1].free_queue) == 5
    assert frames[3].free_queue == [5, 6, 7, 0, 1, 2]                 # freed blocks go to the END
    assert frames[4].tables["C"] == [5, 6, 7, 0]
    assert frames[4].owners == [2, None, None, 1, 1, 2, 2, 2]
    assert frames[5].owners == frames[4].owners and "None" in frames[5].description  # failed allocate
    assert frames[6].free_queue == [1, 2, 3, 4]
    assert frames[4].labels[0] == "C[3]" and frames[4].labels[1] == "q0"


def test_draw_block_map_colours_and_in_place_update():
    ax = Figure().add_subplot()
    colors = bm.draw_block_map(ax, [0, None, 1], labels=["A[0]", "", "B[0]"], names={0: "A", 1: "B"},
                               title="t")
    assert colors == bm.owner_colors([0, None, 1]) and colors[1] == bm.FREE_COLOR
    patches = list(ax.patches)
    colors = bm.draw_block_map(ax, [None, 0, 0])
    assert list(ax.patches)[:3] == patches[:3]                         # same artists, recoloured
    assert [tuple(p.get_facecolor()) for p in ax.patches[:3]] == colors


@pytest.fixture
def stepper():
    return bm.BlockMapStepper(bm.pool_frames(8, bm.WORKED_EXAMPLE))


def test_step_button_changes_block_colours(stepper):
    assert stepper.index == 0 and stepper.back_button.disabled
    seen = [stepper.colors]
    for i in range(1, len(stepper.frames)):
        before = stepper.image.value
        start = time.perf_counter()
        stepper.step_button.click()
        print(f"step {i}: {1e3 * (time.perf_counter() - start):.0f} ms")
        assert stepper.index == i
        assert stepper.owners == stepper.frames[i].owners
        assert stepper.colors == bm.owner_colors(stepper.frames[i].owners)
        assert f"step {i}/" in stepper.text.value
        if stepper.frames[i].owners != stepper.frames[i - 1].owners:
            assert stepper.colors != seen[-1] and stepper.image.value != before
        seen.append(stepper.colors)
    assert stepper.step_button.disabled
    assert "allocate(4) -> [5, 6, 7, 0]" in stepper.describe(4)


def test_back_button_returns_to_previous_frame(stepper):
    stepper.show(4)
    stepper.back_button.click()
    assert stepper.index == 3 and stepper.colors == bm.owner_colors(stepper.frames[3].owners)


def test_css_classes(stepper):
    assert "pagedkv-step" in stepper.step_button._dom_classes
    assert "pagedkv-block-map" in stepper.image._dom_classes
