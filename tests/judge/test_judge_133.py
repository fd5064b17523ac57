"""Exercise 133, the Triton paged prefill: the GPU case set holds together, the stub keeps the contract, the
benchmark's checks work; the solution, the stub and the planted bugs are in test_judge_plants.py.

Graded on the "cpu" case set, in Triton's interpreter. The same tests pass on a GPU machine.
"""

import sys

import pytest
from test_judge_plants import skip_on_an_old_interpreter

from pagedkv_lib.judge.cases import ex133, kernel_harness
from pagedkv_lib.judge.grading import grade
from pagedkv_lib.judge.registry import get


@pytest.mark.slow
def test_133_cpu_cases_run_in_the_interpreter_and_bench_needs_a_gpu(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    (result,) = grade(133, [get(133).solution_path], seed=1, bench=True)
    skip_on_an_old_interpreter(result)
    assert result.ok, result.first_failure
    assert "--device cuda --bench" in result.bench["skipped"]


@pytest.mark.slow
def test_133_cuda_case_set_holds_together_on_the_cpu_oracle():
    """The GPU's cases (built on the CPU, run natively by the child) are consistent: the oracle passes its
    own check, guards sit around the caches and around out, and there are long contexts and decode rows."""
    oracle = get(133).oracle_namespace()
    cases = ex133.build(0, "cuda")
    assert len(cases) >= 5 and all(c.args["device"] == "cuda" for c in cases)
    for case in cases:
        k_cache, tables = case.args["k_cache"], case.args["block_tables"]
        assert k_cache.is_contiguous() and k_cache.storage_offset() == k_cache[0].numel()
        assert tables.stride(0) > tables.shape[1]                    # rows further apart than M
        expected = ex133.run(oracle, case)
        assert expected["wild_writes"] == [] and expected["returned_out"] is True
        assert ex133.check(case, expected, expected).passed, case.name
    assert max(int(c.args["seq_lens"].max()) for c in cases) >= 4096
    q_lens = [int(n) for c in cases for n in c.args["cu_seqlens_q"].diff()]
    assert 1 in q_lens and max(q_lens) >= 1024
    assert any(c.args.get("sums") for c in cases)


def test_133_check_names_a_write_outside_out_and_a_new_tensor_returned():
    case = ex133.build(0, "cpu")[0]
    expected = ex133.run(get(133).oracle_namespace(), case)
    spilled = dict(expected, wild_writes=["out (shape [1, 1, 1], 1 elements: offsets 0..0): 1 element(s) "
                                          "written after its last element, at offset 1"])
    outcome = ex133.check(case, expected, spilled)
    assert "memory outside the output was written: out" in outcome.message and "q_len" in outcome.hint
    fresh_tensor = dict(expected, returned_out=False)
    assert "did not return out" in ex133.check(case, expected, fresh_tensor).message


@pytest.mark.slow
def test_133_bench_checks_accept_the_library_kernel_and_reject_wrong_results(monkeypatch):
    """The --bench correctness check on small inputs, without the oracle's module (a sandboxed child has
    none: importing it fails), and the FLOP count."""
    from pagedkv_lib.kernels import backend
    from pagedkv_lib.kernels.triton_prefill_attention import paged_attention_varlen_triton

    monkeypatch.setitem(sys.modules, "pagedkv_lib.core.paged_attention", None)
    assert ex133.flops("cold 4 x 2048") == 4 * 128 * 32 * 4 * (2048 * 2049 // 2)
    args, nbytes = ex133.bench_inputs("decode rows beside prefills", device=str(backend.device()),
                                      scale_down=128)
    assert nbytes > 0 and args[0].shape[0] == 16 + 8 + 32             # two prefills, 32 decode rows
    assert not ex133.bench_correct(lambda q, *a: a[-1].zero_(), args)
    try:
        assert ex133.bench_correct(lambda *a: paged_attention_varlen_triton(*a[:-1]), args)
    except Exception as exc:                                         # Triton 3.6's interpreter
        if not any(words in str(exc) for words in kernel_harness.INTERPRETER_TROUBLE):
            raise
        pytest.skip(f"this Triton's interpreter cannot run the library's prefill kernel: {exc}")
