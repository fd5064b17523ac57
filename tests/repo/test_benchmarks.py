"""Every benchmark script imports on a CPU machine (their GPU work runs only under `main`), and the helpers
they share are where the scripts look for them: a renamed helper fails here, not on a rented GPU."""
from __future__ import annotations

import importlib
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
