"""What the PagedAttention paper measured on a serving run, measured on the course's simulation.

Exports: `serving_breakdown`, `normalized_latency`, `latency_curves`, `sustained_rate`.
Units: token slots, steps (one decode iteration), requests per step.

  serving_breakdown   Fig. 2 (p. 2): the four categories as shares of all KV memory over the run, slot-steps /
                      (budget x steps). "external" is the buddy rounding plus the memory no running request
                      holds (the paper's "External frag. & Others"). Token, reserved and internal come from
                      each request's lifetime sums (`waste.lifetime_waste`): exact, since a request runs once
                      through every length p + 1..p + o even when it is preempted.
  normalized_latency  §6.1 (p. 10): "the mean of every request's end-to-end latency divided by its output
                      length", here in steps per token (1.0 when nobody waits).
  latency_curves      Fig. 12 (p. 10): normalized latency against the request rate, Poisson arrivals.
"""
from __future__ import annotations

import numpy as np

from pagedkv_lib.studies.policies import POLICY_KEYS, make_policy
from pagedkv_lib.studies.serving.result import ServingResult
from pagedkv_lib.studies.serving.simulation import simulate_serving
from pagedkv_lib.studies.waste import CATEGORIES, lifetime_waste
from pagedkv_lib.studies.workload import request_arrays


def serving_breakdown(result: ServingResult, requests) -> dict[str, float]:
    """Fig. 2's four shares of budget x steps for one run over `requests` (they sum to 1)."""
    policy = make_policy(result.policy, max_len=result.max_len, block_size=result.block_size or 16)
    waste = lifetime_waste(*request_arrays(requests), policy)
    total = result.budget_tokens * result.num_steps
    parts = {c: float(getattr(waste, c).sum()) for c in CATEGORIES}
    parts["external"] += total - float(result.allocated_tokens.sum())      # memory nobody holds
    return {c: v / total for c, v in parts.items()}


def normalized_latency(result: ServingResult, requests) -> float:
    """Mean over requests of (finish - arrival + 1) / output_len, in steps per token."""
    _, output = request_arrays(requests)                                      # [R]
    return float(((result.finish_step - result.arrival_step + 1) / output).mean())


def latency_curves(requests, rates, *, budget_tokens: int, max_len: int, block_size: int = 16,
                   keys=POLICY_KEYS, seed: int = 0) -> dict[str, np.ndarray]:
    """{policy key: [len(rates)] normalized latency at each arrival rate (requests per step)}."""
    return {k: np.array([normalized_latency(simulate_serving(
        requests, k, budget_tokens=budget_tokens, block_size=block_size, max_len=max_len, arrival_rate=r,
        seed=seed), requests) for r in rates]) for k in keys}


def sustained_rate(rates, latencies, threshold: float) -> float | None:
    """First rate where a latency curve reaches `threshold` (linear between points); None if it never does."""
    r, y = np.asarray(rates, dtype=float), np.asarray(latencies, dtype=float)
    above = np.flatnonzero(y >= threshold)
    if len(above) == 0:
        return None
    i = int(above[0])
    if i == 0:
        return float(r[0])
    return float(r[i - 1] + (threshold - y[i - 1]) * (r[i] - r[i - 1]) / (y[i] - y[i - 1]))
