"""The varlen mask picture and the block-size explorer of notebook 05 show what the library computes."""
from __future__ import annotations

import time

import pytest
import torch

from pagedkv_lib import round_robin_tables
from pagedkv_lib.viz.attention_plots import VarlenExplorer, error_order, plot_varlen_mask, varlen_mask

SEQ_LENS, Q_LENS = [37, 5, 20], [1, 5, 8]


def test_varlen_mask_is_a_shifted_triangle_per_sequence_and_nothing_across():
    mask = varlen_mask(SEQ_LENS, Q_LENS)                              # [14, 62]
    row = col = 0
    for n, t in zip(SEQ_LENS, Q_LENS):
        expected = torch.ones(t, n, dtype=torch.bool).tril(diagonal=n - t)
        assert torch.equal(mask[row : row + t, col : col + n], expected)
        assert not mask[row : row + t, :col].any() and not mask[row : row + t, col + n :].any()
        row, col = row + t, col + n


@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_plot_marks_readable_cells_and_labels_each_physical_block(block_size):
    fig = plot_varlen_mask(SEQ_LENS, Q_LENS, block_size)
    ax = fig.axes[0]
    codes = ax.images[0].get_array()
    assert torch.equal(torch.from_numpy(codes.data >= 2), varlen_mask(SEQ_LENS, Q_LENS))
    tables = round_robin_tables(SEQ_LENS, block_size)
    ids = sorted(int(t.get_text()) for t in ax.texts if t.get_text().isdigit())
    assert [t.get_text() for t in ax.texts[:3]] == ["A pos 36", "B pos 0", "B pos 1"]
    assert ids == (sorted(b for t in tables for b in t) if block_size >= 3 else [])
    boundaries = sum(len(seg) for seg in (c.get_segments() for c in ax.collections[:2]))
    assert boundaries == sum(len(t) for t in tables)


def test_error_order_rounds_up_to_a_power_of_ten():
    assert error_order(3.7e-7) == "< 1e-06"
    assert error_order(1.2e-5) == "< 1e-04"
    assert error_order(0.0) == "0"


def test_explorer_update_redraws_the_batch_at_the_new_block_size():
    explorer = VarlenExplorer()
    first_png, first_text = explorer.image.value, explorer.text.value
    assert "tables [[0, 3, 6, 8, 10, 12, 13, 14, 15, 16], [1, 4], [2, 5, 7, 9, 11]]" in first_text
    start = time.perf_counter()
    text = explorer.update(16)
    seconds = time.perf_counter() - start
    print(f"VarlenExplorer.update: {1000 * seconds:.0f} ms")
    assert explorer.block_size.value == 16
    assert f"tables {round_robin_tables(SEQ_LENS, 16)}" in text
    assert "max |paged - SDPA| < 1e-5: True" in text
    assert explorer.text.value != first_text and explorer.image.value != first_png
    assert "block_size 16" in explorer.ax.get_title()
    assert seconds < 2.0


def test_a_block_size_seen_before_comes_from_the_cache():
    explorer = VarlenExplorer()
    png4 = explorer.image.value
    explorer.update(8)
    start = time.perf_counter()
    explorer.update(4)
    print(f"cached VarlenExplorer.update: {1000 * (time.perf_counter() - start):.1f} ms")
    assert explorer.image.value == png4 and set(explorer.cache) == {4, 8}


def test_moving_the_slider_updates_the_text():
    explorer = VarlenExplorer()
    explorer.block_size.value = 8
    assert f"tables {round_robin_tables(SEQ_LENS, 8)}" in explorer.text.value
    assert explorer.summary == explorer.summary_text(8)
