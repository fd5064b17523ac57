"""The Triton exercises' "stored by the kernel" clause (kernel_harness.recording_stores, stored_elements,
written_outside_the_kernel): the record of the interpreter's stores mapped onto an output, the check that
names an element no kernel stored, and the line of a GPU run's report that says only the CPU checks it.

No kernel runs in this process (triton 3.0 runs no forked kernel after the parent ran one): the records are
made of addresses by hand, and the proxy's store is called as the interpreter calls it. The whole path, a
submission that computes in PyTorch after an empty or partial kernel, is in the plants (plants/ex130.py,
ex131.py, ex133.py, ex135.py).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pagedkv_lib.judge.cases import ex130, ex131, ex133, ex135, kernel_harness
from pagedkv_lib.judge.cases.kernel_harness import guarded, stored_elements, written_outside_the_kernel
from pagedkv_lib.judge.registry import get


def addresses(*elements: torch.Tensor) -> np.ndarray:
    """The addresses of 0-dimensional views, as the interpreter's pointers are: uint64."""
    return np.array([e.data_ptr() for e in elements], dtype=np.uint64)


def test_stored_elements_maps_the_addresses_onto_the_view_whole_elements_only():
    out = guarded(torch.zeros(3, 4))                                  # [3, 4] between guard rows
    before_out = out.untyped_storage().data_ptr()                     # the guard row before out
    record = [(addresses(out[1, 2], out[2, 0]), 4),
              (np.array([before_out], dtype=np.uint64), 4),            # outside the view: not out's
              (addresses(out[0, 3]), 2)]                               # half of an element: not stored
    stored = stored_elements(record, out)
    assert stored.shape == (3, 4) and stored.dtype == torch.bool
    assert stored.nonzero().tolist() == [[1, 2], [2, 0]]
    transposed = out.t()                                              # [4, 3], strides (1, 4)
    assert stored_elements(record, transposed).nonzero().tolist() == [[0, 2], [2, 1]]
    assert stored_elements(None, out) is None                         # the oracle: no record
    assert stored_elements(record, "not a tensor") is None


def test_the_recording_proxy_records_the_masked_lanes_and_still_stores():
    """The proxy's store is called as the interpreter's builder calls the native one (pointers, values,
    mask: numpy arrays) and writes through it."""
    from triton.runtime import interpreter

    out = torch.zeros(4)
    ptrs = np.array([out[i].data_ptr() for i in range(4)], dtype=np.uint64)
    values, mask = np.arange(1, 5, dtype=np.float32), np.array([True, False, True, False])
    with kernel_harness.recording_stores() as record:
        interpreter._interpreter.store(ptrs, values, mask)
    assert not isinstance(interpreter._interpreter, kernel_harness._RecordingInterpreter)   # given back
    assert out.tolist() == [1.0, 0.0, 3.0, 0.0]
    assert stored_elements(record, out).tolist() == [True, False, True, False]


class Native:
    """A stand-in for the interpreter's native module: it stores nothing."""

    @staticmethod
    def store(ptrs, values, mask):
        return None


def test_a_mask_of_ints_picks_the_lanes_it_lets_through():
    """Triton 3.0's interpreter hands the store `(offs < ROW) & (slot >= 0)` as int64 0/1: lanes 0 and 2,
    not the elements at indices 1 and 0."""
    out, record = torch.zeros(4), []
    ptrs = np.array([out[i].data_ptr() for i in range(4)], dtype=np.uint64)
    proxy = kernel_harness._RecordingInterpreter(Native, record)
    proxy.store(ptrs, np.zeros(4, dtype=np.float32), np.array([1, 0, 1, 0], dtype=np.int64))
    assert stored_elements(record, out).tolist() == [True, False, True, False]


def test_written_outside_the_kernel_names_the_first_element_no_kernel_stored():
    want = torch.ones(2, 3, dtype=torch.bool)
    mask = want.clone()
    mask[1, 1:] = False
    outcome = written_outside_the_kernel({"stored": {"out": mask}}, {"out": want})
    assert outcome.verdict == "wrong answer"
    assert outcome.message.startswith("out[1, 1] was written outside the kernel: 2 of the 6 elements")
    assert "compute it in the kernel and tl.store it" in outcome.hint
    assert written_outside_the_kernel({"stored": {"out": want}}, {"out": want}) is None
    assert written_outside_the_kernel({"stored": None}, {"out": want}) is None        # natively
    bad = written_outside_the_kernel({"stored": {"out": torch.ones(3)}}, {"out": want})
    assert "not a bool mask of shape [2, 3]" in bad.message


@pytest.mark.parametrize("module, name", [(ex131, "fixed/lengths_around_a_block"),
                                          (ex133, "fixed/course_decode_prefill_chunk")])
def test_attention_checks_refuse_right_values_a_kernel_did_not_store(module, name):
    """Right values in every element, one of them not stored by a kernel: a wrong answer that names it."""
    exercise_id = int(module.__name__[-3:])
    case = next(c for c in module.build(0) if c.name == name)
    expected = module.run(get(exercise_id).oracle_namespace(), case)
    stored = torch.ones(expected["out"].shape, dtype=torch.bool)
    assert module.check(case, expected, dict(expected, launches=1, stored={"out": stored})).passed
    stored[0, 1, 2] = False
    outcome = module.check(case, expected, dict(expected, launches=1, stored={"out": stored}))
    assert outcome.message.startswith("out[0, 1, 2] was written outside the kernel"), outcome


def test_130_wants_the_slots_rows_and_not_the_padding_slots():
    case = next(c for c in ex130.build(0) if c.name == "fixed/minus_one_first_and_last")
    expected = ex130.run(get(130).oracle_namespace(), case)
    wanted = ex130._slot_rows(case)["k_cache"]                        # [N, S, H_kv, D]
    slots = case.args["slot_mapping"].tolist()
    N, S = wanted.shape[:2]
    rows = wanted.reshape(N * S, -1).all(1).nonzero().flatten().tolist()   # rows wanted whole, by slot
    assert rows == sorted(s for s in slots if s >= 0)
    assert int(wanted.sum()) == len(rows) * wanted[0, 0].numel()      # and nothing else
    stored = {"k_cache": wanted.clone(), "v_cache": wanted.clone()}
    assert ex130.check(case, expected, dict(expected, launches=1, stored=stored)).passed
    stored["v_cache"].view(-1)[wanted.view(-1).nonzero()[-1]] = False   # the last element of the last row
    outcome = ex130.check(case, expected, dict(expected, launches=1, stored=stored))
    assert outcome.message.startswith("v_cache[") and "was written outside the kernel" in outcome.message


@pytest.mark.parametrize("exercise_id", [130, 131, 133, 135])
def test_a_gpu_report_says_the_stores_are_checked_on_the_cpu_only(exercise_id):
    from pagedkv_lib.judge import report
    from pagedkv_lib.judge.grading import Result, Submission
    from pagedkv_lib.judge.outcome import Outcome

    def report_on(device: str) -> str:
        result = Result(exercise_id=exercise_id, title="a Triton exercise", submission=Submission("x.py"),
                        seed=0, device=device, mode="fork", isolation="a fork", total=0,
                        load=Outcome("not implemented", "nothing graded"))
        return report.text(result, timing=False)

    line = f"  checked only with --device cpu (in Triton's interpreter): {kernel_harness.STORES_CLAUSE}"
    assert line in report_on("cuda").splitlines()
    assert "--device cpu" not in report_on("cpu")
    assert ex135.CPU_ONLY == kernel_harness.CPU_ONLY
