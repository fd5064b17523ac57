"""Exercises 130 and 131, Triton kernels: the solutions pass, the stubs are not implemented, bugs are caught.

Graded on the "cpu" case sets, in Triton's interpreter: a few seconds per submission. The same tests pass on a
GPU machine (the judge runs the submissions' kernels in the interpreter for the "cpu" set there too).
"""
from __future__ import annotations

import ast
import runpy

import pytest
import torch

from pagedkv_lib.judge import judge
from pagedkv_lib.judge.cases import ex130, ex131, kernel_harness
from pagedkv_lib.judge.grading import grade
from pagedkv_lib.judge.outcome import NOT_IMPLEMENTED, WRONG_ANSWER
from pagedkv_lib.judge.registry import get
from pagedkv_lib.judge.stubs import make_stub

CASES = {130: ex130, 131: ex131}


def skip_on_an_old_interpreter(result) -> None:
    """Triton 3.6's interpreter (the GPU image's) with a recent NumPy, or one imported without
    TRITON_INTERPRET=1, cannot run the decode kernels: the judge must say why
    (kernel_harness.INTERPRETER_TROUBLE)
    rather than blame the submission, and the test is skipped."""
    failure = result.first_failure
    if failure is not None and failure.outcome.message.removeprefix("RuntimeError: ") in \
            kernel_harness.INTERPRETER_TROUBLE.values():
        pytest.skip(failure.outcome.message)


# id -> name -> ([(text in the solution, its buggy replacement), ...], words the report must contain)
BUGS = {
    130: {
        "writes_slot_minus_one": ([("    if slot < 0:", "    if slot < -1:")], "slot of -1 must be skipped"),
        "ignores_the_row_stride": ([("token.to(tl.int64) * key_stride", "token.to(tl.int64) * ROW")],
                                   "not t * ROW"),
        "row_not_masked": ([("    mask = offs < ROW ", "    mask = offs < BLOCK ")], "mask the row"),
        "k_and_v_swapped": ([("tl.store(k_cache_ptr + slot * ROW + offs, key,",
                              "tl.store(k_cache_ptr + slot * ROW + offs, value,")], "swapped"),
    },
    131: {
        "gqa_h_mod_h_kv": ([("heads = kv_head * GROUP + offs_g", "heads = offs_g * NUM_KV_HEADS + kv_head")],
                           "h % H_kv"),
        "tail_off_by_one": ([("in_ctx = tok < context_len", "in_ctx = tok <= context_len")], "too many"),
        "follows_the_padding": ([("mask=in_ctx, other=0)", ")"),
                                 ("kv_mask = in_ctx[:, None] & d_mask[None, :]",
                                  "kv_mask = (tok >= 0)[:, None] & d_mask[None, :]")], "NaN"),
        "no_rescale": ([("acc = acc * alpha[:, None] +", "acc = acc +")], "online softmax"),
    },
}


def planted(exercise_id, tmp_path):
    source = get(exercise_id).solution_path.read_text()
    paths = []
    for name, (pairs, _) in BUGS[exercise_id].items():
        text = source
        for good, bad in pairs:
            assert text.count(good) == 1, f"{exercise_id}/{name}: the solution changed: update the bug"
            text = text.replace(good, bad)
        path = tmp_path / f"{exercise_id}_{name}.py"
        path.write_text(text)
        paths.append(path)
    return paths


@pytest.mark.parametrize("exercise_id", [130, 131])
def test_13x_solution_passes_stub_not_implemented_and_planted_bugs_rejected(exercise_id, tmp_path):
    ex = get(exercise_id)
    stub = tmp_path / ex.filename
    stub.write_text(make_stub(ex.solution_path.read_text(), exercise_id))
    bugs = planted(exercise_id, tmp_path)
    solution, practice, *results = grade(exercise_id, [ex.solution_path, stub, *bugs], jobs=2,
                                         isolation="fork")
    skip_on_an_old_interpreter(solution)
    assert solution.ok, (solution.first_failure, solution.load)
    assert practice.verdict == NOT_IMPLEMENTED and practice.passed == 0
    for (name, (_, words)), result in zip(BUGS[exercise_id].items(), results, strict=True):
        failure = result.first_failure
        assert not result.ok and failure is not None, f"the judge missed the planted bug {name}"
        report = f"{failure.outcome.message} {failure.outcome.hint}"
        print(f"{exercise_id}/{name}: {result.passed}/{result.total}, {failure.name}: {report}")
        assert result.verdict == WRONG_ANSWER, (name, failure.outcome)
        assert words in report, (name, report)


