"""The notebook-1 workload and the memory it wastes, reserving `max_len` per request vs paging.

Exports: `Request`, `make_workload`, `arrival_steps`, `utilization_reserved`, `utilization_paged`,
`Waste`, `waste_breakdown`. Arrays below are [R], one entry per request.

The three wastes of a contiguous KV cache (the PagedAttention paper, section 3): slots reserved for tokens a
request never produces (reservation), the unused tail of the last allocated chunk (internal fragmentation),
and holes between allocations (external fragmentation, see `fragmentation.py`). Paging leaves only the
tail of each request's last block, under `block_size` tokens.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from pagedkv_lib.core.validation import check_positive_int


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


def _total_lens(requests) -> np.ndarray:
    if len(requests) == 0:
        raise ValueError("requests: expected at least one Request, got an empty sequence")
    return np.fromiter((r.total_len for r in requests), dtype=np.int64, count=len(requests))  # [R]


@dataclass(frozen=True)
class Waste:
    """Where one scheme's allocation goes, per request, in token slots: used + internal + reserved_unused."""

    used: np.ndarray             # [R] tokens the request actually holds (prompt + output)
    internal: np.ndarray         # [R] unused tail of the last block (internal fragmentation)
    reserved_unused: np.ndarray  # [R] reserved up to max_len and never used

    @property
    def allocated(self) -> np.ndarray:
        return self.used + self.internal + self.reserved_unused  # [R]

    @property
    def utilization(self) -> float:
        """Used tokens / allocated token slots, over all requests."""
        return float(self.used.sum() / self.allocated.sum())


def waste_breakdown(requests, block_size: int, max_len: int) -> dict[str, Waste]:
    """Per-request waste of both schemes: {"reserve": max_len each, "paged": whole blocks of block_size}."""
    check_positive_int("block_size", block_size)
    check_positive_int("max_len", max_len)
    used = _total_lens(requests)  # [R]
    if used.max() > max_len:
        i = int(used.argmax())
        raise ValueError(f"max_len: expected >= every request's total_len, got {max_len} < {used[i]} "
                         f"(request {i})")
    zeros = np.zeros_like(used)
    tail = -used % block_size  # [R] slots left in the last block
    return {
        "reserve": Waste(used=used, internal=zeros, reserved_unused=max_len - used),
        "paged": Waste(used=used, internal=tail, reserved_unused=zeros.copy()),
    }


def utilization_reserved(requests, max_len: int) -> float:
    """Used tokens / (num_requests x max_len): every request reserves max_len slots up front."""
    return waste_breakdown(requests, 1, max_len)["reserve"].utilization


def utilization_paged(requests, block_size: int) -> float:
    """Used tokens / slots of the ceil(total_len / block_size) blocks each request holds."""
    check_positive_int("block_size", block_size)
    used = _total_lens(requests)  # [R]
    return float(used.sum() / (used + (-used % block_size)).sum())
