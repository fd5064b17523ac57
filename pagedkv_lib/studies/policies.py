"""The PagedAttention paper's three ways to reserve KV memory, and paging, as small named objects.

Exports: `Reserve`, `Paged`, `make_policy`, `POLICY_KEYS`, `LABELS`, `next_pow2`, `check_lengths`.
Arrays are [R] int64, one entry per request; lengths and sizes are in token slots.

The paper's baselines (Kwon et al., SOSP 2023, §6.1, p. 10) are one system, Orca, with three ways to size the
ONE contiguous chunk a request gets when it is admitted:
  Orca (Max)     "always reserves the space up to the maximum sequence length of the model, i.e., 2048";
  Orca (Pow2)    "over-reserves the space for outputs by at most 2x. For example, if the true output length
                 is 25, it reserves 32 positions for outputs": prompt + next_pow2(output), capped at max_len;
  Orca (Oracle)  knows the output length: prompt + output exactly ("infeasible to achieve in practice").
"We assume Orca uses the buddy allocation algorithm" (same page): the allocator hands out power-of-two chunks,
so a request of 600 slots occupies 1024. The paper counts that rounding as external fragmentation ("external
fragmentation from the memory allocator like the buddy allocator", §3.1, p. 4). `Reserve(..., buddy=False)`
is the plain reservation of notebook 1 (`max_len` slots, no rounding). `Paged` is vLLM: ceil(length /
block_size) blocks, taken as the request grows.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pagedkv_lib.core.validation import check_positive_int
from pagedkv_lib.studies.buddy_allocator import BuddyAllocator

POLICY_KEYS = ("orca_max", "orca_pow2", "orca_oracle", "paged")
LABELS = {"orca_max": "Orca (Max)", "orca_pow2": "Orca (Pow2)", "orca_oracle": "Orca (Oracle)",
          "paged": "vLLM (paged)"}


def next_pow2(x) -> np.ndarray:
    """Smallest power of two >= x, element-wise, for ints >= 1 (int64 [R]); next_pow2(25) == 32."""
    v = np.asarray(x, dtype=np.int64) - 1                                # [R]
    for shift in (1, 2, 4, 8, 16, 32):
        v |= v >> shift
    return v + 1


def check_lengths(prompt, output) -> tuple[np.ndarray, np.ndarray]:
    """(prompt, output) as int64 [R] arrays of one shape, every length >= 1."""
    p, o = np.asarray(prompt, dtype=np.int64), np.asarray(output, dtype=np.int64)  # [R], [R]
    if p.shape != o.shape or p.ndim != 1:
        raise ValueError(f"prompt, output: expected two 1-d arrays of one shape, got {p.shape} and {o.shape}")
    if len(p) and (p.min() < 1 or o.min() < 1):
        raise ValueError(f"prompt, output: expected lengths >= 1, got min {p.min()} and {o.min()}")
    return p, o


@dataclass(frozen=True)
class Reserve:
    """An Orca variant: `kind` "max", "pow2" or "oracle"; one chunk per request, sized at admission."""

    kind: str
    max_len: int = 2048
    buddy: bool = True  # chunk = next_pow2(reserved slots), as a buddy allocator hands it out

    def __post_init__(self):
        if self.kind not in ("max", "pow2", "oracle"):
            raise ValueError(f"kind: expected 'max', 'pow2' or 'oracle', got {self.kind!r}")
        check_positive_int("max_len", self.max_len)

    @property
    def key(self) -> str:
        return f"orca_{self.kind}"

    @property
    def label(self) -> str:
        return LABELS[self.key]

    def slots(self, prompt, output) -> np.ndarray:
        """[R] slots asked for: max_len; prompt + next_pow2(output), at most max_len; prompt + output."""
        p, o = check_lengths(prompt, output)
        if len(p) and (p + o).max() > self.max_len:
            i = int((p + o).argmax())
            raise ValueError(f"max_len: expected >= every prompt + output, got {self.max_len} < "
                             f"{p[i] + o[i]} (request {i})")
        if self.kind == "max":
            return np.full_like(p, self.max_len)
        if self.kind == "pow2":
            return np.minimum(p + next_pow2(o), self.max_len)
        return p + o

    def chunk(self, prompt, output) -> np.ndarray:
        """[R] slots the request occupies: the buddy allocator's power of two, or `slots` without it."""
        r = self.slots(prompt, output)
        return next_pow2(r) if self.buddy else r

    def fit(self, prompt, output, budget_tokens: int) -> int:
        """How many of the requests, first ones first, hold their chunks at once in `budget_tokens` slots
        (a BuddyAllocator places them; without buddy, the chunks are laid end to end)."""
        check_positive_int("budget_tokens", budget_tokens)
        chunk = self.chunk(prompt, output)                                  # [R]
        if not self.buddy:
            return int(np.searchsorted(np.cumsum(chunk), budget_tokens, side="right"))
        alloc = BuddyAllocator(budget_tokens)
        return next((i for i, c in enumerate(chunk.tolist()) if alloc.alloc(c) is None), len(chunk))


@dataclass(frozen=True)
class Paged:
    """vLLM: ceil(length / block_size) blocks of block_size slots, taken as the request grows."""

    block_size: int = 16
    key = "paged"

    def __post_init__(self):
        check_positive_int("block_size", self.block_size)

    @property
    def label(self) -> str:
        return f"vLLM (paged, block {self.block_size})"

    def allocated(self, length) -> np.ndarray:
        """[R] slots held by requests of `length` tokens: whole blocks."""
        n = np.asarray(length, dtype=np.int64)                              # [R]
        return -(-n // self.block_size) * self.block_size

    def fit(self, prompt, output, budget_tokens: int) -> int:
        """How many of the requests, first ones first, hold the blocks of their final length at once."""
        check_positive_int("budget_tokens", budget_tokens)
        p, o = check_lengths(prompt, output)
        return int(np.searchsorted(np.cumsum(self.allocated(p + o)), budget_tokens, side="right"))


def make_policy(key: str, *, max_len: int = 2048, block_size: int = 16, buddy: bool = True):
    """"orca_max" | "orca_pow2" | "orca_oracle" -> Reserve(kind, max_len, buddy); "paged" ->
    Paged(block_size)."""
    if key == "paged":
        return Paged(block_size)
    if key not in POLICY_KEYS:
        raise ValueError(f"key: expected one of {POLICY_KEYS}, got {key!r}")
    return Reserve(key.removeprefix("orca_"), max_len, buddy)
