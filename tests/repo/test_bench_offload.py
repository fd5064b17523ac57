"""benchmarks/bench_offload.py runs end to end in its --smoke mode on a CPU and writes its two results."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_offload_smoke_writes_its_table_and_json(tmp_path):
    done = subprocess.run([sys.executable, "benchmarks/bench_offload.py", "--smoke", "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "bench_offload.json").read_text())
    assert {(r["pinned"], r["direction"]) for r in result["copies"]} == \
        {(True, "save"), (True, "load"), (False, "save"), (False, "load")}
    assert "overlap: decode-like step" in (tmp_path / "bench_offload.txt").read_text()
