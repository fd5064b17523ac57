"""The stored outputs of the notebooks are the same on another CPU (slow: nbval on every notebook).

Learners run the notebooks on CPUs other than the one that stored their outputs. PyTorch's CPU kernels
depend on the instruction set (oneDNN's bf16 and AMX paths, ATen's AVX-512 / AVX2 / scalar kernels, whose
float32 sums, bf16 roundings and even `torch.randn` in float32 differ in the last bits) and on the number of
threads (how a sum is split). One machine can play another: oneDNN and ATen held to older instruction sets,
and one thread instead of the build's. nbval then re-runs every notebook and compares each output with the
stored one; a printed figure that moves with the CPU fails here. (Such a
figure is computed in float32/float64 from inputs that do not depend on the CPU, or printed rounded to
what is stable, or asserted in the cell and summarized.)
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
ANOTHER_CPU = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "1"}


@pytest.mark.slow
def test_every_notebook_prints_its_stored_outputs_on_another_cpu():
    notebooks = [str(nb.relative_to(ROOT)) for nb in sorted(NOTEBOOKS.glob("*.ipynb"))]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "--nbval",
               "--nbval-sanitize-with", "notebooks/nbval_sanitize.cfg", *notebooks]
    run = subprocess.run(command, cwd=ROOT, env={**os.environ, **ANOTHER_CPU}, capture_output=True, text=True,
                         timeout=1800)
    assert run.returncode == 0, (f"with {ANOTHER_CPU} these outputs differ from the stored ones:\n"
                                 + run.stdout[-6000:] + run.stderr[-2000:])
