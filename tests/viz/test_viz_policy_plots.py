"""Notebook 01's four-policy pictures: the bars are the shares, the explorer's line says what the studies
compute, and its controls do not collide with the utilization explorer's."""
from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from pagedkv_lib.studies.memory import MODELS, GiB
from pagedkv_lib.studies.policies import make_policy
from pagedkv_lib.studies.waste import waste_shares
from pagedkv_lib.studies.workload import make_trace, request_arrays
from pagedkv_lib.viz import policy_plots as pp
from pagedkv_lib.viz.memory_plots import UtilizationExplorer


def widths(ax):
    return [round(p.get_width(), 6) for p in ax.patches]


def test_breakdown_bars_are_the_shares_and_the_papers():
    shares = {"orca_max": {"token": 0.2, "reserved": 0.1, "internal": 0.6, "external": 0.1},
              "paged": {"token": 0.97, "reserved": 0.02, "internal": 0.01, "external": 0.0}}
    ax = Figure().add_subplot()
    pp.draw_breakdown(ax, shares, paper={"orca_max": {"token": 20.4, "reserved": 13.3, "internal": 57.3,
                                                      "external": 8.9}})
    assert widths(ax)[:8] == [20.0, 10.0, 60.0, 10.0, 20.4, 13.3, 57.3, 8.9]
    assert widths(ax)[8:] == [97.0, 2.0, 1.0, 0.0]
    assert [p.get_x() for p in ax.patches[:4]] == pytest.approx([0, 20, 30, 90])
    assert [t.get_text() for t in ax.texts[:4]] == ["20.0", "10.0", "60.0", "10.0"]


def test_breakdown_redraws_in_place():
    ax = Figure().add_subplot()
    first = {"paged": {"token": 0.5, "reserved": 0.5, "internal": 0.0, "external": 0.0}}
    pp.draw_breakdown(ax, first)
    bars = list(ax.patches)
    pp.draw_breakdown(ax, {"paged": {"token": 0.9, "reserved": 0.0, "internal": 0.04, "external": 0.06}})
    assert list(ax.patches) == bars and widths(ax) == [90.0, 0.0, 4.0, 6.0]
    assert [t.get_text() for t in ax.texts] == ["90.0", "", "", "6.0"]


@pytest.fixture(scope="module")
def explorer():
    return pp.PolicyExplorer(num_requests=500)


CASES = [("synthetic", "lifetime", 16), ("sharegpt", "final", 64), ("alpaca", "lifetime", 1)]


@pytest.mark.parametrize("workload, view, block_size", CASES)
def test_explorer_draws_and_states_the_static_study(explorer, workload, view, block_size):
    explorer.workload.value, explorer.view.value = workload, view
    explorer.block_size.value = block_size                      # what moving the controls does
    requests = make_trace(workload, 500, 0)
    max_len = 4096 if workload == "synthetic" else 2048
    for i, key in enumerate(("orca_max", "orca_pow2", "orca_oracle", "paged")):
        shares = waste_shares(requests, make_policy(key, max_len=max_len, block_size=block_size), view)
        assert widths(explorer.ax)[4 * i:4 * i + 4] == [round(100 * shares[c], 6) for c in shares]
    assert f"{workload}, max_len {max_len}, {view} view" in explorer.text.value
    assert explorer.image.value[:4] == b"\x89PNG"


@pytest.mark.parametrize("kv_dtype, slots", [("bf16", 15_728), ("fp8", 31_457)])
def test_kv_dtype_sets_the_papers_memory_in_slots_and_what_fits(explorer, kv_dtype, slots):
    explorer.workload.value, explorer.block_size.value = "sharegpt", 16
    explorer.kv_dtype.value = kv_dtype
    assert 12 * GiB // MODELS["OPT-13B"].with_kv_dtype(kv_dtype).bytes_per_token == slots
    prompt, output = request_arrays(make_trace("sharegpt", 500, 0))
    got, fits = explorer.fits()
    assert got == slots
    assert fits == {k: make_policy(k).fit(prompt, output, slots) for k in fits}
    assert f"= {slots:,} slots hold at once" in explorer.text.value
    assert f"Orca (Max) {slots // 2048}," in explorer.text.value


def test_css_classes_differ_from_the_utilization_explorers(explorer):
    """Notebook 01 shows both explorers; a browser test finds each control by its class."""
    ours = {c for w in (explorer.workload, explorer.view, explorer.block_size, explorer.kv_dtype,
                        explorer.text, explorer.image) for c in w._dom_classes}
    theirs = UtilizationExplorer(num_requests=10)
    assert {"pagedkv-policy-workload", "pagedkv-policy-view", "pagedkv-policy-block-size",
            "pagedkv-policy-kv-dtype", "pagedkv-policy-shares", "pagedkv-policy-plot"} <= ours
    assert not ours & {c for w in (theirs.block_size, theirs.requests, theirs.text, theirs.image)
                       for c in w._dom_classes}
