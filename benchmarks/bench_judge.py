"""How long grading takes: `judge.py 127` on a correct submission vs `python -c "import torch"`.

The target: the median wall time of grading a correct exercise 127 is at most 1.3 times the median of a bare
`import torch` on the same machine. Grading takes one torch import in the judge and one in the sandboxed
child, in parallel (the child starts first), so the target holds on a machine with two free cores. Runs
alternate between the two commands so that load changes on the machine hit both alike.

    python benchmarks/bench_judge.py [--runs 7] [--exercise 127]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if done.returncode not in (0,):
        tail = done.stdout[-2000:] + done.stderr[-2000:]
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{tail}")
    return elapsed


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--exercise", type=int, default=127)
    args = parser.parse_args(argv)
    solution = next((ROOT / "solutions").glob(f"{args.exercise}_*.py"))
    torch_cmd = [sys.executable, "-c", "import torch"]
    judge_cmd = [sys.executable, "practice/judge.py", str(args.exercise), str(solution.relative_to(ROOT))]
    wall(torch_cmd)                                   # warm the file cache once
    torch_s, judge_s = [], []
    for _ in range(args.runs):
        torch_s.append(wall(torch_cmd))
        judge_s.append(wall(judge_cmd))
    t, j = statistics.median(torch_s), statistics.median(judge_s)
    print(f"python -c 'import torch'           median {t:.2f} s  ({', '.join(f'{x:.2f}' for x in torch_s)})")
    print(f"judge.py {args.exercise} (correct solution)    median {j:.2f} s  "
          f"({', '.join(f'{x:.2f}' for x in judge_s)})")
    print(f"ratio judge / import torch: {j / t:.2f}  (target <= 1.30)")


if __name__ == "__main__":
    main()
