"""Every benchmark script imports on a CPU machine (their GPU work runs only under `main`), and the helpers
they share are where the scripts look for them: a renamed helper fails here, not on a rented GPU."""
from __future__ import annotations

import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
MODULES = sorted(p.stem for p in BENCHMARKS.glob("*.py"))
SHARED = {"gpu_harness", "attention_workloads"}          # helpers the scripts import, not scripts
SCRIPTS = [m for m in MODULES if m not in SHARED]


@pytest.mark.parametrize("name", MODULES)
def test_benchmark_script_imports(name, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    for cached in [m for m in sys.modules if m in MODULES]:
        monkeypatch.delitem(sys.modules, cached)
    module = importlib.import_module(name)
    if name not in SHARED:
        assert callable(getattr(module, "main", None)), f"benchmarks/{name}.py has no main()"


def test_bench_cascade_smoke_runs_end_to_end_and_checks_every_method(tmp_path):
    """bench_cascade.py --smoke (tiny shapes, the interpreter): every method runs, agrees with the fp32
    reference, and the table and JSON are written; the cascade's bytes count the prefix once; FlashInfer's
    row, without FlashInfer, says "not installed" in the JSON and the table; --suffix sets the own tokens."""
    import json
    import os
    import subprocess

    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(BENCHMARKS.parent))
    subprocess.run([sys.executable, "bench_cascade.py", "--smoke", "--suffix", "7", "--out", str(tmp_path)],
                   cwd=BENCHMARKS, env=env, check=True, capture_output=True, timeout=300)
    result = json.loads((tmp_path / "bench_cascade.json").read_text())
    (row,) = result["shapes"]
    assert result["shape"]["suffix"] == row["suffix"] == 7
    methods = row["methods"]
    assert set(methods) == {"cascade", "cascade_m32_n16_w4_s2", "paged_v3", "sdpa", "flashinfer_cascade"}
    assert row["best_cascade_config"] == "cascade_m32_n16_w4_s2"      # the only alternative timed
    ours = {k: m for k, m in methods.items() if k != "flashinfer_cascade"}
    assert all(m["rel_err"] < 1e-5 and m["us"] > 0 for m in ours.values()), methods
    assert methods["cascade"]["bytes"] < methods["paged_v3"]["bytes"] == methods["sdpa"]["bytes"]
    text = (tmp_path / "bench_cascade.txt").read_text()
    assert "cascade" in text
    if importlib.util.find_spec("flashinfer") is None:                # the optional baseline's row says so
        assert "not installed" in methods["flashinfer_cascade"]["error"]
        assert any("flashinfer_cascade" in line and "not installed" in line for line in text.splitlines())


