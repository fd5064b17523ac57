"""Two tiny store kernels that differ only in how they skip slot -1, and a probe of which of them this
Triton's interpreter runs. Shared by test_triton_mask_note.py (the note of notebook 10) and
test_judge_plants.py (the plant of exercise 130 that folds the -1 test into the mask).

No `from __future__ import annotations` here: triton < 3.4 needs real `tl.constexpr` annotations.
"""
import functools

import torch

from pagedkv_lib.kernels import backend

backend.configure()                       # the interpreter or the GPU, chosen before triton is first imported

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

SCALAR_MASK_ERROR = "mask has unsupported dtype"
ROW, SLOTS = 5, [2, -1, 0]


@triton.jit
def scalar_and_lanes(src_ptr, dst_ptr, slot_ptr, ROW: tl.constexpr, BLOCK: tl.constexpr):
    t = tl.program_id(0)
    slot = tl.load(slot_ptr + t)
    offs = tl.arange(0, BLOCK)
    mask = (offs < ROW) & (slot >= 0)                          # a scalar test and a block of lanes
    tl.store(dst_ptr + slot * ROW + offs, tl.load(src_ptr + t * ROW + offs, mask=mask), mask=mask)


@triton.jit
def block_and_lanes(src_ptr, dst_ptr, slot_ptr, ROW: tl.constexpr, BLOCK: tl.constexpr):
    t = tl.program_id(0)
    slot = tl.load(slot_ptr + t)
    offs = tl.arange(0, BLOCK)
    mask = (offs < ROW) & (slot + 0 * offs >= 0)               # two blocks
    tl.store(dst_ptr + slot * ROW + offs, tl.load(src_ptr + t * ROW + offs, mask=mask), mask=mask)


def run(kernel):
    """(src [T, ROW], buffer [1 + 4, ROW]): row 0 of the buffer guards the row before the cache."""
    src = torch.arange(len(SLOTS) * ROW, dtype=torch.float32)
    buf = torch.full((ROW + 4 * ROW,), float("nan"))
    kernel[(len(SLOTS),)](src, buf[ROW:], torch.tensor(SLOTS, dtype=torch.int32), ROW=ROW, BLOCK=8)
    return src.view(-1, ROW), buf.view(-1, ROW)


def stored_right(src, buf) -> bool:
    """Tokens 0 and 2 in slots 2 and 0; slot -1 (token 1) wrote nothing, not even the guard row."""
    guard, cache = buf[0], buf[1:]
    return bool(guard.isnan().all() and torch.equal(cache[2], src[0]) and torch.equal(cache[0], src[2])
                and cache[1].isnan().all() and cache[3].isnan().all())


@functools.cache
def interpreter_rejects_a_scalar_in_a_mask() -> bool:
    """True where this Triton's interpreter refuses `(offs < ROW) & (slot >= 0)` as a mask (3.9 does, 3.0
    does not); False natively on a GPU, where the form is valid."""
    if not backend.is_interpreted():
        return False
    try:
        run(scalar_and_lanes)
    except Exception as exc:                                  # the interpreter wraps it in its own error
        if SCALAR_MASK_ERROR in str(exc):
            return True
        raise
    return False
