"""The workloads of the studies: notebook 1's synthetic one and two drawn like the PagedAttention paper's
traces; Poisson arrivals; the share of KV memory that holds tokens, reserving `max_len` vs paging.

Exports: `Request`, `make_workload`, `TraceSpec`, `TRACES`, `WORKLOADS`, `MAX_LEN`, `make_trace`,
`trace_arrays`, `request_arrays`, `arrival_steps`, `utilization_reserved`, `utilization_paged`.
Arrays are [R], one entry per request.

"synthetic" is the course's workload (`make_workload`), served with max_len 4096. "sharegpt" and "alpaca" are
DRAWN (no data set is downloaded) from log-normal lengths fitted to what the paper publishes (Kwon et al.,
SOSP 2023, arXiv:2309.06180v1, page numbers of that PDF):
  - the means of Fig. 11's legend (p. 9): ShareGPT prompt 161.31 and output 337.99 tokens, Alpaca 19.31 and
    58.45 (§6.1, p. 10: "8.4x longer input prompts and 5.8x longer outputs");
  - ShareGPT's output spread, read off Fig. 2 (p. 2): token states / (token states + reservation) is 0.605,
    0.600 and 0.603 for Orca Max, Pow2 and Oracle. Over a request's life that share is
    (mean_p + (s + 1) / 2) / (mean_p + s) with s = E[o^2] / E[o], whatever the policy; 0.6025 gives s = 630,
    a coefficient of variation of 0.93.
Each length is round(lognormal), at least 1: positive and right-skewed like Fig. 11's histograms, with one
shape parameter. A pair is kept if 4 <= prompt <= 1024, output >= 4 and prompt + output <= 2048 (OPT's
maximum length; the filter of vLLM's benchmark scripts, whether the paper used it is not stated). The
ShareGPT prompt spread (sigma 1.0) and both Alpaca spreads (0.6 and 0.8) are ASSUMPTIONS: the paper prints
no variance, only that ShareGPT's lengths vary more. The mu values were solved once, with exact moments on the
length grid, so that the kept pairs have the published means.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from pagedkv_lib.core.validation import check_positive_int

CHUNK = 4096  # pairs drawn per round: fixed, so make_trace(name, n)[:k] == make_trace(name, k)


@dataclass(frozen=True)
class Request:
    """One request of the workload: `prompt_len` tokens in, `output_len` tokens out."""

    prompt_len: int
    output_len: int

    @property
    def total_len(self) -> int:
        return self.prompt_len + self.output_len


def _check_range(name: str, lo_hi) -> tuple[int, int]:
    lo, hi = lo_hi
    check_positive_int(f"{name}[0]", lo)
    check_positive_int(f"{name}[1]", hi)
    if lo > hi:
        raise ValueError(f"{name}: expected (low, high) with low <= high, got {lo_hi!r}")
    return lo, hi


def make_workload(num_requests: int = 200, seed: int = 0, prompt_range: tuple[int, int] = (100, 2000),
                  output_range: tuple[int, int] = (20, 1500)) -> list[Request]:
    """`num_requests` requests drawn with random.Random(seed): prompt then output, randint inclusive.

    With the defaults this is exactly notebook 1's `random.seed(0)` loop.
    """
    check_positive_int("num_requests", num_requests)
    p_lo, p_hi = _check_range("prompt_range", prompt_range)
    o_lo, o_hi = _check_range("output_range", output_range)
    rng = random.Random(seed)
    return [Request(rng.randint(p_lo, p_hi), rng.randint(o_lo, o_hi)) for _ in range(num_requests)]


def arrival_steps(num_requests: int, rate: float | None, seed: int = 0) -> np.ndarray:
    """Step at which each request arrives: all 0 if `rate` is None, else a Poisson process of `rate`
    requests per step (exponential gaps from numpy's default_rng(seed)). Sorted, int64, [R]."""
    check_positive_int("num_requests", num_requests)
    if rate is None:
        return np.zeros(num_requests, dtype=np.int64)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
        raise ValueError(f"rate: expected None or a positive number of requests per step, got {rate!r}")
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=num_requests)  # [R]
    return np.floor(np.cumsum(gaps) - gaps[0]).astype(np.int64)                     # [R], first at 0


