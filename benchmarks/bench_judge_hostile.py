"""The parent's cost under the worst submissions: peak memory (ru_maxrss of a process that only grades) and
wall time, for a correct file and for each submission that floods, forges or keeps busy its channels
(tests/judge/plants/floods.py, and stdout floods from adversarial.py), with the exercise's own limits.

    python benchmarks/bench_judge_hostile.py [--isolation bwrap|fork] [--only NAME ...]
    python benchmarks/bench_judge_hostile.py --sleepers 10 [--jobs 2]

Each grading runs in a fresh process, so that one's peak is not another's. `--sleepers N` grades, in one
batch, N files that sleep 45 s at import and 9 s in each case (just under each phase's backstop, using no
CPU) and prints the parent's wall time: what such files cost an instructor, bounded by the file's wall
clock (supervisor.FILE_WALL_FACTOR times the CPU budget).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "judge"))

from plants.adversarial import ADVERSARIAL, at_import, in_body  # noqa: E402
from plants.floods import FLOODS  # noqa: E402

GRADER = """
import json, resource, sys, time
from pagedkv_lib.judge.grading import grade
t0 = time.monotonic()
(result,) = grade(int(sys.argv[1]), [sys.argv[2]], isolation=sys.argv[3])
print(json.dumps([result.verdict, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.monotonic() - t0]))
"""
SLEEPS_AT_IMPORT_S = 45.0
SLEEPS_PER_CASE_S = 9.0
BATCH = """
import json, sys, time
from pagedkv_lib.judge.grading import grade
t0 = time.monotonic()
results = grade(122, sys.argv[3:], isolation=sys.argv[1], jobs=int(sys.argv[2]))
print(json.dumps([[r.verdict, r.passed, r.total, r.duration_s] for r in results] + [time.monotonic() - t0]))
"""


def submissions() -> dict:
    """name -> (exercise id, source): a correct file first, then the hostile ones."""
    found = {"correct": (122, (ROOT / "solutions" / "122_slot_mapping.py").read_text())}
    found.update({name: (ex, source) for name, (ex, source, _) in FLOODS.items()})
    for name in ("floods_stdout", "floods_stderr_then_answers", "writes_garbage_to_every_fd"):
        found[name] = ADVERSARIAL[name][:2]
    return found


def sleepers(count: int, jobs: int, isolation: str) -> None:
    """Grade `count` sleeping files in one batch and print each verdict and the parent's wall time."""
    source = at_import(f"import time\ntime.sleep({SLEEPS_AT_IMPORT_S})",
                       in_body(f"import time\ntime.sleep({SLEEPS_PER_CASE_S})"))
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i in range(count):
            paths.append(Path(tmp) / f"sleeper_{i}.py")
            paths[-1].write_text(source)
        done = subprocess.run([sys.executable, "-c", BATCH, isolation, str(jobs), *map(str, paths)],
                              cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"grading the sleepers failed:\n{done.stderr[-2000:]}")
    *rows, wall_s = json.loads(done.stdout.strip().splitlines()[-1])
    for i, (verdict, passed, total, duration_s) in enumerate(rows):
        print(f"sleeper_{i:<3} {verdict:<12} {passed:>3}/{total:<3} {duration_s:7.1f} s")
    print(f"{count} sleepers at --jobs {jobs} ({isolation}): the parent's wall time {wall_s:.1f} s")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--isolation", choices=("bwrap", "fork"), default="bwrap")
    parser.add_argument("--only", nargs="*", help="grade only these submissions")
    parser.add_argument("--sleepers", type=int, metavar="N", help="grade N sleeping files in one batch")
    parser.add_argument("--jobs", type=int, default=2, help="files at once, with --sleepers")
    args = parser.parse_args(argv)
    if args.sleepers:
        sleepers(args.sleepers, args.jobs, args.isolation)
        return
    print(f"{'submission':<30} {'verdict':<15} {'peak MiB':>9} {'wall s':>7}   ({args.isolation})")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (exercise_id, source) in submissions().items():
            if args.only and name not in args.only:
                continue
            path = Path(tmp) / f"{name}.py"
            path.write_text(source)
            done = subprocess.run([sys.executable, "-c", GRADER, str(exercise_id), str(path), args.isolation],
                                  cwd=ROOT, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"grading {name} failed:\n{done.stderr[-2000:]}")
            verdict, peak_kib, wall_s = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{name:<30} {verdict:<15} {peak_kib / 1024:>9.0f} {wall_s:>7.1f}", flush=True)


if __name__ == "__main__":
    main()
