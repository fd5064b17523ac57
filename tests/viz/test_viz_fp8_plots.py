"""Notebook 13's pictures and its fp8-vs-bf16 speed table, on a synthetic results file."""
from __future__ import annotations

from pagedkv_lib.studies.fp8_greedy_agreement import Flip, GreedyAgreement
from pagedkv_lib.viz import fp8_plots

SYNTHETIC = {
    "device": "test GPU", "copy_gbs": 4000.0,
    "shapes": [
        {"B": 64, "L": 4096, "block_size": 16, "bf16": {"us": 250.0, "bytes": 1_000_000_000},
         "fp8": {"us": 125.0, "bytes": 500_000_000}},
        {"B": 1, "L": 4096, "block_size": 16, "bf16": {"us": 11.0}, "fp8": {"us": 10.0}},
    ],
}


def test_speed_table_gives_the_speedup_and_each_cache_as_a_fraction_of_copy():
    text = fp8_plots.speed_table(SYNTHETIC)
    lines = text.splitlines()
    assert lines[0] == "test GPU: copy 4000 GB/s (read + write) = 100%"
    assert lines[2].split() == ["64x4096", "bs16", "250.0", "125.0", "2.00x", "100%", "100%"]
    assert lines[3].split()[-3:] == ["1.10x", "-", "-"]           # no byte counts: no fraction


def test_speed_table_says_plainly_when_no_gpu_figures_are_stored():
    for speed in (None, {"device": "d", "copy_gbs": 1.0, "shapes": []}):       # no run, or no fp8 rows in it
        assert fp8_plots.speed_table(speed).startswith("No GPU figures for the fp8 cache are stored yet")


def test_from_decode_results_takes_the_two_methods_of_each_shape():
    bench = {"device": "d", "copy_gbs": 1.0, "shapes": [
        {"B": 8, "L": 4096, "block_size": 16, "bytes": 1000,
         "methods": {"triton": {"us": 20.0}, "triton_fp8": {"us": 11.0, "bytes": 500}}},
        {"B": 1, "L": 4096, "block_size": 16, "bytes": 100, "methods": {"triton": {"us": 9.0}}},
    ]}
    got = fp8_plots.from_decode_results(bench, "triton", "triton_fp8")
    assert got["shapes"] == [{"B": 8, "L": 4096, "block_size": 16, "shape": "8x4096",
                              "bf16": {"us": 20.0, "bytes": 1000}, "fp8": {"us": 11.0, "bytes": 500}}]


def test_from_decode_results_reads_bench_decode_s_own_schema():
    """bench_decode.py names a shape, gives a ragged batch's longest context as max_len and the fp8 bytes
    beside the bf16 ones."""
    bench = {"env": {"device": "H"}, "copy_gbs": 1.0, "shapes": [
        {"shape": "ragged64", "B": 64, "max_len": 8192, "block_size": 16, "bytes": 900, "bytes_fp8": 450,
         "methods": {"triton_v3": {"us": 10.0}, "fp8_v3": {"us": 6.0}}}]}
    got = fp8_plots.from_decode_results(bench, "triton_v3", "fp8_v3")
    assert got["device"] == "H" and got["shapes"][0]["shape"] == "ragged64"
    assert got["shapes"][0]["fp8"] == {"us": 6.0, "bytes": 450} and got["shapes"][0]["L"] == 8192


def test_figures_draw_one_line_per_cache_and_the_whole_grid():
    rows = [{"magnitude": m, "cache": c, "rel_mean_err": 0.01 * (i + 1)}
            for m in (0.1, 1.0) for i, c in enumerate(fp8_plots.CACHES)]
    fig = fp8_plots.error_vs_magnitude_figure(rows)
    assert len(fig.axes[0].lines) == len(fp8_plots.CACHES)
    fig = fp8_plots.e4m3_grid_figure([2.0**-9 * k for k in range(1, 8)] + [448.0])
    assert len(fig.axes[0].collections[0].get_segments()) == 8
    result = GreedyAgreement(1, 2, {"bf16": 1, "fp8": 0}, {"bf16": [None], "fp8": [0]},
                             {"float64": 1.0, "bf16": 1.0, "fp8": 0.5},
                             {"float64": [], "bf16": [], "fp8": [Flip(0, 0, 1, 2, 0.1)]}, [0.1, 0.9])
    fig = fp8_plots.margin_figure(result)
    assert len(fig.axes[0].patches) == 90                          # three histograms of 30 bins
