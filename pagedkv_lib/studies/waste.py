"""Where each policy's KV memory goes, in the four categories of the PagedAttention paper's Fig. 2.

Exports: `CATEGORIES`, `Waste`, `waste_at`, `lifetime_waste`, `final_waste`, `waste_shares`,
`waste_breakdown`. Arrays are [R] int64, one entry per request; units are token slots (a snapshot, the final
view) or slot-steps (the lifetime view).

The paper's terms (Kwon et al., SOSP 2023, §3.1 and Fig. 3, p. 4), for one request at one moment:
  token     slots that hold the KV of a token: the prompt and the outputs generated so far ("token states");
  reserved  slots "for future tokens": empty now, filled later by this same request (reservation);
  internal  slots the request will never fill, "due to over-provisioning for potential maximum sequence
            lengths" (internal fragmentation; known only once the request has finished);
  external  slots lost to the allocator, "like the buddy allocator": here the rounding of a chunk to a power
            of two; in a serving run also free memory no waiting request can use (serving.measures).
A request admitted with p prompt tokens generates one token per step for o steps and holds p + k tokens at
step k = 1..o. Two views:
  lifetime  the sum over those o steps (slot-steps): what a snapshot of a busy server sees on average, each
            request weighted by how long it stays (Fig. 2 averages "during the experiment");
  final     the last step only (k = o): every token written, so nothing is reserved any more; notebook 1's
            view, where reserving 4096 slots per request puts tokens in 46.2% of them.
Paging: the last block's empty slots are reserved while the request will still fill them, internal once it
never will (§4.2, p. 5: "The last KV block's unfilled positions are reserved for future generations"); there
is no external fragmentation, since "all blocks have the same size" (§1, p. 2).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pagedkv_lib.core.validation import check_positive_int
from pagedkv_lib.studies.policies import Paged, Reserve, check_lengths
from pagedkv_lib.studies.workload import request_arrays

CATEGORIES = ("token", "reserved", "internal", "external")


@dataclass(frozen=True)
class Waste:
    """Per-request slots (or slot-steps) in each category of the paper, [R] int64 each."""

    token: np.ndarray     # [R] token states
    reserved: np.ndarray  # [R] reservation: empty now, filled later by this request
    internal: np.ndarray  # [R] internal fragmentation: never filled by this request
    external: np.ndarray  # [R] external fragmentation: the allocator's rounding

    @property
    def allocated(self) -> np.ndarray:
        return self.token + self.reserved + self.internal + self.external  # [R]

    def shares(self) -> dict[str, float]:
        """Each category's share of all allocated slots, over all requests (sums to 1)."""
        total = int(self.allocated.sum())
        return {c: float(getattr(self, c).sum() / total) for c in CATEGORIES}


def waste_at(prompt, output, step, policy) -> Waste:
    """The snapshot at `step` k (1 <= k <= output) of each request: Fig. 3's picture."""
    p, o = check_lengths(prompt, output)
    k = np.broadcast_to(np.asarray(step, dtype=np.int64), p.shape)           # [R]
    if ((k < 1) | (k > o)).any():
        raise ValueError(f"step: expected 1 <= step <= output_len, got steps {k.tolist()[:8]} for outputs "
                         f"{o.tolist()[:8]}")
    if isinstance(policy, Reserve):                    # token p + k, reserved (p + o) - (p + k)
        slots, chunk = policy.slots(p, o), policy.chunk(p, o)                 # [R], [R]
        return Waste(p + k, o - k, slots - (p + o), chunk - slots)
    x, last = p + k, p + o                             # [R] tokens held now, at the end
    slack = _paged(policy).allocated(x) - x            # [R] empty slots of the current last block
    in_final_block = policy.allocated(x) == policy.allocated(last)
    internal = np.where(in_final_block, policy.allocated(last) - last, 0)   # [R]
    return Waste(x, slack - internal, internal, np.zeros_like(p))


def _paged(policy) -> Paged:
    if not isinstance(policy, Paged):
        raise TypeError(f"policy: expected a Reserve or a Paged, got {type(policy).__name__}")
    return policy


def _tail_sum(n: np.ndarray, b: int) -> np.ndarray:
    """sum over x = 1..n of (-x) mod b: the empty slots of the last block, summed over lengths 1..n."""
    q, r = n // b, n % b
    return q * (b * (b - 1) // 2) + r * b - r * (r + 1) // 2


def lifetime_waste(prompt, output, policy) -> Waste:
    """Slot-steps summed over each request's o steps (closed forms, equal to summing waste_at over k)."""
    p, o = check_lengths(prompt, output)
    token = o * p + o * (o + 1) // 2                   # [R] sum of p + k over k = 1..o
    if isinstance(policy, Reserve):
        slots, chunk = policy.slots(p, o), policy.chunk(p, o)
        return Waste(token, o * (o - 1) // 2, o * (slots - (p + o)), o * (chunk - slots))
    b, last = _paged(policy).block_size, p + o
    slack = _tail_sum(last, b) - _tail_sum(p, b)       # [R] empty slots summed over lengths p + 1..last
    final_start = b * ((last - 1) // b)                # [R] tokens before the final block
    internal = (policy.allocated(last) - last) * (last - np.maximum(final_start, p))
    return Waste(token, slack - internal, internal, np.zeros_like(p))


def final_waste(prompt, output, policy) -> Waste:
    """Each request at its last token: waste_at(prompt, output, output, policy)."""
    return waste_at(prompt, output, np.asarray(output), policy)


def waste_shares(requests, policy, view: str = "lifetime") -> dict[str, float]:
    """Shares of the `Request`s' KV memory under `policy` in the "lifetime" or "final" view."""
    if view not in ("lifetime", "final"):
        raise ValueError(f"view: expected 'lifetime' or 'final', got {view!r}")
    return (lifetime_waste if view == "lifetime" else final_waste)(*request_arrays(requests), policy).shares()


def waste_breakdown(requests, block_size: int, max_len: int) -> dict[str, Waste]:
    """Notebook 1's two schemes, each request at its last token: {"reserve": max_len slots each, no
    rounding, "paged": whole blocks of block_size}. Both waste only internal fragmentation in this view."""
    check_positive_int("block_size", block_size)
    p, o = request_arrays(requests)
    return {"reserve": final_waste(p, o, Reserve("max", max_len, buddy=False)),
            "paged": final_waste(p, o, Paged(block_size))}
