"""Exercise 134 (FP8 KV cache) beyond its planted bugs (plants/ex134.py): the solution passes at other
seeds, the cases cover every clause of the contract, and the checks name mistakes no plant can make on this
torch (a cast that turns overflow into NaN, as torch before 2.12 did; a write before the error)."""
from __future__ import annotations

import pickle

import pytest
import torch

from pagedkv_lib.judge import isolation
from pagedkv_lib.judge.cases import diff_free, ex134
from pagedkv_lib.judge.grading import grade
from pagedkv_lib.judge.registry import get


@pytest.mark.parametrize("seed", [1, 2])
def test_134_solution_passes_other_random_cases(seed):
    (result,) = grade(134, [get(134).solution_path], seed=seed, isolation="fork")
    assert result.ok, result.first_failure


def test_134_cases_survive_the_pickle_that_carries_them_into_the_sandbox():
    """torch cannot unpickle a float8 tensor: the caches travel as uint8."""
    cases = ex134.build(0)
    assert diff_free([c.args for c in pickle.loads(pickle.dumps(cases))], [c.args for c in cases])


def test_134_solution_passes_in_the_sandbox_the_cli_uses():
    if isolation.bwrap_path() is None:
        pytest.skip("bwrap is missing or cannot sandbox here (.ci/run installs Debian's bubblewrap)")
    (result,) = grade(134, [get(134).solution_path], isolation="bwrap")
    assert result.ok and result.isolation.startswith("bwrap"), (result.load, result.first_failure)


def test_134_a_seed_reruns_the_same_random_cases_and_another_changes_them():
    a, b, c = ex134.build(5), ex134.build(5), ex134.build(6)
    assert [x.name for x in a] == [x.name for x in b]
    assert diff_free([x.args for x in a], [x.args for x in b])
    assert not diff_free([x.args for x in a], [x.args for x in c])


def test_134_cases_name_every_clause_of_the_contract():
    names = [c.name for c in ex134.build(0)]
    for clause in ("saturation_at_448_times_scale", "slot_minus_one_skipped", "scale_not_1", "fp16_keys",
                   "qkv_slices_not_contiguous", "k_and_v_scales_differ", "tiny_values_subnormal",
                   "x_over_scale_at_rounding_boundaries", "negative_k_scale_raises", "zero_v_scale_raises",
                   "nan_k_scale_raises", "inf_v_scale_raises", "last_partial_block", "block_size_1",
                   "zero_scale_raises", "negative_scale_raises", "nan_scale_raises", "inf_scale_raises"):
        assert any(clause in n for n in names), clause
    store = next(c for c in ex134.build(0) if c.name.endswith("saturation_at_448_times_scale"))
    key, _ = ex134.split_qkv(store.args)
    reach = key.float().abs() / store.args["k_scale"]
    assert float(reach.max()) >= 1000 and bool(((reach > 448) & (reach < 464)).any())


def test_134_the_boundary_case_stores_values_that_dividing_and_the_reciprocal_round_apart():
    """Keys and values of either sign where x / scale and x * (1 / scale) give different bytes: a store by
    the reciprocal cannot pass it, whatever the random cases hold."""
    case = next(c for c in ex134.build(0) if c.name.endswith("x_over_scale_at_rounding_boundaries"))
    for part, scale in zip(ex134.split_qkv(case.args), (case.args["k_scale"], case.args["v_scale"])):
        x = part.float()                                               # [T, H_kv, D]

        def byte(y):
            return y.clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8)

        apart = byte(x / scale) != byte(x * (1 / scale))
        assert int(apart.sum()) >= 20 and bool((x[apart] > 0).any()) and bool((x[apart] < 0).any())
        assert bool((x[apart].abs() / scale > 1).any()) and bool((x[apart].abs() / scale < 2**-6).any())


def _store_observation(case, quantize):
    """What run() returns for a submission that stores `quantize(x, scale)` (plain torch)."""
    def submission(key, value, k_cache, v_cache, slot_mapping, k_scale, v_scale):
        S, H_kv, D = k_cache.shape[1:]
        for t, slot in enumerate(slot_mapping.tolist()):
            if slot >= 0:
                k_cache[slot // S, slot % S] = quantize(key[t], k_scale)
                v_cache[slot // S, slot % S] = quantize(value[t], v_scale)
    return ex134.run({"store_kvcache_fp8": submission}, case)


def test_134_a_cast_that_turns_overflow_into_nan_is_told_to_saturate():
    case = next(c for c in ex134.build(0) if c.name.endswith("saturation_at_448_times_scale"))

    def right(x, s):
        return (x.float() / s).clamp(-448, 448).to(torch.float8_e4m3fn)

    def old_torch(x, s):                                 # torch <= 2.11's eager cast: NaN above 464
        y = x.float() / s
        return torch.where(y.abs() > 464, float("nan"), y.clamp(-448, 448)).to(torch.float8_e4m3fn)

    expected = _store_observation(case, right)
    outcome = ex134.check(case, expected, _store_observation(case, old_torch))
    assert not outcome.passed and "saturate: clamp x / scale to [-448, 448]" in outcome.hint
    assert "(byte 0x7E)" in outcome.message or "(byte 0xFE)" in outcome.message


def test_134_an_error_raised_after_writing_is_wrong():
    case = next(c for c in ex134.build(0) if c.name.endswith("zero_v_scale_raises"))

    def checks_first(*args, **kwargs):
        raise ValueError("v_scale: expected a finite scale > 0, got 0.0")

    def writes_then_checks(key, value, k_cache, v_cache, slot_mapping, k_scale, v_scale):
        k_cache.view(torch.uint8).zero_()
        raise ValueError("v_scale: expected a finite scale > 0, got 0.0")

    expected = ex134.run({"store_kvcache_fp8": checks_first}, case)
    outcome = ex134.check(case, expected, ex134.run({"store_kvcache_fp8": writes_then_checks}, case))
    assert not outcome.passed and "nothing may be written" in outcome.hint
