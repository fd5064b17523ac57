"""Exercises 130 and 131, Triton kernels: the solutions pass, the stubs are not implemented, bugs are caught.

Graded on the "cpu" case sets, in Triton's interpreter: a few seconds per submission. The same tests pass on a
GPU machine (the judge runs the submissions' kernels in the interpreter for the "cpu" set there too).
"""
from __future__ import annotations

import json
import runpy
import subprocess
import sys

import pytest
import torch
from plants import plant_file
from test_judge_plants import skip_on_an_old_interpreter

from pagedkv_lib.judge import judge
from pagedkv_lib.judge.cases import ex130, ex131, kernel_harness
from pagedkv_lib.judge.cases.attention_cases import LOOP_NEVER_RAN
from pagedkv_lib.judge.grading import grade
from pagedkv_lib.judge.registry import ROOT, get

CASES = {130: ex130, 131: ex131}


@pytest.mark.slow
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
    n = len(ex130.build(0))
    assert f"{n}/{n} passed: PASSED" in capsys.readouterr().out


@pytest.mark.parametrize("exercise_id", [130, 131])
def test_13x_cuda_case_sets_hold_together_on_the_cpu_oracle(exercise_id):
    """The GPU's cases (built on the CPU, run natively by the child) are consistent: the oracle, which runs
    in the judge's process on the CPU, passes its own check, and the guards sit around the caches."""
    module, oracle = CASES[exercise_id], get(exercise_id).oracle_namespace()
    cases = module.build(0, "cuda")
    assert len(cases) >= 5 and all(c.args["device"] == "cuda" for c in cases)
    for case in cases:
        k_cache = case.args["k_cache"]
        if "huge" not in case.args:                                  # made in run: 2**31 elements
            assert k_cache.is_contiguous() and k_cache.storage_offset() == k_cache[0].numel()
        expected = module.run(oracle, case)
        assert module.check(case, expected, expected).passed, case.name
    sizes = [int(c.args["seq_lens"].max()) if "seq_lens" in c.args else c.args["slot_mapping"].numel()
             for c in cases]                                         # longest context, or tokens stored
    assert max(sizes) >= 4096


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


def tl_dot_submission(tmp_path):
    """Exercise 131's solution with tl.dot, BLOCK_G the next power of two >= G as a learner may take it."""
    return plant_file(131, "tl_dot_with_a_group_tile_under_16", tmp_path)


