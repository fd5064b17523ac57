"""A kernel's store outside the tensors it may write fails the case that made it, names the tensor and the
offsets, and the next case runs in a fresh child (in Triton's interpreter such a store can corrupt the
child's heap, and a later, correct case would then be blamed)."""
from __future__ import annotations

import pytest
import torch
from plants import plant_file

from pagedkv_lib.judge.cases.kernel_harness import guarded, wild_writes
from pagedkv_lib.judge.grading import grade
from pagedkv_lib.judge.outcome import PASSED, WRONG_ANSWER


def test_wild_writes_names_the_tensor_and_the_offsets_on_each_side():
    out = guarded(torch.full((3, 4), float("nan")))                  # [3, 4] between two NaN rows
    assert wild_writes("out", out) == []
    storage = torch.empty(0).set_(out.untyped_storage())              # [20]: guard, out, guard
    storage[3] = 1.0                                                  # offset -1
    storage[16:18] = 2.0                                              # offsets 12 and 13
    assert wild_writes("out", out) == [
        "out (shape [3, 4], 12 elements: offsets 0..11): 1 element(s) written before its first element, "
        "at offset -1",
        "out (shape [3, 4], 12 elements: offsets 0..11): 2 element(s) written after its last element, at "
        "offsets 12..13"]


@pytest.mark.slow
def test_a_store_before_out_fails_its_case_and_later_correct_cases_pass_in_a_fresh_child(tmp_path):
    """Plant 135/gather_stores_at_the_index writes row -1 of out (before it) where index holds -1: that case
    fails with the offsets, and the scale_columns cases after it, correct, pass."""
    result, = grade(135, [plant_file(135, "gather_stores_at_the_index", tmp_path)], isolation="fork")
    first = result.first_failure
    assert first.name == "fixed/gather/worked_example" and first.verdict == WRONG_ANSWER, first
    assert "out (shape [3, 3], 9 elements: offsets 0..8): 3 element(s) written before its first element, " \
           "at offsets -3..-1" in first.outcome.message
    later = [c for c in result.cases if c.name.startswith("fixed/scale/")]
    assert later and all(c.verdict == PASSED for c in later), [(c.name, c.outcome) for c in later]


@pytest.mark.slow
def test_a_store_past_the_end_of_a_cache_fails_its_case_and_the_next_case_passes(tmp_path):
    """Plant 130/row_not_masked stores one element past the last slot's row in row_of_15_ends_the_cache
    only: that case fails, naming k_cache and offset 180, and the case after it passes."""
    result, = grade(130, [plant_file(130, "row_not_masked", tmp_path)], isolation="fork")
    names = [c.name for c in result.cases]
    wild = result.cases[names.index("fixed/row_of_15_ends_the_cache")]
    assert wild.verdict == WRONG_ANSWER and "k_cache (shape [3, 4, 3, 5], 180 elements: offsets 0..179): " \
        "1 element(s) written after its last element, at offset 180" in wild.outcome.message, wild.outcome
    after = result.cases[names.index("fixed/row_of_15_ends_the_cache") + 1]
    assert after.verdict == PASSED, (after.name, after.outcome)
