"""pagedkv_lib.studies.serving.simulation: step for step equal to a naive per-request loop; the waste claim;
fp8 doubles what a budget in bytes holds."""
from collections import deque

import numpy as np
import pytest

from pagedkv_lib.studies.memory import MODELS, GiB
from pagedkv_lib.studies.serving.simulation import SERVING_POLICIES, simulate_serving
from pagedkv_lib.studies.workload import arrival_steps, make_workload


def naive_serving(requests, policy, budget_tokens, block_size, max_len, arrivals, max_num_seqs=None):
    """The same scheduler written the slow obvious way, every step: explicit blocks per request ("paged"),
    or budget // max_len equal reservations ("reserve": Orca (Max) when max_len is a power of two)."""
    unit = block_size if policy == "paged" else max_len
    num_units, n = budget_tokens // unit, len(requests)
    length = [r.prompt_len for r in requests]
    held = [0] * n
    running, waiting, free = [], deque(), num_units
    series = {"running": [], "waiting": [], "used": [], "allocated": []}
    admit, finish = [-1] * n, [-1] * n
    preemptions = recomputed = t = 0
    while min(finish) < 0:
        waiting.extend(i for i in range(n) if arrivals[i] == t)
        preempted = False
        if policy == "paged":
            def missing():
                return sum(-(-(length[r] + 1) // unit) - held[r] for r in running)
            while missing() > free:
                r = running.pop()
                free, held[r] = free + held[r], 0
                waiting.appendleft(r)
                preempted, preemptions, recomputed = True, preemptions + 1, recomputed + length[r]
            for r in running:
                free -= -(-(length[r] + 1) // unit) - held[r]
                held[r] = -(-(length[r] + 1) // unit)
        while not preempted and waiting and len(running) < (max_num_seqs or n):
            cost = -(-(length[waiting[0]] + 1) // unit) if policy == "paged" else 1
            if cost > free:
                break
            r = waiting.popleft()
            held[r], free = cost, free - cost
            running.append(r)
            admit[r] = t if admit[r] < 0 else admit[r]
        assert free >= 0
        for r in running:
            length[r] += 1
        series["running"].append(len(running))
        series["waiting"].append(len(waiting))
        series["used"].append(sum(length[r] for r in running))
        series["allocated"].append((num_units - free) * unit)
        for r in [r for r in running if length[r] == requests[r].total_len]:
            running.remove(r)
            free, finish[r] = free + held[r], t
        t += 1
    return series, admit, finish, preemptions, recomputed


CASES = [  # policy, budget_tokens, block_size, arrival_rate, max_num_seqs
    ("paged", 700, 16, None, None), ("paged", 700, 1, 0.5, None), ("paged", 1500, 7, 2.0, 6),
    ("paged", 4096, 64, 0.1, None), ("orca_max", 1500, 16, None, None), ("orca_max", 2000, 16, 0.3, 3),
]


@pytest.mark.parametrize("policy, budget, block_size, rate, max_num_seqs", CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_a_naive_per_request_loop_step_for_step(policy, budget, block_size, rate, max_num_seqs, seed):
    requests = make_workload(60, seed, prompt_range=(1, 300), output_range=(1, 150))
    res = simulate_serving(requests, policy, budget_tokens=budget, block_size=block_size, max_len=512,
                           arrival_rate=rate, seed=seed, max_num_seqs=max_num_seqs)
    naive_policy = "paged" if policy == "paged" else "reserve"
    series, admit, finish, preemptions, recomputed = naive_serving(
        requests, naive_policy, budget, block_size, 512, arrival_steps(60, rate, seed), max_num_seqs)
    assert res.num_running.tolist() == series["running"] and res.num_waiting.tolist() == series["waiting"]
    assert res.used_tokens.tolist() == series["used"]
    assert res.allocated_tokens.tolist() == series["allocated"]
    assert res.admit_step.tolist() == admit and res.finish_step.tolist() == finish
    assert (res.num_preemptions, res.recomputed_tokens) == (preemptions, recomputed)


@pytest.mark.parametrize("policy", SERVING_POLICIES)
@pytest.mark.parametrize("budget_blocks", [50, 200])
def test_invariants_on_the_notebook_1_workload(policy, budget_blocks):
    requests = make_workload()
    res = simulate_serving(requests, policy, budget_tokens=budget_blocks * 4096)
    assert (res.allocated_tokens <= res.budget_tokens).all()  # never over the budget
    assert (res.used_tokens <= res.allocated_tokens).all()
    assert (res.finish_step >= 0).all()                        # every request finishes
    assert res.num_running.sum() == sum(r.output_len for r in requests)  # a token per running request
    assert res.num_steps == res.finish_step.max() + 1
    outputs = np.array([r.output_len for r in requests])
    assert (res.finish_step - res.admit_step + 1 >= outputs).all()


def test_reserving_wastes_most_of_its_allocation_while_paging_wastes_under_4_percent():
    """The PagedAttention paper: 60-80% of KV memory wasted before, under 4% with paging."""
    requests = make_workload()
    reserve = simulate_serving(requests, "orca_max", budget_tokens=200 * 4096)
    paged = simulate_serving(requests, "paged", budget_tokens=200 * 4096, block_size=16)
    assert 1 - reserve.mean_utilization > 0.5
    assert 1 - paged.mean_utilization < 0.04


@pytest.mark.parametrize("budget_blocks", [20, 50, 100])
def test_paging_runs_at_least_as_many_requests_and_tokens_per_step(budget_blocks):
    requests = make_workload()
    paged = simulate_serving(requests, "paged", budget_tokens=budget_blocks * 4096)
    for key in ("orca_max", "orca_pow2", "orca_oracle"):
        reserve = simulate_serving(requests, key, budget_tokens=budget_blocks * 4096)
        assert paged.mean_concurrency >= reserve.mean_concurrency
        assert paged.throughput >= reserve.throughput and paged.num_steps <= reserve.num_steps


@pytest.mark.parametrize("policy", SERVING_POLICIES)
def test_fp8_kv_runs_about_twice_the_requests_of_bf16_on_the_same_bytes(policy):
    """7 GiB of Qwen3-0.6B KV: 65,536 slots in bf16, 131,072 in fp8. Orca (Max) runs exactly twice as many
    chunks of 4096; the others, while memory-bound, about twice as many (lengths differ; 20%)."""
    requests = make_workload(400, seed=0)
    qwen = MODELS["Qwen3-0.6B"]
    slots = {d: 7 * GiB // qwen.with_kv_dtype(d).bytes_per_token for d in ("bf16", "fp8")}
    runs = {d: simulate_serving(requests, policy, budget_tokens=s) for d, s in slots.items()}
    if policy == "orca_max":
        assert (runs["bf16"].max_concurrency, runs["fp8"].max_concurrency) == (16, 32)
    ratio = runs["fp8"].batched_requests / runs["bf16"].batched_requests
    assert 1.8 <= ratio <= 2.2


def test_a_tight_budget_preempts_by_recompute_and_still_finishes():
    res = simulate_serving(make_workload(), "paged", budget_tokens=10 * 4096)
    assert res.num_preemptions > 0 and res.recomputed_tokens > 0 and (res.finish_step >= 0).all()
    roomy = simulate_serving(make_workload(), "paged", budget_tokens=200 * 4096, block_size=1)
    assert roomy.num_preemptions == 0 and (roomy.admit_step == 0).all()


def test_simulation_is_deterministic_per_seed():
    requests = make_workload(300, seed=3)
    a, b, c = (simulate_serving(requests, "paged", budget_tokens=30 * 4096, arrival_rate=0.5, seed=s)
               for s in (3, 3, 4))
    assert np.array_equal(a.used_tokens, b.used_tokens) and np.array_equal(a.admit_step, b.admit_step)
    assert not np.array_equal(a.admit_step, c.admit_step)


@pytest.mark.parametrize("kw, message", [
    (dict(policy="reserve"), "policy: expected"),
    (dict(budget_tokens=1000), "budget_tokens: expected room for the longest"),
    (dict(policy="orca_max", max_len=1000), "max_len: expected >= every prompt"),
    (dict(policy="orca_oracle", budget_tokens=1000), "budget_tokens: expected a buddy block"),
    (dict(block_size=0), "block_size: expected a positive int"),
    (dict(max_num_seqs=False), "max_num_seqs: expected a positive int"),
])
def test_bad_inputs_raise_value_error_saying_expected_and_given(kw, message):
    kw = {"policy": "paged", "budget_tokens": 4096, **kw}
    with pytest.raises(ValueError, match=message):
        simulate_serving(make_workload(20), **kw)
