"""The GPU figures of notebooks 09 and 10: benchmark results as tables and a roofline picture.

A decode step and a cache write are bound by memory bandwidth, so each method at each shape is one point
(bytes moved, time) against the line time = bytes / copy bandwidth, the copy being measured in the same run.
Reads what `benchmarks/bench_decode.py` and `benchmarks/bench_store_kvcache.py` write (by default the stored
H200 results in benchmarks/results/); every figure is reported as a fraction of that run's copy bandwidth.
Shapes: docs/conventions.md.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from matplotlib.figure import Figure

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
DECODE_METHODS = {                      # name in the JSON -> label, marker, table column
    "triton": ("Triton, split-KV (v2)", "o", "Triton v2"),
    "triton_v1": ("Triton, no split (v1)", "s", "Triton v1"),
    "sdpa_contiguous": ("SDPA, contiguous K/V", "^", "SDPA contig."),
    "gather_sdpa": ("gather, then SDPA", "v", "gather+SDPA"),
    "flex_paged": ("flex_attention, paged", "D", "flex paged"),
}
STORE_METHODS = {"triton": ("Triton store_kvcache", "o", "Triton"),
                 "torch_index_put": ("PyTorch index_put", "^", "PyTorch index")}


def load_results(name: str, folder: Path | str = RESULTS) -> dict:
    """A benchmark's JSON, e.g. load_results("decode_h200.json")."""
    return json.loads((Path(folder) / name).read_text())


def run_live(script: str, result_name: str, *args: str) -> dict:
    """Run benchmarks/<script> on this machine's GPU (minutes) and load the JSON it writes."""
    root = RESULTS.parents[1]
    out = tempfile.mkdtemp(prefix="pagedkv_bench_")
    env = dict(os.environ, PYTHONPATH=str(root))
    command = [sys.executable, str(root / "benchmarks" / script), "--out", out, *args]
    subprocess.run(command, cwd=root, env=env, check=True)
    return load_results(result_name, out)


def decode_points(result: dict) -> list[dict]:
    """One row per (shape, method) that was timed: shape, method, bytes, us, frac_copy."""
    return [dict(shape=f"{r['B']}x{r['L']}", method=name, bytes=r["bytes"], us=m["us"],
                 frac_copy=m["frac_copy"])
            for r in result["shapes"] for name, m in r["methods"].items() if "us" in m]


def store_points(result: dict) -> list[dict]:
    return [dict(shape=f"T={r['T']}", method=name, bytes=r["bytes"], us=m["us"], frac_copy=m["frac_copy"])
            for r in result["tokens"] for name, m in r["methods"].items() if "us" in m]


def decode_table(result: dict) -> str:
    """Per shape: MB read, the floor (bytes / copy), then each method's time and fraction of copy."""
    names = [n for n in DECODE_METHODS if any(n in r["methods"] for r in result["shapes"])]
    head = f"{'B x L, block':>18} {'MB':>6} {'floor us':>8}" + "".join(f" {DECODE_METHODS[n][2]:>16}"
                                                                       for n in names)
    lines = [f"{result['device']}: copy {result['copy_gbs']:.0f} GB/s (read + write) = 100%", head]
    for r in result["shapes"]:
        floor = r["bytes"] / (result["copy_gbs"] * 1e3)              # us
        cells = [_cell(r["methods"].get(n, {})) for n in names]
        lines.append(f"{r['B']:>6} x {r['L']:<5} bs{r['block_size']:<3} {r['bytes'] / 1e6:6.0f} {floor:8.1f}"
                     + "".join(f" {c:>16}" for c in cells))
    return "\n".join(lines)


def store_table(result: dict) -> str:
    """Per token count: bytes moved, then each method's time and fraction of copy."""
    lines = [f"{result['device']}: copy {result['copy_gbs']:.0f} GB/s (read + write) = 100%",
             f"{'T':>6} {'MB':>7}" + "".join(f" {m[2]:>16}" for m in STORE_METHODS.values())]
    for r in result["tokens"]:
        cells = [_cell(r["methods"].get(n, {})) for n in STORE_METHODS]
        lines.append(f"{r['T']:>6} {r['bytes'] / 1e6:7.2f}" + "".join(f" {c:>16}" for c in cells))
    return "\n".join(lines)


def _cell(m: dict) -> str:
    return f"{m['us']:.1f} us {m['frac_copy']:.1%}" if "us" in m else "-"


def plot_roofline(points: list[dict], copy_gbs: float, methods: dict = DECODE_METHODS, ax=None,
                  title: str = "") -> Figure:
    """Time against bytes, both log scale: the copy-bandwidth line, and a marker per method and shape.

    Draws into `ax` when given, else into a new figure that no pyplot window shows; returns the figure.
    """
    if ax is None:
        ax = Figure(figsize=(7.5, 4.2), dpi=80).add_subplot()
    sizes = [p["bytes"] for p in points]
    lo, hi = min(sizes) / 2, max(sizes) * 2
    ax.plot([lo, hi], [lo / (copy_gbs * 1e3), hi / (copy_gbs * 1e3)], color="black", lw=1,
            label=f"copy bandwidth, {copy_gbs:.0f} GB/s")
    for name, (label, marker, _) in methods.items():
        mine = [p for p in points if p["method"] == name]
        if mine:
            ax.scatter([p["bytes"] for p in mine], [p["us"] for p in mine], marker=marker, s=36, label=label,
                       alpha=0.85)
    shapes: dict = {}                                                 # ~bytes -> (bytes, shapes moving them)
    for p in points:
        shapes.setdefault(f"{p['bytes']:.2g}", (p["bytes"], []))[1].append(p["shape"])
    for nbytes, names in shapes.values():
        ax.annotate(", ".join(dict.fromkeys(names)), (nbytes, nbytes / (copy_gbs * 1e3)), xytext=(4, -12),
                    textcoords="offset points", fontsize=7, color="0.3")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("bytes moved per call")
    ax.set_ylabel("time per call (us)")
    ax.set_title(title or "on the line: as fast as a copy; above it: slower", fontsize=9)
    ax.grid(True, which="major", lw=0.3)
    ax.legend(fontsize=7, loc="upper left")
    return ax.figure
