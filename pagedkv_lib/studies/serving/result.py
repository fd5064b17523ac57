"""What a serving simulation returns: per-step series for plots, per-request steps, summary properties.

Exports: `ServingResult`. Arrays are [steps] or [R] (R requests; docs/conventions.md).

The summaries follow the PagedAttention paper where it defines one (Kwon et al., SOSP 2023):
  batched_requests  Fig. 13 (p. 10), "average number of batched requests": here the mean running requests
                    over the steps where some request waits, i.e. while memory, not arrivals, sets the batch;
  saturated_rate    requests finished per step while some request waits: the request rate a policy sustains
                    (run it with every request queued at step 0; the drain at the end is left out).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class ServingResult:
    """Per-step series (for plots) and per-request steps; the summary figures are properties."""

    policy: str                   # "paged", "orca_max", "orca_pow2" or "orca_oracle"
    budget_tokens: int
    block_size: int               # paging's block; 0 for the Orca policies
    max_len: int
    num_running: np.ndarray       # [steps] requests that gained a token in this step
    num_waiting: np.ndarray       # [steps] queued (arrived, not running) after admission
    used_tokens: np.ndarray       # [steps] tokens held by running requests after this step's growth
    allocated_tokens: np.ndarray  # [steps] slots allocated (blocks x block_size, or whole chunks)
    arrival_step: np.ndarray      # [R]
    admit_step: np.ndarray        # [R] first admission
    finish_step: np.ndarray       # [R] step of the last token
    num_preemptions: int
    recomputed_tokens: int        # tokens whose KV was dropped by a preemption and computed again
    preemption: str = "recompute"  # or "swap" (simulation.PREEMPTION_MODES)
    swapped_tokens: int = 0       # tokens whose KV went to host memory and came back
    preempted_lengths: np.ndarray = field(                     # [preemptions] tokens held when preempted
        default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def num_steps(self) -> int:
        return len(self.num_running)

    @property
    def throughput(self) -> float:
        """Generated tokens per step."""
        return float(self.num_running.sum() / self.num_steps)

    @property
    def mean_concurrency(self) -> float:
        return float(self.num_running.mean())

    @property
    def max_concurrency(self) -> int:
        return int(self.num_running.max())

    @property
    def mean_utilization(self) -> float:
        """Used tokens / allocated slots, summed over all steps (1 - this is the waste)."""
        return float(self.used_tokens.sum() / max(int(self.allocated_tokens.sum()), 1))

    @property
    def batched_requests(self) -> float:
        """Mean running requests over the steps where the queue is not empty (all steps if it never is)."""
        busy = self.num_waiting > 0                                               # [steps]
        return float(self.num_running[busy].mean() if busy.any() else self.num_running.mean())

    @property
    def saturated_rate(self) -> float:
        """Requests finished per step up to the last step where some request waits (all steps if none)."""
        busy = np.flatnonzero(self.num_waiting > 0)
        horizon = int(busy[-1]) + 1 if len(busy) else self.num_steps
        return float((self.finish_step < horizon).sum() / horizon)
