"""pagedkv_lib.studies.serving.reservation: the event-driven Orca simulation equals a step-by-step loop over a
buddy allocator, for the three policies, with and without arrivals."""
from collections import deque

import numpy as np
import pytest

from pagedkv_lib.studies.buddy_allocator import BuddyAllocator
from pagedkv_lib.studies.policies import Paged, Reserve
from pagedkv_lib.studies.serving.reservation import simulate_reserving
from pagedkv_lib.studies.workload import arrival_steps, make_workload


def naive_reserving(requests, policy, budget, arrivals, max_num_seqs=None):
    """Every step: admit FIFO while a buddy block fits, grow everyone by one token, release the finished."""
    p = np.array([r.prompt_len for r in requests])
    o = np.array([r.output_len for r in requests])
    chunk, n, alloc = policy.chunk(p, o), len(requests), BuddyAllocator(budget)
    length, offset, running, waiting = [0] * n, {}, [], deque()
    admit, finish = [-1] * n, [-1] * n
    series = {"running": [], "waiting": [], "used": [], "allocated": []}
    t = 0
    while min(finish) < 0:
        waiting.extend(i for i in range(n) if arrivals[i] == t)
        while waiting and len(running) < (max_num_seqs or n):
            got = alloc.alloc(int(chunk[waiting[0]]))
            if got is None:
                break
            r = waiting.popleft()
            offset[r], admit[r], length[r] = got, t, p[r]
            running.append(r)
        for r in running:
            length[r] += 1
        series["running"].append(len(running))
        series["waiting"].append(len(waiting))
        series["used"].append(sum(length[r] for r in running))
        series["allocated"].append(sum(int(chunk[r]) for r in running))
        for r in [r for r in running if length[r] == p[r] + o[r]]:
            running.remove(r)
            alloc.free(offset[r])
            finish[r] = t
        t += 1
    return series, admit, finish


CASES = [  # kind, max_len, budget, arrival rate, max_num_seqs
    ("max", 512, 1500, None, None), ("pow2", 512, 1500, 0.5, None), ("oracle", 512, 1000, 0.2, 4),
    ("oracle", 600, 777, None, None), ("pow2", 600, 2048, 2.0, None), ("max", 400, 1200, 0.1, 2),
]


@pytest.mark.parametrize("kind, max_len, budget, rate, max_num_seqs", CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_a_step_by_step_loop(kind, max_len, budget, rate, max_num_seqs, seed):
    requests = make_workload(60, seed, prompt_range=(1, 250), output_range=(1, 150))
    policy = Reserve(kind, max_len)
    res = simulate_reserving(requests, policy, budget_tokens=budget, arrival_rate=rate, seed=seed,
                             max_num_seqs=max_num_seqs)
    arrivals = arrival_steps(60, rate, seed)
    series, admit, finish = naive_reserving(requests, policy, budget, arrivals, max_num_seqs)
    assert res.num_running.tolist() == series["running"] and res.num_waiting.tolist() == series["waiting"]
    assert res.used_tokens.tolist() == series["used"]
    assert res.allocated_tokens.tolist() == series["allocated"]
    assert res.admit_step.tolist() == admit and res.finish_step.tolist() == finish
    assert res.arrival_step.tolist() == arrivals.tolist() and res.num_preemptions == 0


@pytest.mark.parametrize("call, error, message", [
    (lambda: simulate_reserving(make_workload(5), Paged(16), budget_tokens=8192), TypeError,
     "expected a Reserve"),
    (lambda: simulate_reserving(make_workload(5), Reserve("max", 4096), budget_tokens=3000), ValueError,
     "budget_tokens: expected a buddy block for the largest chunk"),
    (lambda: simulate_reserving(make_workload(5), Reserve("max", 4096), budget_tokens=8192, max_num_seqs=0),
     ValueError, "max_num_seqs"),
])
def test_bad_inputs_say_expected_and_given(call, error, message):
    with pytest.raises(error, match=message):
        call()
