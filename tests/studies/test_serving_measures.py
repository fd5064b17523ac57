"""pagedkv_lib.studies.serving.measures: Fig. 2's breakdown of a run adds up to what the run's series hold;
latency is one step per token when nobody waits and explodes past what a policy sustains."""
import numpy as np
import pytest

from pagedkv_lib.studies.policies import make_policy
from pagedkv_lib.studies.serving.measures import (
    latency_curves,
    normalized_latency,
    serving_breakdown,
    sustained_rate,
)
from pagedkv_lib.studies.serving.simulation import SERVING_POLICIES, simulate_serving
from pagedkv_lib.studies.waste import lifetime_waste
from pagedkv_lib.studies.workload import make_trace, request_arrays


@pytest.mark.parametrize("key", SERVING_POLICIES)
@pytest.mark.parametrize("budget", [4000, 15_728])
def test_breakdown_adds_up_to_the_runs_series(key, budget):
    requests = make_trace("sharegpt", 400, seed=1)
    res = simulate_serving(requests, key, budget_tokens=budget, max_len=2048, block_size=16)
    w = lifetime_waste(*request_arrays(requests), make_policy(key, max_len=2048, block_size=16))
    assert w.token.sum() == res.used_tokens.sum()            # also through preemptions (paged, budget 4000)
    assert w.allocated.sum() == res.allocated_tokens.sum()
    shares = serving_breakdown(res, requests)
    assert sum(shares.values()) == pytest.approx(1.0) and min(shares.values()) >= 0
    assert shares["token"] == pytest.approx(res.used_tokens.sum() / (budget * res.num_steps))
    if key == "paged" and budget == 4000:
        assert res.num_preemptions > 0


def test_latency_is_one_step_per_token_when_nobody_waits_and_grows_past_capacity():
    requests = make_trace("alpaca", 2000, seed=0)
    quiet = simulate_serving(requests, "orca_oracle", budget_tokens=15_728, max_len=2048, arrival_rate=0.01)
    assert normalized_latency(quiet, requests) == pytest.approx(1.0)
    rates = [0.5, 1.0, 1.5, 2.0, 3.0]
    curves = latency_curves(requests, rates, budget_tokens=15_728, max_len=2048,
                            keys=("orca_oracle", "paged"))
    assert (np.diff(curves["orca_oracle"]) >= 0).all() and curves["orca_oracle"][-1] > 2
    assert (curves["paged"] <= curves["orca_oracle"]).all()
    full = simulate_serving(requests, "orca_oracle", budget_tokens=15_728, max_len=2048)
    assert sustained_rate(rates, curves["orca_oracle"], 2.0) == pytest.approx(full.saturated_rate, rel=0.25)
    assert full.batched_requests <= full.max_concurrency


def test_sustained_rate_interpolates():
    assert sustained_rate([1, 2, 3], [1.0, 1.5, 3.5], 2.5) == pytest.approx(2.5)
    assert sustained_rate([1, 2], [3.0, 4.0], 2.0) == 1.0
    assert sustained_rate([1, 2], [1.0, 1.1], 2.0) is None
