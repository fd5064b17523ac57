"""The notebook-01 explorer: its sliders redraw text and picture to what studies.workload computes."""
from __future__ import annotations

import time

import numpy as np
import pytest
from matplotlib.figure import Figure

from pagedkv_lib.studies.fragmentation import simulate_fragmentation
from pagedkv_lib.studies.waste import waste_breakdown
from pagedkv_lib.studies.workload import make_workload, utilization_paged
from pagedkv_lib.viz import memory_plots as mp


@pytest.fixture(scope="module")
def explorer():
    return mp.UtilizationExplorer()


def test_default_text_states_the_course_numbers(explorer):
    explorer.update(16, 200)
    assert "paged utilization: 99.6%" in explorer.text.value
    assert "reserved utilization: 46.2%" in explorer.text.value


@pytest.mark.parametrize("block_size, paged", [(1, "100.0"), (16, "99.6"), (64, "98.3"), (256, "93.2")])
def test_block_size_slider_redraws_text_and_bars(explorer, block_size, paged):
    explorer.update(16, 200)
    before = explorer.image.value
    start = time.perf_counter()
    explorer.block_size.value = block_size                 # what dragging the slider does
    print(f"block size {block_size}: redraw {1e3 * (time.perf_counter() - start):.0f} ms")
    assert f"paged utilization: {paged}%" in explorer.text.value
    assert (explorer.image.value != before) == (block_size != 16)
    tail = waste_breakdown(make_workload(200, 0), block_size, 4096)["paged"].internal
    np.testing.assert_array_equal(explorer.layers["tail"], tail)
    tops = explorer.ax_requests.patches[1].get_data().values   # the stacked "tail" layer: used + tail
    np.testing.assert_array_equal(tops, explorer.layers["used"] + tail)


def test_requests_slider_changes_bar_count_and_text(explorer):
    explorer.update(16, 200)
    start = time.perf_counter()
    explorer.requests.value = 1000
    elapsed = time.perf_counter() - start
    print(f"requests 1000: redraw {1e3 * elapsed:.0f} ms")
    assert elapsed < 5.0
    requests = make_workload(num_requests=1000, seed=0)
    assert len(explorer.ax_requests.patches[0].get_data().values) == 1000
    assert f"paged utilization: {100 * utilization_paged(requests, 16):.1f}%" in explorer.text.value
    assert "1000 requests" in explorer.text.value
    layers = explorer.layers
    np.testing.assert_array_equal(layers["used"] + layers["tail"] + layers["rest"], np.full(1000, 4096))


def test_update_sets_sliders_and_redraws_once(explorer):
    explorer.update(64, 500)
    assert (explorer.block_size.value, explorer.requests.value) == (64, 500)
    assert "500 requests" in explorer.summary_text()


def test_widgets_carry_css_classes(explorer):
    classes = {c for w in (explorer.block_size, explorer.requests, explorer.text, explorer.image)
               for c in w._dom_classes}
    assert {"pagedkv-block-size", "pagedkv-requests", "pagedkv-utilization", "pagedkv-waste-plot"} <= classes
    assert explorer.block_size.description == "block size" and explorer.requests.description == "requests"
    assert (explorer.block_size.min, explorer.block_size.max) == (1, 256)


def test_utilization_curve_values():
    ax = Figure().add_subplot()
    utils = mp.draw_utilization_curve(ax, make_workload(), block_sizes=(1, 16, 64, 256))
    assert [f"{u:.1f}" for u in utils] == ["100.0", "99.6", "98.3", "93.2"]


def test_memory_map_colours_free_white_and_owners_by_request():
    result = simulate_fragmentation("first_fit", num_requests=20, capacity=8192, record_every=50)
    rgb = mp.map_image(result.memory_map)
    assert rgb.shape == (result.memory_map.shape[1], result.memory_map.shape[0], 3)
    free = result.memory_map.T < 0
    assert np.all(rgb[free] == 1.0) and not np.any(np.all(rgb[~free] == 1.0, axis=-1))
    fig = Figure()
    mp.draw_memory_map(fig.add_subplot(2, 1, 1), result)
    mp.draw_queue(fig.add_subplot(2, 1, 2), {"first fit": result})
