"""pagedkv_lib.studies.workload: notebook 1's workload and its utilization figures, checked token by token."""
import random

import numpy as np
import pytest

from pagedkv_lib.studies.workload import (
    Request,
    arrival_steps,
    make_workload,
    utilization_paged,
    utilization_reserved,
    waste_breakdown,
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


@pytest.mark.parametrize("block_size", [1, 16, 129, 256])
def test_waste_breakdown_parts_add_up_and_agree_with_utilization(block_size):
    requests = make_workload(300, seed=3)
    waste = waste_breakdown(requests, block_size, 4096)
    reserve, paged = waste["reserve"], waste["paged"]
    total = np.array([r.total_len for r in requests])
    for scheme in (reserve, paged):
        assert np.array_equal(scheme.used, total)
        assert (scheme.internal >= 0).all() and (scheme.reserved_unused >= 0).all()
    assert (reserve.allocated == 4096).all() and (reserve.internal == 0).all()
    assert (paged.allocated % block_size == 0).all() and (paged.internal < block_size).all()
    assert (paged.reserved_unused == 0).all()
    assert reserve.utilization == pytest.approx(utilization_reserved(requests, 4096))
    assert paged.utilization == pytest.approx(utilization_paged(requests, block_size))


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


@pytest.mark.parametrize("call, message", [
    (lambda: make_workload(0), "num_requests"),
    (lambda: make_workload(10, prompt_range=(50, 10)), "low <= high"),
    (lambda: make_workload(10, output_range=(0, 10)), "output_range"),
    (lambda: utilization_paged(make_workload(5), 0), "block_size"),
    (lambda: utilization_reserved(make_workload(5), 100), "max_len: expected >="),
    (lambda: utilization_reserved([], 4096), "at least one"),
    (lambda: waste_breakdown(make_workload(5), True, 4096), "block_size"),
    (lambda: arrival_steps(5, -1.0), "rate"),
])
def test_bad_inputs_raise_value_error_saying_expected_and_given(call, message):
    with pytest.raises(ValueError, match=message):
        call()
