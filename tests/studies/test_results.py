"""pagedkv_lib.studies.results: the benchmarks' folder is the one the scripts write into by default, a stored
result reads back as written, and an absent one is None (or FileNotFoundError when the caller needs it)."""
from __future__ import annotations

import json
import re

import pytest

from pagedkv_lib.studies import results


def test_results_is_the_folder_the_benchmarks_write_into():
    assert results.RESULTS == results.ROOT / "benchmarks" / "results" and results.RESULTS.is_dir()
    scripts = sorted((results.ROOT / "benchmarks").glob("bench_*.py"))
    defaults = {m for p in scripts for m in re.findall(r'"--out", default="([^"]+)"', p.read_text())}
    assert defaults == {str(results.RESULTS.relative_to(results.ROOT))}


def test_a_stored_result_reads_back_and_an_absent_one_is_none(tmp_path):
    run = {"device": "test GPU", "shapes": [{"B": 1, "us": 2.5}]}
    (tmp_path / "run.json").write_text(json.dumps(run))
    (tmp_path / "run.txt").write_text("targets (same run):\n64x4096 met\n")
    assert results.load("run.json", tmp_path) == run == results.stored("run.json", tmp_path)
    assert results.stored_text("run.txt", tmp_path) == "targets (same run):\n64x4096 met\n"
    assert results.stored("absent.json", tmp_path) is None
    assert results.stored_text("absent.txt", tmp_path) is None
    with pytest.raises(FileNotFoundError, match="absent.json"):
        results.load("absent.json", tmp_path)


def test_the_committed_runs_the_notebooks_read_are_there():
    for name in ("decode_h200.json", "bench_decode.json", "bench_prefill.json", "store_kvcache_h200.json"):
        assert results.stored(name)["shapes" if "store" not in name else "tokens"]
