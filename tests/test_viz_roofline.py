"""The GPU figures of notebooks 09 and 10: stored H200 results as tables and a roofline picture."""
from __future__ import annotations

import math

import pytest

from pagedkv_lib.viz import roofline


@pytest.fixture(scope="module")
def decode():
    return roofline.load_results("decode_h200.json")


@pytest.fixture(scope="module")
def store():
    return roofline.load_results("store_kvcache_h200.json")


def test_decode_table_gives_each_method_as_a_fraction_of_the_same_runs_copy(decode):
    text = roofline.decode_table(decode)
    assert "copy 4273 GB/s" in text
    row = next(line for line in text.splitlines() if line.split()[:3] == ["64", "x", "4096"])
    assert "252.1 us 99.8%" in row and "434.0 us 58.0%" in row and "328.0 us 76.7%" in row
    assert "251.5" in row                                   # the floor: 1075 MB at 4273 GB/s
    assert "11.1 us 35.5%" in text and "495.4 us 101.5%" in text
    assert len(text.splitlines()) == 2 + len(decode["shapes"])


def test_store_table_lists_every_token_count(store):
    text = roofline.store_table(store)
    assert [line.split()[0] for line in text.splitlines()[2:]] == ["1", "64", "256", "4096", "32768"]
    assert "69.6 us 90.3%" in text


def test_points_are_bytes_over_time_consistent_with_the_stored_fractions(decode, store):
    for result, points in ((decode, roofline.decode_points(decode)), (store, roofline.store_points(store))):
        assert points
        for p in points:
            gbs = p["bytes"] / (p["us"] * 1e-6) / 1e9
            assert math.isclose(gbs / result["copy_gbs"], p["frac_copy"], rel_tol=1e-6)


@pytest.mark.parametrize("which", ["decode", "store"])
def test_roofline_draws_the_copy_line_and_one_marker_per_point(which, decode, store):
    if which == "decode":
        result, points, methods = decode, roofline.decode_points(decode), roofline.DECODE_METHODS
    else:
        result, points, methods = store, roofline.store_points(store), roofline.STORE_METHODS
    ax = roofline.plot_roofline(points, result["copy_gbs"], methods).axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    (line,) = ax.lines
    (x0, x1), (y0, y1) = line.get_xdata(), line.get_ydata()
    us_per_byte = 1 / (result["copy_gbs"] * 1e3)
    assert math.isclose(y0, x0 * us_per_byte) and math.isclose(y1, x1 * us_per_byte)
    assert sum(len(c.get_offsets()) for c in ax.collections) == len(points)
    assert {t.get_text() for t in ax.get_legend().get_texts()} >= {methods[p["method"]][0] for p in points}
    assert min(p["bytes"] for p in points) > x0 and max(p["bytes"] for p in points) < x1
