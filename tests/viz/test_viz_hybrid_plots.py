"""Notebook 19's pictures: the tables drawn are the coordinator's, the bytes plotted are the study's."""
from __future__ import annotations

from matplotlib.figure import Figure

from pagedkv_lib.studies.hybrid_memory import capacity_table
from pagedkv_lib.viz import hybrid_plots as hp
from pagedkv_lib.viz.block_map import FREE_COLOR


def test_window_frames_free_the_sliding_group_only():
    frames = hp.window_frames(4, 6, [4, 12, 20])
    for n, (full, sliding), null in frames:
        assert null not in full and len(full) == len(sliding) == -(-n // 4)
        assert sliding.count(null) == max(0, n - 6 + 1) // 4


def test_draw_group_tables_greys_exactly_the_null_entries():
    frames = hp.window_frames(2, 3, [6, 9])
    colors = hp.draw_group_tables(Figure().add_subplot(), frames, 2, 3)
    nulls = sum(t.count(null) for _, tables, null in frames for t in tables)
    assert colors.count(FREE_COLOR) == nulls > 0
    assert len(colors) == sum(len(t) for _, tables, _ in frames for t in tables)


def test_plot_kv_bytes_one_line_per_model():
    rows = capacity_table(context_lens=(1024, 8192))
    lines = hp.plot_kv_bytes(Figure().add_subplot(), rows)
    assert [line.get_label() for line in lines] == list(dict.fromkeys(r["model"] for r in rows))
    assert list(lines[0].get_ydata()) == [r["kv_mib"] for r in rows[:2]]