@pytest.mark.parametrize("kind", ["decode", "prefill"])
def test_profile_kernels_runs_each_kernel_it_names(kind):
    """profile_kernels.py launches the kernel a profiler is pointed at (the interpreter's tiny shapes on a
    CPU): a renamed launcher or shape fails here, not under ncu on a rented GPU."""
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(BENCHMARKS.parent))
    done = subprocess.run([sys.executable, "profile_kernels.py", kind], cwd=BENCHMARKS, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("out finite True"), done.stdout


def test_bench_engine_gpu_smoke_runs_every_mode_and_traces_the_timeline(monkeypatch, tmp_path):
    """bench_engine_gpu.py --smoke on a CPU: the three modes, the same greedy tokens in each, and a timeline
    whose overlapped steps launch step t+1 before they read step t (what notebook 14 draws)."""
    import json

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    for cached in [m for m in sys.modules if m in MODULES]:
        monkeypatch.delitem(sys.modules, cached)
    bench = importlib.import_module("bench_engine_gpu")
    monkeypatch.setattr(sys, "argv", ["bench_engine_gpu.py", "--smoke", "--out", str(tmp_path)])
    bench.main()
    result = json.loads((tmp_path / "bench_engine.json").read_text())
    assert set(result["modes"]) == {"eager", "graphed", "overlap"}
    for per_mode in result["tokens_equal"].values():
        assert all(v.split("/")[0] == v.split("/")[1].split()[0] for v in per_mode.values()), per_mode
    host = [s for s in result["timeline"]["overlap"] if s["lane"] == "host"]
    first = {}
    for i, s in enumerate(host):
        first.setdefault((s["phase"], s["step"]), i)
    read_steps = [step for phase, step in first if phase == "read" and ("launch", step + 1) in first]
    assert read_steps and all(first[("launch", t + 1)] < first[("read", t)] for t in read_steps)
    assert "overlap" in (tmp_path / "bench_engine.txt").read_text()


@pytest.mark.slow
def test_bench_mla_smoke_times_both_kernels_and_names_a_missing_flashinfer(tmp_path):
    """bench_mla.py --smoke (the interpreter): the teaching and the tuned kernel (TMA and pointers) agree with
    the reference, the table shows each one's fastest config, and FlashInfer's fa2/fa3 rows say "not
    installed" where FlashInfer is not there."""
    import json
    import os
    import subprocess

    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(BENCHMARKS.parent))
    subprocess.run([sys.executable, "bench_mla.py", "--smoke", "--out", str(tmp_path)], cwd=BENCHMARKS,
                   env=env, check=True, capture_output=True, timeout=300)
    (row,) = json.loads((tmp_path / "bench_mla.json").read_text())["shapes"]
    tuned = [k for k in row["configs"] if k.startswith("tuned")]
    assert any(k.endswith("-tma") for k in tuned) and any(not k.endswith("-tma") for k in tuned)
    assert all(e["rel_err"] < 1e-2 for e in row["configs"].values()), row["configs"]
    assert row["best_tuned"] in tuned and row["best_teaching"] in row["configs"]
    text = (tmp_path / "bench_mla.txt").read_text()
    assert row["best_tuned"] in text and row["best_teaching"] in text
    if importlib.util.find_spec("flashinfer") is None:
        for name in ("flashinfer_fa2", "flashinfer_fa3"):
            assert "not installed" in row[name]["error"]
            assert any(name in line and "not installed" in line for line in text.splitlines())


@pytest.mark.slow
def test_kernel_sass_compiles_a_kernel_for_hopper_without_a_gpu(tmp_path):
    """kernel_sass.py (what shows that a shared helper leaves the machine code alone): the decode kernel at
    the chooser's tiles compiles for sm_90a here, with its registers, stack and SASS, twice to one hash, even
    where the environment asks for the interpreter."""
    lines = []
    for out in (tmp_path / "a", tmp_path / "b"):
        command = [sys.executable, str(BENCHMARKS / "kernel_sass.py"), "decode_v1", "--sass", str(out)]
        run = subprocess.run(command, capture_output=True, text=True, timeout=300,
                             env={**os.environ, "TRITON_INTERPRET": "1"})
        assert run.returncode == 0, run.stderr[-3000:]
        lines.append(run.stdout.strip())
    assert lines[0] == lines[1], lines
    usage = r"REG:\d+ STACK:\d+ SHARED:\d+ LOCAL:\d+"
    assert re.fullmatch(rf"decode_v1 +{usage} +sass [0-9a-f]{{16}}", lines[0]), lines
    sass = (tmp_path / "a" / "decode_v1.sass").read_text()
    assert "HMMA" in sass and "EXIT" in sass                          # tensor-core dots, a whole kernel
    # compiled as the JIT compiles it for aligned tensors: K/V rows in 16-byte copies, nothing spilled (with
    # unknown alignment the compiler loads them 2 bytes at a time and spills: code no GPU here runs)
    assert "LDGSTS.E.BYPASS.128" in sass and "LDG.E.U16" not in sass, "K/V loads not vectorised"
    assert " STACK:0 " in lines[0], lines
