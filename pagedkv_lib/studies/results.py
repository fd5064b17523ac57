"""Where the benchmarks' results live, and reading them back: the one module that opens benchmarks/results/.

Each script in benchmarks/ writes its figures as a JSON, and most also a text report with the targets and
whether the run met them, into the folder given by `--out` (by default RESULTS). A GPU run committed there
is what the notebooks, the studies that take measured rates (`swap_or_recompute`) and the tests
read. The plots and tables of `viz` take a loaded result and open no file.

    load(name)          a stored JSON; FileNotFoundError when it is not there
    stored(name)        a stored JSON, or None when that benchmark has not been run and committed yet
    stored_text(name)   a stored text report, or None
    run_live(...)       run one benchmark on this machine's GPU and load what it writes
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]          # the repository: pagedkv_lib/ beside benchmarks/
RESULTS = ROOT / "benchmarks" / "results"


def load(name: str, folder: Path | str = RESULTS) -> dict:
    """The JSON `name` in `folder`, e.g. load("decode_h200.json") or load("first_run/bench_decode.json")."""
    return json.loads((Path(folder) / name).read_text())


def stored(name: str, folder: Path | str = RESULTS) -> dict | None:
    """The JSON `name` in `folder`, or None when that benchmark has not been run and committed yet."""
    path = Path(folder) / name
    if not path.exists():
        return None
    return json.loads(path.read_text())


def stored_text(name: str, folder: Path | str = RESULTS) -> str | None:
    """The text report `name` in `folder` (e.g. "bench_decode.txt"), or None when it is not there."""
    path = Path(folder) / name
    if not path.exists():
        return None
    return path.read_text()


def run_live(script: str, result_name: str, *args: str) -> dict:
    """Run benchmarks/<script> on this machine's GPU (minutes) into a fresh folder; load its `result_name`."""
    out = tempfile.mkdtemp(prefix="pagedkv_bench_")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, str(ROOT / "benchmarks" / script), "--out", out, *args]
    subprocess.run(command, cwd=ROOT, env=env, check=True)
    return load(result_name, out)
