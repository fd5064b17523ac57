"""pagedkv_lib.studies.workload: notebook 1's workload and its utilization figures, checked token by token;
the paper-like traces keep the published means and the filter."""
import random

import numpy as np
import pytest

from pagedkv_lib.studies.workload import (
    TRACES,
    Request,
    arrival_steps,
    make_trace,
    make_workload,
    request_arrays,
    trace_arrays,
    utilization_paged,
    utilization_reserved,
)


def test_make_workload_is_the_notebook_1_random_seed_0_loop():
    random.seed(0)
    expected = [(random.randint(100, 2000), random.randint(20, 1500)) for _ in range(200)]
    assert [(r.prompt_len, r.output_len) for r in make_workload()] == expected


def test_reserving_max_len_4096_uses_46_2_percent():
    assert round(100 * utilization_reserved(make_workload(), 4096), 1) == 46.2


def test_paging_uses_100_99_6_98_3_93_2_percent_at_block_size_1_16_64_256():
    got = [round(100 * utilization_paged(make_workload(), bs), 1) for bs in (1, 16, 64, 256)]
    assert got == [100.0, 99.6, 98.3, 93.2]


def _per_token_utilization(requests, block_size=None, max_len=None):
    """Walk every token; allocate a block when a token starts one (or max_len once per request)."""
    used = allocated = 0
    for r in requests:
        allocated += max_len if max_len is not None else 0
        for pos in range(r.total_len):
            used += 1
            if block_size is not None and pos % block_size == 0:
                allocated += block_size
    return used / allocated


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("block_size", [1, 7, 16, 127, 128, 129, 256])
def test_utilization_matches_a_per_token_loop(seed, block_size):
    requests = make_workload(50, seed)
    assert utilization_paged(requests, block_size) == pytest.approx(
        _per_token_utilization(requests, block_size=block_size), rel=1e-12)
    assert utilization_reserved(requests, 4096) == pytest.approx(
        _per_token_utilization(requests, max_len=4096), rel=1e-12)


def test_workload_is_deterministic_per_seed():
    assert make_workload(100, seed=7) == make_workload(100, seed=7)
    assert make_workload(100, seed=7) != make_workload(100, seed=8)
    assert Request(3, 4).total_len == 7


def test_workload_respects_its_inclusive_ranges():
    requests = make_workload(2000, seed=1, prompt_range=(5, 6), output_range=(1, 1))
    assert {r.prompt_len for r in requests} == {5, 6} and {r.output_len for r in requests} == {1}


def test_arrival_steps_start_at_0_are_sorted_and_deterministic():
    assert (arrival_steps(10, None) == 0).all()
    a = arrival_steps(5000, 0.5, seed=4)
    assert a[0] == 0 and (np.diff(a) >= 0).all() and a.dtype == np.int64
    assert np.array_equal(a, arrival_steps(5000, 0.5, seed=4))
    assert a[-1] / len(a) == pytest.approx(2.0, rel=0.1)  # mean gap 1 / rate


def test_a_smaller_workload_is_a_prefix_of_a_larger_one_so_a_slider_can_slice():
    assert make_workload(2000)[:137] == make_workload(137)


def test_synthetic_trace_is_the_notebook_1_workload():
    assert make_trace("synthetic", 200, 0) == make_workload(200, 0)


@pytest.mark.parametrize("name", ["sharegpt", "alpaca"])
def test_trace_means_match_figure_11_within_3_percent(name):
    prompt, output = trace_arrays(name, 20_000, seed=0)
    spec = TRACES[name]
    assert prompt.mean() == pytest.approx(spec.paper_mean_prompt, rel=0.03)
    assert output.mean() == pytest.approx(spec.paper_mean_output, rel=0.03)


def test_sharegpt_output_second_moment_gives_figure_2s_token_share_of_0_60():
    prompt, output = trace_arrays("sharegpt", 20_000, seed=0)
    s = (output.astype(float) ** 2).mean() / output.mean()
    assert s == pytest.approx(630, rel=0.05)
    # over each request's life: token states / (token states + reservation), summed over requests
    token = (output * prompt + output * (output + 1) / 2).sum()
    reserved = (output * (output - 1) / 2).sum()
    assert token / (token + reserved) == pytest.approx(0.6025, abs=0.01)


@pytest.mark.parametrize("name", ["sharegpt", "alpaca"])
def test_trace_filter_holds(name):
    prompt, output = trace_arrays(name, 20_000, seed=3)
    assert prompt.min() >= 4 and output.min() >= 4
    assert prompt.max() <= 1024 and (prompt + output).max() <= 2048


@pytest.mark.parametrize("name", ["synthetic", "sharegpt", "alpaca"])
def test_traces_are_seeded_and_a_prefix_of_a_longer_draw(name):
    assert make_trace(name, 300, 5) == make_trace(name, 300, 5)
    assert make_trace(name, 300, 5) != make_trace(name, 300, 6)
    assert make_trace(name, 9000, 5)[:137] == make_trace(name, 137, 5)


def test_sharegpt_is_longer_and_more_varied_than_alpaca_as_in_section_6_1():
    (ps, os_), (pa, oa) = trace_arrays("sharegpt", 20_000), trace_arrays("alpaca", 20_000)
    assert ps.mean() / pa.mean() == pytest.approx(8.4, rel=0.05)      # "8.4x longer input prompts"
    assert os_.mean() / oa.mean() == pytest.approx(5.8, rel=0.05)     # "5.8x longer outputs"
    assert np.std(os_) > np.std(oa)


@pytest.mark.parametrize("call, message", [
    (lambda: make_workload(0), "num_requests"),
    (lambda: make_workload(10, prompt_range=(50, 10)), "low <= high"),
    (lambda: make_workload(10, output_range=(0, 10)), "output_range"),
    (lambda: utilization_paged(make_workload(5), 0), "block_size"),
    (lambda: utilization_reserved(make_workload(5), 100), "max_len: expected >="),
    (lambda: utilization_reserved([], 4096), "at least one"),
    (lambda: arrival_steps(5, -1.0), "rate"),
    (lambda: make_trace("lmsys"), "name: expected one of"),
    (lambda: trace_arrays("sharegpt", 0), "num_requests"),
    (lambda: request_arrays([]), "at least one"),
])
def test_bad_inputs_raise_value_error_saying_expected_and_given(call, message):
    with pytest.raises(ValueError, match=message):
        call()