@pytest.mark.parametrize("exercise_id", [130, 131])
def test_13x_cpu_cases_run_in_the_interpreter_whatever_the_environment_says_and_bench_needs_a_gpu(
        exercise_id, monkeypatch):
    """TRITON_INTERPRET=0: the "cpu" case set still runs in the interpreter (the judge sets the mode before
    triton's first import, else re-wraps the submission's kernels in the child); --bench asks for a GPU."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    (result,) = grade(exercise_id, [get(exercise_id).solution_path], seed=1, bench=True)
    skip_on_an_old_interpreter(result)
    assert result.ok, result.first_failure
    assert "--device cuda --bench" in result.bench["skipped"]


def test_130_notebook_namespace_with_a_kernel_is_graded(tmp_path, capsys):
    path = tmp_path / "notebook_cells.py"
    path.write_text(get(130).solution_path.read_text())
    namespace = runpy.run_path(str(path))
    result = judge(130, namespace)
    assert result.ok, result.first_failure
    assert "21/21 passed: PASSED" in capsys.readouterr().out


@pytest.mark.parametrize("exercise_id", [130, 131])
def test_13x_cuda_case_sets_hold_together_on_the_cpu_oracle(exercise_id):
    """The GPU's cases (built on the CPU, run natively by the child) are consistent: the oracle, which runs
    in the judge's process on the CPU, passes its own check, and the guards sit around the caches."""
    module, oracle = CASES[exercise_id], get(exercise_id).oracle_namespace()
    cases = module.build(0, "cuda")
    assert len(cases) >= 5 and all(c.args["device"] == "cuda" for c in cases)
    for case in cases:
        k_cache = case.args["k_cache"]
        assert k_cache.is_contiguous() and k_cache.storage_offset() == k_cache[0].numel()
        expected = module.run(oracle, case)
        assert module.check(case, expected, expected).passed, case.name
    sizes = [int(c.args["seq_lens"].max()) if "seq_lens" in c.args else c.args["slot_mapping"].numel()
             for c in cases]                                         # longest context, or tokens stored
    assert max(sizes) >= 4096


@pytest.mark.parametrize("exercise_id", [130, 131])
def test_13x_committed_stub_is_generated_and_keeps_every_signature_and_docstring(exercise_id):
    ex = get(exercise_id)
    stub = ast.parse(make_stub(ex.solution_path.read_text(), exercise_id))
    solution = ast.parse(ex.solution_path.read_text())
    defs = [{n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)} for tree in (stub, solution)]
    assert set(defs[0]) == set(defs[1]) and set(ex.functions) < set(defs[0])
    for name, node in defs[0].items():
        assert ast.get_docstring(node) == ast.get_docstring(defs[1][name])
        assert ast.dump(node.args) == ast.dump(defs[1][name].args)
        assert isinstance(node.body[-1], ast.Raise), name


def test_13x_bench_checks_accept_the_library_kernels_and_reject_wrong_results():
    """The --bench correctness checks (PyTorch indexing; SDPA on the gathered K/V), on small inputs."""
    from pagedkv_lib.kernels import backend, paged_attention_decode_triton, store_kvcache_triton

    device = str(backend.device())                                   # cpu in the interpreter, else cuda
    args, nbytes = ex130.bench_inputs("T=4096", device=device, T=16)
    assert nbytes == 2 * 2 * 16 * 8 * 128 * 2 + 4 * 16
    assert ex130.bench_correct(store_kvcache_triton, args)
    assert not ex130.bench_correct(lambda *a: None, args)
    args, _ = ex131.bench_inputs("B=1 x 4096 tokens", device=device, L=32)
    assert not ex131.bench_correct(lambda q, *a: torch.zeros_like(q), args)
    try:
        assert ex131.bench_correct(paged_attention_decode_triton, args)
    except Exception as exc:                                         # Triton 3.6's interpreter
        if not any(words in str(exc) for words in kernel_harness.INTERPRETER_TROUBLE):
            raise
        pytest.skip(f"this Triton's interpreter cannot run the library's decode kernel: {exc}")