@dataclass(frozen=True)
class TraceSpec:
    """Log-normal prompt and output lengths (mu and sigma of ln tokens), the filter, the published means."""

    name: str
    prompt_mu: float
    prompt_sigma: float
    output_mu: float
    output_sigma: float
    paper_mean_prompt: float
    paper_mean_output: float
    source: str
    max_len: int = 2048       # prompt + output <= max_len
    max_prompt: int = 1024
    min_len: int = 4          # prompt and output >= min_len


TRACES: dict[str, TraceSpec] = {
    "sharegpt": TraceSpec(
        name="sharegpt", prompt_mu=4.6888, prompt_sigma=1.0, output_mu=5.4768, output_sigma=0.9462,
        paper_mean_prompt=161.31, paper_mean_output=337.99,
        source="means: Fig. 11a (p. 9); output spread: Fig. 2 (p. 2); prompt spread assumed"),
    "alpaca": TraceSpec(
        name="alpaca", prompt_mu=2.7759, prompt_sigma=0.6, output_mu=3.7473, output_sigma=0.8,
        paper_mean_prompt=19.31, paper_mean_output=58.45,
        source="means: Fig. 11b legend (p. 9); spreads assumed"),
}
WORKLOADS = ("synthetic", "sharegpt", "alpaca")
MAX_LEN = {"synthetic": 4096, "sharegpt": 2048, "alpaca": 2048}  # the max_len each workload is served with


def trace_arrays(name: str, num_requests: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(prompt_len, output_len), int64 [R] each, drawn with numpy's default_rng(seed) in rounds of CHUNK."""
    if name not in TRACES:
        raise ValueError(f"name: expected one of {tuple(TRACES)}, got {name!r}")
    check_positive_int("num_requests", num_requests)
    spec = TRACES[name]
    rng = np.random.default_rng(seed)
    prompts = []
    outputs = []
    kept = 0                                  # requests that passed the filter so far
    while kept < num_requests:
        p = np.maximum(1, np.rint(rng.lognormal(spec.prompt_mu, spec.prompt_sigma, CHUNK))).astype(np.int64)
        o = np.maximum(1, np.rint(rng.lognormal(spec.output_mu, spec.output_sigma, CHUNK))).astype(np.int64)
        ok = (p >= spec.min_len) & (o >= spec.min_len) & (p <= spec.max_prompt) & (p + o <= spec.max_len)
        prompts.append(p[ok])                                                     # [kept this round]
        outputs.append(o[ok])
        kept += int(ok.sum())
    return np.concatenate(prompts)[:num_requests], np.concatenate(outputs)[:num_requests]  # [R] each


def make_trace(name: str = "synthetic", num_requests: int = 200, seed: int = 0) -> list[Request]:
    """`num_requests` Requests of workload `name` (one of WORKLOADS), seeded; "synthetic" is make_workload."""
    if name == "synthetic":
        return make_workload(num_requests, seed)
    prompt, output = trace_arrays(name, num_requests, seed)
    return [Request(p, o) for p, o in zip(prompt.tolist(), output.tolist(), strict=True)]


def request_arrays(requests) -> tuple[np.ndarray, np.ndarray]:
    """(prompt_len, output_len) of `Request`s, int64 [R] each."""
    n = len(requests)
    if n == 0:
        raise ValueError("requests: expected at least one Request, got an empty sequence")
    prompt = np.fromiter((r.prompt_len for r in requests), dtype=np.int64, count=n)  # [R]
    output = np.fromiter((r.output_len for r in requests), dtype=np.int64, count=n)  # [R]
    return prompt, output


def utilization_reserved(requests, max_len: int) -> float:
    """Used tokens / (num_requests x max_len): every request reserves max_len slots up front and is counted
    at its last token (waste.final_waste gives the breakdown)."""
    check_positive_int("max_len", max_len)
    used = sum(request_arrays(requests))  # [R]
    if used.max() > max_len:
        i = int(used.argmax())
        raise ValueError(f"max_len: expected >= every request's total_len, got {max_len} < {used[i]} "
                         f"(request {i})")
    return float(used.sum() / (len(used) * max_len))


def utilization_paged(requests, block_size: int) -> float:
    """Used tokens / slots of the ceil(total_len / block_size) blocks each request holds."""
    check_positive_int("block_size", block_size)
    used = sum(request_arrays(requests))  # [R]
    return float(used.sum() / (used + (-used % block_size)).sum())
