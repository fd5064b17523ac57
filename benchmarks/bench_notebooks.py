"""How long the course takes on this machine: every notebook top to bottom, and every slider callback.

    python benchmarks/bench_notebooks.py                 # notebooks and callbacks
    python benchmarks/bench_notebooks.py --no-notebooks  # callbacks only (seconds, not minutes)
    python benchmarks/bench_notebooks.py 01 03           # only notebooks whose names start with these
    python benchmarks/bench_notebooks.py --json out.json # also write the timings and failures as JSON

Notebooks run in a fresh kernel each through nbclient, as `notebooks/build.py` runs them (targets: 30 s each
on a laptop CPU). Callbacks are discovered generically: every module of `pagedkv_lib.viz` that defines
`BENCH_CALLBACKS = {name: zero-argument callable}` is imported and each callable (one slider move: compute
and redraw) is called once to warm up, then `--repeat` times; the median is printed (target: 100 ms).
Prints only; asserts nothing.
"""
from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def bench_notebooks(prefixes: list[str]) -> list[dict]:
    import nbformat
    from nbclient import NotebookClient

    paths = [p for p in sorted(NOTEBOOKS.glob("*.ipynb"))
             if not prefixes or p.stem.startswith(tuple(prefixes))]
    print(f"notebooks ({len(paths)}), top to bottom in a fresh kernel:")
    total, rows = 0.0, []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        start = time.perf_counter()
        try:
            NotebookClient(nb, timeout=600, kernel_name="python3",
                           resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
            status = ""
        except Exception as err:  # report and go on: a benchmark, not a test
            status = f"  FAILED: {type(err).__name__}: {str(err).splitlines()[0][:100]}"
        seconds = time.perf_counter() - start
        total += seconds
        rows.append({"notebook": path.stem, "seconds": round(seconds, 2), "error": status.strip()})
        print(f"  {path.stem:32s} {seconds:6.1f} s{status}", flush=True)
    print(f"  {'total':32s} {total:6.1f} s")
    return rows


def viz_callbacks() -> dict:
    """{"module.name": callable} from every pagedkv_lib.viz module that defines BENCH_CALLBACKS."""
    import pagedkv_lib.viz as viz

    found = {}
    for info in pkgutil.iter_modules(viz.__path__):
        module = importlib.import_module(f"pagedkv_lib.viz.{info.name}")
        for name, call in getattr(module, "BENCH_CALLBACKS", {}).items():
            found[name if name.startswith(info.name) else f"{info.name}.{name}"] = call
    return found


def bench_callbacks(repeat: int) -> None:
    os.environ.setdefault("MPLBACKEND", "Agg")
    callbacks = viz_callbacks()
    print(f"slider callbacks ({len(callbacks)}), {repeat} calls after one warm-up; wall time, and the CPU"
          " time of this process (wall minus waiting for a busy core):")
    for name, call in sorted(callbacks.items()):
        call()
        wall, cpu = [], []
        for _ in range(repeat):
            start, start_cpu = time.perf_counter(), time.process_time()
            call()
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        ms = {k: 1e3 * v for k, v in (("wall", statistics.median(wall)), ("max", max(wall)),
                                       ("cpu", statistics.median(cpu)))}
        print(f"  {name:42s} wall median {ms['wall']:6.1f} ms, max {ms['max']:6.1f} ms"
              f" | cpu median {ms['cpu']:6.1f} ms", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prefixes", nargs="*", help="notebook name prefixes, e.g. 01 03 (default: all)")
    parser.add_argument("--no-notebooks", action="store_true", help="time the slider callbacks only")
    parser.add_argument("--no-callbacks", action="store_true", help="time the notebooks only")
    parser.add_argument("--repeat", type=int, default=9, help="calls per callback (default 9)")
    parser.add_argument("--json", type=Path, help="write the notebooks' timings and failures here")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from pagedkv_lib.environment import describe_environment

    print(describe_environment(), f"| {os.cpu_count()} CPU cores")
    if not args.no_callbacks:
        bench_callbacks(args.repeat)
    if not args.no_notebooks:
        rows = bench_notebooks(args.prefixes)
        if args.json:
            import json

            args.json.write_text(json.dumps({"environment": describe_environment(), "notebooks": rows},
                                            indent=1) + "\n")


if __name__ == "__main__":
    main()
