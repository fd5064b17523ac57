"""The GPU figures of notebooks 10, 11 and 12: stored H200 results as tables and roofline pictures."""
from __future__ import annotations

import math

import pytest

from pagedkv_lib.studies import results
from pagedkv_lib.viz import roofline


@pytest.fixture(scope="module")
def decode():
    return results.load("decode_h200.json")


@pytest.fixture(scope="module")
def store():
    return results.load("store_kvcache_h200.json")


@pytest.fixture(scope="module")
def first_run():
    """The first run of the v3 / prefill benchmarks (its copy anchor was wrong; its times are sound)."""
    return tuple(results.load(f"first_run/bench_{kind}.json") for kind in ("decode", "prefill"))


def test_decode_table_gives_each_method_as_a_fraction_of_the_same_runs_copy(decode):
    text = roofline.decode_table(decode)
    assert "copy 4273 GB/s" in text
    row = next(line for line in text.splitlines() if line.split()[:2] == ["64x4096", "bs16"])
    assert "252.1 us 99.8%" in row and "434.0 us 58.0%" in row and "328.0 us 76.7%" in row
    assert "251.5" in row                                   # the floor: 1075 MB at 4273 GB/s
    assert "11.1 us 35.5%" in text and "495.4 us 101.5%" in text
    assert len(text.splitlines()) == 2 + len(decode["shapes"])


def test_decode_table_of_the_sdpa_backends_names_the_backend_that_ran(first_run):
    decode, _ = first_run
    text = roofline.decode_table(decode, ["triton_v3", "sdpa_default", "sdpa_flash"])
    row = next(line for line in text.splitlines() if line.split()[:1] == ["ragged64"])
    assert "248.5 us" in row and "1082.0 us" in row and row.rstrip().endswith("-")  # FLASH: no kernel
    assert text.splitlines()[-1] == "backend that ran: SDPA default: cudnn; SDPA flash: flash"


def test_prefill_table_gives_tflops_and_the_fraction_of_the_fastest_sdpa(first_run):
    _, prefill = first_run
    text = roofline.prefill_table(prefill, ["triton", "sdpa_default", "sdpa_flash"])
    assert "matmul 681 TFLOP/s" in text
    row = next(line for line in text.splitlines() if line.split()[:1] == ["cold8x2048"])
    assert "1005 us 274 TF 67%" in row and "675 us 407 TF 100%" in row
    assert "cold8x2048 SDPA default: cudnn" in text and "chunked16x(2048+512) SDPA default: flash" in text


def test_store_table_lists_every_token_count(store):
    text = roofline.store_table(store)
    assert [line.split()[0] for line in text.splitlines()[2:]] == ["1", "64", "256", "4096", "32768"]
    assert "69.6 us 90.3%" in text


def test_points_are_bytes_over_time_consistent_with_the_stored_fractions(decode, store, first_run):
    for result, points in ((decode, roofline.decode_points(decode)), (store, roofline.store_points(store)),
                           (first_run[0], roofline.decode_points(first_run[0]))):
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


def test_decode_is_left_of_the_ridge_and_prefill_right_of_it(first_run):
    """4 * H * D FLOPs per 2 * H_kv * D * 2 bytes of K/V: 4 FLOP/B for decode at G = 4; causal prefill of
    2048 tokens: ~800 FLOP/B. The H200's ridge (matmul / copy) lies between, near 160 FLOP/B."""
    decode, prefill = first_run
    points = roofline.attention_points(decode, prefill)
    ridge = prefill["matmul_tflops"] * 1e3 / 4273
    assert {p["kind"] for p in points} == {"decode", "prefill"}
    for p in points:
        assert (p["intensity"] < ridge) == (p["kind"] == "decode")
        assert p["kind"] != "decode" or 3.9 < p["intensity"] < 4.0   # q and out bytes lower it a little
    ax = roofline.plot_attention_roofline(points, 4273, prefill["matmul_tflops"]).axes[0]
    xs, ys = ax.lines[0].get_xdata(), ax.lines[0].get_ydata()
    assert math.isclose(xs[1], ridge) and ys[1] == ys[2] == prefill["matmul_tflops"]
    assert math.isclose(ys[0], xs[0] * 4273 / 1e3)                 # the slope: bandwidth
    assert sum(len(c.get_offsets()) for c in ax.collections) == len(points)
