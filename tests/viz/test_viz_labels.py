"""Labels that overlap nothing: the placer on planted crowds, then the GPU figures of notebooks 10-12 drawn
from the stored results, measured with the renderer's extents (`get_window_extent`): no two texts overlap,
no text overlaps the legend, and the legend hides no point."""
from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from pagedkv_lib.studies import results
from pagedkv_lib.viz import labels, roofline

DECODE_COLUMNS = ["triton_v1", "triton_v2", "triton_v3", "sdpa_default", "sdpa_flash", "sdpa_cudnn",
                  "flash_varlen"]                                     # notebook 11's final table


def axes(**kw):
    return Figure(figsize=(6, 3), dpi=80).add_subplot(**kw)


def test_the_checker_sees_two_texts_on_one_spot_and_a_marker_under_the_legend():
    ax = axes()
    ax.scatter([0.1, 0.9], [0.9, 0.1], label="points")
    ax.legend(loc="upper left")
    ax.text(0.5, 0.5, "one")
    ax.text(0.5, 0.5, "two")
    found = labels.overlaps(ax)
    assert "'one' and 'two'" in found and any("under the legend" in f for f in found), found


def test_labels_on_one_anchor_are_fanned_out_around_it_without_overlap():
    ax = axes()
    ax.scatter([1, 2, 3], [1, 2, 3])
    ax.set_xlim(0, 4)
    ax.set_ylim(0, 4)
    placed = labels.place_labels(ax, [(2, 2, f"label {i}") for i in range(6)], fontsize=8)
    assert len({t.get_position() for t in placed}) == 6
    assert labels.overlaps(ax) == []


def test_anchors_a_few_pixels_apart_share_one_label():
    ax = axes(xscale="log")
    ax.set_xlim(1, 1e4)
    ax.set_ylim(0, 1)
    merged = labels.merge_close(ax, [(100, 0.5, "a"), (101, 0.5, "b"), (1000, 0.5, "c")])
    assert merged == [(100, 0.5, "a, b"), (1000, 0.5, "c")]


def _decode_final(ax):
    final = results.load("bench_decode.json")
    roofline.plot_roofline(roofline.decode_points(final, DECODE_COLUMNS), final["copy_gbs"], ax=ax)


def _decode_earlier(ax):
    earlier = results.load("decode_h200.json")
    roofline.plot_roofline(roofline.decode_points(earlier), earlier["copy_gbs"], ax=ax)


def _store(ax):
    store = results.load("store_kvcache_h200.json")
    roofline.plot_roofline(roofline.store_points(store), store["copy_gbs"], roofline.STORE_METHODS, ax=ax)


def _attention(ax):
    decode, prefill = results.load("bench_decode.json"), results.load("bench_prefill.json")
    roofline.plot_attention_roofline(roofline.attention_points(decode, prefill), prefill["copy_gbs"],
                                     prefill["matmul_tflops"], ax=ax)


@pytest.mark.parametrize("draw", [_decode_final, _decode_earlier, _store, _attention],
                         ids=["decode final (11)", "decode 2026-11-29 (11)", "store (10)", "roofline (12)"])
def test_the_gpu_figures_of_the_notebooks_overlap_nothing(draw):
    ax = Figure(figsize=(7.5, 4), dpi=80).add_subplot()               # the notebooks' size
    draw(ax)
    assert len(ax.texts) >= 4
    assert labels.overlaps(ax) == []
