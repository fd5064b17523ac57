"""The note of notebook 09 on masks in Triton's interpreter says what this Triton does.

A scalar condition combined with a block of lanes, `(offs < ROW) & (slot >= 0)`, is rejected as a mask
("mask has unsupported dtype"); comparing a block, `(offs < ROW) & (slot + 0 * offs >= 0)`, works and skips
slot -1. If a Triton upgrade accepts the first form, the first test fails: update the note.
"""
from __future__ import annotations

import pytest
import torch

from pagedkv_lib.kernels import backend

pytestmark = pytest.mark.skipif(not backend.is_interpreted(), reason="about Triton's CPU interpreter")

import triton  # noqa: E402  (after pagedkv_lib.kernels chose the interpreter)
import triton.language as tl  # noqa: E402


@triton.jit
def _scalar_and_lanes(src_ptr, dst_ptr, slot_ptr, ROW: tl.constexpr, BLOCK: tl.constexpr):
    t = tl.program_id(0)
    slot = tl.load(slot_ptr + t)
    offs = tl.arange(0, BLOCK)
    mask = (offs < ROW) & (slot >= 0)
    tl.store(dst_ptr + slot * ROW + offs, tl.load(src_ptr + t * ROW + offs, mask=mask), mask=mask)


@triton.jit
def _block_and_lanes(src_ptr, dst_ptr, slot_ptr, ROW: tl.constexpr, BLOCK: tl.constexpr):
    t = tl.program_id(0)
    slot = tl.load(slot_ptr + t)
    offs = tl.arange(0, BLOCK)
    mask = (offs < ROW) & (slot + 0 * offs >= 0)
    tl.store(dst_ptr + slot * ROW + offs, tl.load(src_ptr + t * ROW + offs, mask=mask), mask=mask)


ROW, SLOTS = 5, [2, -1, 0]


def _run(kernel):
    src = torch.arange(len(SLOTS) * ROW, dtype=torch.float32)           # [T * ROW]: token t's row
    buf = torch.full((ROW + 4 * ROW,), float("nan"))                     # a guard row, then 4 cache rows
    kernel[(len(SLOTS),)](src, buf[ROW:], torch.tensor(SLOTS, dtype=torch.int32), ROW=ROW, BLOCK=8)
    return src.view(-1, ROW), buf.view(-1, ROW)


def test_a_scalar_condition_in_a_mask_is_rejected_by_the_interpreter():
    with pytest.raises(Exception, match="mask has unsupported dtype"):
        _run(_scalar_and_lanes)


def test_the_block_comparison_the_note_recommends_works_and_skips_minus_one():
    src, buf = _run(_block_and_lanes)
    guard, cache = buf[0], buf[1:]
    assert guard.isnan().all(), "slot -1 wrote the row before the cache"
    assert torch.equal(cache[2], src[0]) and torch.equal(cache[0], src[2])
    assert cache[1].isnan().all() and cache[3].isnan().all()
