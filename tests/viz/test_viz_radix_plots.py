"""Notebook 15's pictures: the frames replay the story on a real RadixCache and mark what each op did; the
drawings show one box per node and one line per manager."""
from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from pagedkv_lib.viz import radix_plots as rp


def test_the_story_frames_mark_new_nodes_splits_hits_and_evictions():
    frames = rp.radix_frames(rp.STORY, num_blocks=16, block_size=1)
    assert len(frames) == len(rp.STORY) + 1 and frames[0].nodes == ()
    keys = [[v.key for v in f.nodes] for f in frames]
    assert keys[1] == [(7, 8, 9, 1, 2)] and sorted(frames[1].marks.values()) == ["new"]
    assert keys[2] == [(7, 8, 9), (1, 2), (3, 4, 5)] and sorted(frames[2].marks.values()) == ["new", "split"]
    assert frames[3].returned == [0, 1, 2, 3] and "hit" in frames[3].marks.values()
    assert [v.lock_ref for v in frames[4].nodes] == [1, 1, 0, 0]
    evicted = [v.key for v in frames[5].nodes if frames[5].marks.get(v.node_id) == "evicted"]
    assert sorted(evicted) == [(2,), (3, 4, 5)] and frames[5].returned == 4           # shown before the op
    assert frames[-1].num_free == 16


def test_a_drawn_tree_has_a_box_per_node_and_a_story_a_panel_per_pick():
    frames = rp.radix_frames(rp.STORY)
    ax = Figure().add_subplot()
    rp.draw_radix_tree(ax, frames[3])
    boxes = [p for p in ax.patches if isinstance(p, FancyBboxPatch)]
    assert len(boxes) == len(frames[3].nodes) == 4
    fig = Figure(figsize=(8, 2))
    rp.draw_radix_story(fig, frames, [1, 2, 5])
    assert len(fig.axes) == 3 and fig.axes[2].get_title().startswith("5. evict(3)")


def test_the_sweep_draws_a_line_per_manager():
    ax = Figure().add_subplot()
    rp.plot_hit_rate_sweep(ax, [100, 200], {"hash/16": [0.1, 0.2], "radix/1": [0.3, 0.4]}, title="t")
    assert [list(line.get_ydata()) for line in ax.lines] == [[10.0, 20.0], [30.0, 40.0]]
