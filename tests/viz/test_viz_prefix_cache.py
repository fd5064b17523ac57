"""Notebook 07's pictures: frames follow the BlockManager, arrows land on the right blocks, it steps."""
from __future__ import annotations

import time

import pytest
from matplotlib.figure import Figure
from matplotlib.patches import ConnectionPatch, Rectangle

from pagedkv_lib import BlockManager, Sequence
from pagedkv_lib.viz import block_map
from pagedkv_lib.viz.prefix_cache import (
    RELEASED,
    SHARED,
    STATES,
    STORY,
    SYSTEM_PROMPT,
    TablesStepper,
    block_state,
    draw_tables_figure,
    manager_frames,
    plot_block_lifecycle,
)


def boxes(ax) -> list:
    """The logical blocks drawn in the tables axes (the arrows are patches too)."""
    return [p for p in ax.patches if isinstance(p, Rectangle)]


@pytest.fixture(scope="module")
def frames():
    return manager_frames(8, 4, STORY)


def test_story_frames_follow_the_block_manager(frames):
    assert len(frames) == len(STORY) + 1
    assert frames[2].tables == {"A": [0, 1, 2], "B": [0, 1, 3]}
    assert frames[2].ref_counts == [2, 2, 1, 1, 0, 0, 0, 0] and frames[2].table_hits == {"A": 0, "B": 2}
    assert frames[2].owners[:4] == [SHARED, SHARED, 0, 1] and frames[2].labels[0].startswith("ref 2\n#")
    assert frames[4].free_queue == [4, 5, 6, 7, 2, 3, 1, 0]               # freed in reverse, prefix last
    assert frames[4].owners[0] == RELEASED and frames[4].labels[0].startswith("q7\n#")
    assert frames[5].tables["C"] == [0, 1, 4] and frames[5].table_hits["C"] == 2
    assert frames[7].tables["D"] == [5, 6, 7, 2, 3, 4, 1, 0]
    assert [f.states[0] for f in frames] == ["free", "allocated", "shared", "allocated", "released",
                                             "allocated", "released", "allocated", "free"]
    assert frames[2].table_labels["A"] == ["100..103", "104..107", "201..203"]


def test_frames_agree_with_a_manager_driven_by_hand(frames):
    bm = BlockManager(8, 4)
    a, b = Sequence(SYSTEM_PROMPT + [201, 202, 203], 4), Sequence(SYSTEM_PROMPT + [301, 302], 4)
    bm.allocate(a)
    bm.allocate(b)
    assert frames[2].ref_counts == [blk.ref_count for blk in bm.blocks]
    assert frames[2].states == [block_state(bm, i) for i in range(8)]
    bm.deallocate(a)
    bm.deallocate(b)
    assert frames[4].free_queue == list(bm.free_block_ids)
    assert [block_state(bm, i) for i in (0, 1, 2)] == ["released", "released", "free"]  # 2 was partial


def test_arrows_point_from_each_logical_block_to_its_physical_block(frames):
    fig = draw_tables_figure(Figure(figsize=(8, 2.8), dpi=80), frames[2])
    pool_ax, tables_ax = fig.axes
    arrows = [a for a in tables_ax.patches if isinstance(a, ConnectionPatch)]
    assert len(arrows) == sum(len(t) for t in frames[2].tables.values())
    targets = [b for t in frames[2].tables.values() for b in t]
    for arrow, b in zip(arrows, targets):
        patch = pool_ax.patches[b]
        assert arrow.xy2 == (patch.get_x() + patch.get_width() / 2, patch.get_y() + patch.get_height())
    bold = [p for p in boxes(tables_ax) if p.get_linewidth() > 1]
    assert len(bold) == 2                                               # B's two hits


def test_lifecycle_plot_marks_each_state(frames):
    ax = Figure().add_subplot()
    colors = plot_block_lifecycle(ax, frames, 0)
    ys = ax.collections[0].get_offsets()[:, 1].tolist()
    assert ys == [STATES.index(f.states[0]) for f in frames]
    assert colors == block_map.owner_colors([f.owners[0] for f in frames])


def test_stepper_draws_the_tables_of_each_frame(frames):
    stepper = TablesStepper(frames)
    assert len(boxes(stepper.tables_ax)) == 0                          # nothing allocated yet
    for i in range(1, len(frames)):
        before = stepper.image.value
        start = time.perf_counter()
        stepper.step_button.click()
        print(f"TablesStepper step {i}: {1e3 * (time.perf_counter() - start):.0f} ms")
        assert stepper.index == i and f"step {i}/" in stepper.text.value
        assert len(boxes(stepper.tables_ax)) == sum(len(t) for t in frames[i].tables.values())
        assert len(stepper.arrows) == len(boxes(stepper.tables_ax))
        assert stepper.colors == block_map.owner_colors(frames[i].owners)
        assert stepper.image.value != before
        assert time.perf_counter() - start < 2.0
    stepper.back_button.click()
    assert stepper.index == len(frames) - 2


def test_a_request_that_does_not_fit_waits():
    frames = manager_frames(2, 4, [("allocate", "A", list(range(12)))])
    assert "can_allocate is False" in frames[1].description and frames[1].tables == {}


def test_append_hashes_a_block_once_it_is_full_then_opens_the_next():
    frames = manager_frames(4, 4, [("allocate", "A", [1, 2, 3]), ("append", "A", 4), ("append", "A", 5)])
    assert frames[1].labels[0] == "A[0]"                                # partial: no hash yet
    assert frames[2].labels[0].startswith("A[0]\n#") and frames[2].tables["A"] == [0]
    assert frames[3].tables["A"] == [0, 1] and frames[3].table_labels["A"] == ["1..4", "5"]