def test_131_tl_dot_under_16_rows_is_refused_on_the_cpu_and_passes_where_a_gpu_compiles_it(tmp_path):
    """NVIDIA's compiler refuses a tl.dot of fewer than 16 rows up to triton 3.4 (G = 4 in the judge's GPU
    cases) and pads M and N itself from 3.5 (K, here 32 and 128, must still be >= 16); the interpreter
    refuses it up to 3.2 only, and the judge's CPU cases apply the course's dot rule (every dimension >= 16)
    whatever the interpreter, so the CPU refuses it, naming the rule; a GPU that compiles it passes it.
    (triton's version is read from its metadata: importing it here, before the judge forks a child for the
    interpreter, would leave that child triton's GPU mode.)"""
    from importlib.metadata import version

    from pagedkv_lib.judge.outcome import Outcome

    class CompilationError(Exception):                               # triton.compiler.errors' words
        pass

    said = ("at 33:12:\n        s = tl.dot(q, tl.trans(k)) * scale\n            ^\n"
            "AssertionError('Input shapes should have M >= 16, N >= 16 and K >= 16')")
    record = Outcome.of_exception(CompilationError(said))
    assert record.verdict == "runtime error" and "at least 16" in record.hint
    assert "max(16, next power of two)" in record.hint
    cases = ex131.build(0, "cuda")
    assert any(c.args["q"].shape[1] // c.args["k_cache"].shape[2] == 4 for c in cases)
    path = tl_dot_submission(tmp_path)
    (cpu,) = grade(131, [path], isolation="fork")
    skip_on_an_old_interpreter(cpu)
    failure = cpu.first_failure
    assert cpu.verdict == "runtime error" and "at least 16" in failure.outcome.hint, failure
    if not torch.cuda.is_available():
        pytest.skip("no CUDA: the GPU half runs on a GPU machine")
    gpu = judge_on_the_gpu(131, path)
    if tuple(int(v) for v in version("triton").split(".")[:2]) >= (3, 5):
        assert gpu["verdict"] == "passed", gpu
    else:
        failure = next(c for c in gpu["cases"] if c["verdict"] != "passed")
        assert gpu["verdict"] == "runtime error" and "at least 16" in failure["hint"], failure


def test_131_a_row_of_one_key_left_nan_is_counted_and_told_its_loop_never_ran():
    """The report counts NaN apart from the max error of the finite elements, and a row that sees one key
    and came out NaN (0 / 0) gets the loop's hint, not the masked loads' one."""
    case = next(c for c in ex131.build(0) if c.name == "fixed/lengths_around_a_block")
    assert int(case.args["seq_lens"][0]) == 1
    expected = ex131.run(get(131).oracle_namespace(), case)
    out = expected["out"].clone()
    out[0] = float("nan")                                            # row 0: context 1
    outcome = ex131.check(case, expected, dict(expected, out=out, launches=1))
    H, D = out.shape[1:]
    assert f"{H * D} of {out.numel()} elements off ({H * D} NaN), max abs error 0 over the finite ones" \
        in outcome.message, outcome.message
    assert outcome.hint == LOOP_NEVER_RAN
    assert "no Triton kernel was launched" in ex131.check(case, expected, dict(expected, launches=0)).message


def test_130_the_cpu_report_names_the_clause_only_the_gpu_cases_check():
    """Offsets past 2**31 elements need a cache the CPU cases cannot hold: the CPU report says in one line
    that only --device cuda checks them (ex130.GPU_ONLY), and a GPU report does not."""
    from pagedkv_lib.judge import report
    from pagedkv_lib.judge.grading import Result, Submission
    from pagedkv_lib.judge.outcome import Outcome

    def report_on(device: str) -> str:
        result = Result(exercise_id=130, title="Triton store_kvcache", submission=Submission("x.py"), seed=0,
                        device=device, mode="fork", isolation="a fork", total=0,
                        load=Outcome("not implemented", "nothing graded"))
        return report.text(result, timing=False)

    line = f"checked only with --device cuda: {ex130.GPU_ONLY[0]}"
    assert "int64" in ex130.GPU_ONLY[0] and report_on("cpu").splitlines()[2] == f"  {line}"
    assert "checked only with --device cuda" not in report_on("cuda")
    assert any(c.name == f"cuda/{ex130.HUGE[0]}" for c in ex130.build(0, "cuda"))


def judge_on_the_gpu(exercise_id: int, *paths):
    """`judge.py ID PATH... --device cuda --json` in a fresh process (earlier tests may have started CUDA in
    this one, and a forked child cannot use it then): the report of one path, or the list of several."""
    argv = [sys.executable, str(ROOT / "judge.py"), str(exercise_id), *map(str, paths), "--device", "cuda",
            "--json", "--no-sandbox"]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


INT32_SLOT = ("    slot = tl.load(slot_mapping_ptr + token).to(tl.int64)           # read 1 index",
              "    slot = tl.load(slot_mapping_ptr + token)")


def test_130_slots_past_2_31_elements_pass_in_int64_and_fail_in_int32_on_a_gpu(tmp_path):
    """The GPU case of 2**31-element caches: the solution (int64 offsets) passes it, the same kernel with
    int32 offsets fails it with the int64 hint (a wrong row, or the illegal address that the wrap makes)."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA: the case of 2**31-element caches runs on a GPU")
    source = get(130).solution_path.read_text()
    assert source.count(INT32_SLOT[0]) == 1
    int32 = tmp_path / "130_int32_offsets.py"
    int32.write_text(source.replace(*INT32_SLOT))
    good, bad = judge_on_the_gpu(130, get(130).solution_path, int32)
    huge = f"cuda/{ex130.HUGE[0]}"
    passed = next(c for c in good["cases"] if c["name"] == huge)
    assert passed["verdict"] == "passed", passed
    failed = next(c for c in bad["cases"] if c["name"] == huge)
    assert failed["verdict"] != "passed" and "int64" in f"{failed['message']} {failed['hint']}", failed


def test_grading_on_the_gpu_in_forks_after_cuda_started_says_to_use_a_fresh_process(monkeypatch):
    """A forked child cannot use CUDA once its parent started it (a notebook that ran a kernel on the GPU):
    the judge says so before it grades, instead of a runtime error in every case."""
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(RuntimeError, match="fresh process"):
        grade(130, [get(130).solution_path], device="cuda", isolation="fork")


@pytest.mark.slow                      # builds the GPU cases on the CPU: long contexts
def test_131_contract_names_the_group_sizes_its_cases_have():
    """The stub tells a learner which G the cases bring (BLOCK_G follows from it): the sizes its CPU and GPU
    cases have at a few seeds, written as the contract writes them."""
    groups = {c.args["q"].shape[1] // c.args["k_cache"].shape[2]
              for device in ("cpu", "cuda") for seed in range(3) for c in ex131.build(seed, device)}
    *first, last = sorted(groups)
    contract = " ".join(get(131).solution_path.read_text().split())
    assert f"G = {', '.join(map(str, first))} and {last}." in contract, sorted(groups)
