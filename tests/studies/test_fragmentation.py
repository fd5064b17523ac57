"""pagedkv_lib.studies.fragmentation: the memory map agrees with the allocators; only first fit strands
memory."""

import numpy as np
import pytest

from pagedkv_lib.studies.fragmentation import simulate_fragmentation
from pagedkv_lib.studies.workload import make_workload

SMALL = dict(capacity=2048, max_len=512, arrival_rate=0.5, granularity=1)


def _requests(seed):
    return make_workload(40, seed, prompt_range=(10, 300), output_range=(5, 200))


def _run(allocator, seed=0, **kw):
    return simulate_fragmentation(allocator, requests=_requests(seed), seed=seed, **{**SMALL, **kw})


@pytest.mark.parametrize("allocator, reserve", [("first_fit", "exact"), ("first_fit", "max"),
                                                ("paged", "exact")])
def test_memory_map_agrees_with_the_allocator_accounting(allocator, reserve):
    res = _run(allocator, reserve=reserve, seed=1)
    requests = _requests(1)
    held = res.memory_map != -1                                      # [T, capacity]
    assert np.array_equal(res.capacity - held.sum(axis=1), res.free)
    for row, step, running in zip(res.memory_map, res.steps, res.num_running, strict=True):
        owners, counts = np.unique(row[row >= 0], return_counts=True)
        assert len(owners) == running
        assert ((res.admit_step[owners] <= step) & (step < res.finish_step[owners])).all()
        for rid, count in zip(owners, counts, strict=True):
            size = 512 if reserve == "max" else requests[rid].total_len
            assert count == (-(-size // 16) * 16 if allocator == "paged" else size)
            if allocator == "first_fit":  # one contiguous range
                where = np.flatnonzero(row == rid)
                assert where[-1] - where[0] + 1 == count


@pytest.mark.parametrize("allocator", ["first_fit", "paged"])
def test_every_request_is_admitted_fifo_and_holds_memory_for_its_lifetime(allocator):
    res = _run(allocator, seed=2, tokens_per_step=7)
    lifetimes = np.array([-(-r.output_len // 7) for r in _requests(2)])
    assert (res.admit_step >= res.arrival_step).all()
    assert (np.diff(res.admit_step) >= 0).all()  # FIFO: nobody overtakes the head of the queue
    assert np.array_equal(res.finish_step - res.admit_step, lifetimes)
    assert (res.free >= 0).all() and (res.free <= res.capacity).all()
    assert res.steps[-1] == res.finish_step.max()  # the last row is the step the last request leaves
    assert res.num_running[-1] == 0 and res.num_waiting[-1] == 0 and res.free[-1] == res.capacity


def test_paged_has_no_external_fragmentation():
    res = simulate_fragmentation("paged")
    assert (res.external_fragmentation == 0).all() and not res.head_blocked.any()


def test_first_fit_strands_free_memory_the_queue_head_could_use():
    res = simulate_fragmentation("first_fit")
    assert res.head_blocked.any() and res.free[res.head_blocked].min() > 0   # free memory, but no hole
    assert res.external_fragmentation.mean() > 0.1
    assert res.mean_wait > simulate_fragmentation("paged").mean_wait


def test_first_fit_with_equal_max_len_slots_has_no_holes_but_reserves():
    res = simulate_fragmentation("first_fit", num_requests=30, reserve="max", capacity=4 * 4096, max_len=4096)
    assert (res.external_fragmentation == 0).all() and not res.head_blocked.any()
    assert res.num_running.max() == 4


def test_simulation_is_deterministic_per_seed():
    a, b, c = _run("first_fit", seed=5), _run("first_fit", seed=5), _run("first_fit", seed=6)
    assert np.array_equal(a.memory_map, b.memory_map) and np.array_equal(a.admit_step, b.admit_step)
    assert not np.array_equal(a.admit_step, c.admit_step)


def test_memory_map_is_shaped_for_a_picture():
    res = simulate_fragmentation("first_fit", granularity=64, record_every=4)
    assert res.memory_map.shape == (len(res.steps), 16384 // 64) and res.memory_map.dtype == np.int32
    assert (np.diff(res.steps) == 4).all()


@pytest.mark.parametrize("kw, message", [
    (dict(allocator="best_fit"), "allocator: expected"),
    (dict(reserve="all"), "reserve: expected"),
    (dict(capacity=1000), "multiple of block_size"),
    (dict(capacity=1024), "fit in capacity"),
    (dict(reserve="max", max_len=1000), "fit in capacity"),
    (dict(granularity=0), "granularity: expected a positive int"),
])
def test_bad_inputs_raise_value_error_saying_expected_and_given(kw, message):
    with pytest.raises(ValueError, match=message):
        simulate_fragmentation(**kw)
