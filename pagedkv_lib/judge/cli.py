"""The judge's command line, behind `python practice/judge.py` and `python judge.py`.

    judge.py ID [FILE]                   grade FILE (default practice/ID_<slug>.py) against the hidden cases
    judge.py ID FILE1 FILE2 ... [--jobs N] [--csv PATH]   grade many submissions into one table
    judge.py --list                      every exercise, its difficulty and your status on it
    judge.py --reset ID                  the stub of ID back in practice/ (your file is backed up beside it)
    --json  machine-readable results (schema in pagedkv_lib/judge/report.py)   --seed N  other random cases
Exit status 0 only when every case of every graded file passes, 1 when one fails, 2 on a usage error, 3 when
an unsandboxed submission changed a file the verdicts rest on (tampering), 130 when interrupted (Ctrl-C).
Several files are graded in the bwrap sandbox; where bwrap is missing they need --no-sandbox.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path

from . import isolation, registry, status


def main(argv=None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:                         # the children are already killed and reaped
        print("\njudge.py: interrupted; nothing was recorded", file=sys.stderr)
        return 130


def _main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.list:
        print(list_text())
        return 0
    if args.reset:
        return _reset(args.id)
    if args.id is None:
        parser.print_usage(sys.stderr)
        print("judge.py: give an exercise id (or --list)", file=sys.stderr)
        return 2
    try:
        exercise = registry.get(args.id)
    except KeyError as err:
        print(f"judge.py: {err.args[0]}", file=sys.stderr)
        return 2
    files = [Path(f) for f in args.files] or [_default_file(exercise)]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        print(f"judge.py: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    if importlib.util.find_spec("torch") is None:
        print(f"judge.py: torch is not installed for {sys.executable}: activate the course's environment "
              "first (. .venv/bin/activate, or conda activate pagedkv-course)", file=sys.stderr)
        return 2
    if len(files) > 1 and not args.no_sandbox and isolation.bwrap_path() is None:
        print("judge.py: grading several files needs the bwrap sandbox, which is missing or cannot sandbox "
              "here: install bubblewrap (apt install bubblewrap), or pass --no-sandbox to grade them in plain "
              "processes that can change any of your files", file=sys.stderr)
        return 2
    device = args.device or exercise.devices[0]
    if device not in exercise.devices:
        print(f"judge.py: exercise {exercise.id} has cases for {', '.join(exercise.devices)}, not {device}",
              file=sys.stderr)
        return 2
    if device == "cuda" and not _cuda_available():
        print("judge.py: --device cuda needs a CUDA GPU, and torch sees none here (grade on the CPU: leave "
              "out --device)", file=sys.stderr)
        return 2
    if args.bench and not hasattr(exercise.cases(), "bench"):
        print(f"judge.py: exercise {exercise.id} has no benchmark", file=sys.stderr)
        return 2
    return _grade(exercise, files, args, device)


def _grade(exercise, files, args, device) -> int:
    from .grading import Limits, grade
    from .outcome import TAMPERING

    limits = Limits.for_exercise(exercise, time_limit_s=args.time_limit)
    progress = _Progress(len(files)) if len(files) > 1 else None
    results = grade(exercise.id, [str(f) for f in files], seed=args.seed, device=device, limits=limits,
                    jobs=args.jobs, bench=args.bench, on_done=progress,
                    isolation=isolation.FORK if args.no_sandbox else None)
    if progress:
        progress.close()
    from . import report                              # imports torch: after the children started

    tampered = any(r.tampered for r in results)
    for f, result in zip(files, results):             # only the learner's own file of this exercise counts
        if f.resolve() == exercise.practice_path.resolve() and not tampered:
            status.record(result)
    if args.json:
        data = [report.to_dict(r) for r in results]
        print(json.dumps(data[0] if len(data) == 1 else data, indent=1))
    elif len(results) == 1:
        print(report.text(results[0], verbose=args.verbose))
    else:
        print(report.batch_table(results))
    if args.csv:
        text = report.to_csv(results)
        sys.stdout.write(text) if args.csv == "-" else Path(args.csv).write_text(text)
    if tampered:
        who = [r.label for r in results if r.verdict == TAMPERING]
        print(f"judge.py: TAMPERING: the status file or the judge's own files changed while {', '.join(who)} "
              "ran unsandboxed; the batch stopped there and nothing was recorded", file=sys.stderr)
        return 3
    return 0 if all(r.ok for r in results) else 1


def _cuda_available() -> bool:
    """Whether torch sees a GPU, asked through NVML: a plain torch.cuda.is_available() initialises the CUDA
    driver in this process, and a child forked afterwards cannot use CUDA ("Cannot re-initialize CUDA in
    forked subprocess")."""
    import os

    import torch

    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    return torch.cuda.is_available()


def _reset(exercise_id) -> int:
    """`--reset ID`: the stub back in practice/, the learner's file kept as a backup beside it."""
    from .stubs import write_stub

    if exercise_id is None:
        print("judge.py: --reset needs an exercise id, e.g. judge.py --reset 127", file=sys.stderr)
        return 2
    try:
        exercise = registry.get(exercise_id)
    except KeyError as err:
        print(f"judge.py: {err.args[0]}", file=sys.stderr)
        return 2
    written = write_stub(exercise, force=True)
    status.forget(exercise.id)
    if written.action == "replaced":
        print(f"practice/{exercise.filename} is the stub again; your version is saved as {written.backup}")
    else:
        how = "it already was" if written.action == "unchanged" else "written"
        print(f"practice/{exercise.filename} is the stub ({how})")
    return 0


def _default_file(exercise) -> Path:
    if exercise.practice_path.exists():
        return exercise.practice_path
    found = sorted(registry.PRACTICE_DIR.glob(f"{exercise.id}_*.py"))
    return found[0] if found else exercise.practice_path


def list_text() -> str:
    rows = [f"{'id':>3}  {'title':<36} {'difficulty':<10} {'notebook':<38} status"]
    for ex in registry.EXERCISES.values():
        state = status.describe(ex.id)
        rows.append(f"{ex.id:>3}  {ex.title:<36} {ex.difficulty:<10} {ex.notebook:<38} {state}")
    return "\n".join(rows)


class _Progress:
    """A progress bar on stderr for a batch."""

    def __init__(self, total: int):
        self.total, self.done = total, 0
        self.draw()

    def __call__(self, run) -> None:
        self.done += 1
        self.draw()

    def draw(self) -> None:
        filled = 30 * self.done // self.total
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} graded")
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\n")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="judge.py", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("id", nargs="?", help="exercise id, e.g. 127")
    p.add_argument("files", nargs="*", help="files to grade (default: practice/ID_<slug>.py)")
    p.add_argument("--list", action="store_true", help="list the exercises and your status")
    p.add_argument("--reset", action="store_true",
                   help="restore the stub of exercise ID in practice/ (your file is backed up beside it)")
    p.add_argument("--json", action="store_true", help="print machine-readable results")
    p.add_argument("--csv", metavar="PATH", help="also write one CSV row per file (- for stdout)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random cases (default 0)")
    p.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="submissions graded at once")
    p.add_argument("--device", choices=("cpu", "cuda"), help="case set (default: the exercise's first)")
    p.add_argument("--bench", action="store_true", help="also benchmark the submission (where there is one)")
    p.add_argument("--time-limit", type=float, metavar="S", help="seconds per case (default: the exercise's)")
    p.add_argument("--verbose", "-v", action="store_true", help="list every case")
    p.add_argument("--no-sandbox", action="store_true",
                   help="grade in plain forked processes even where bwrap could sandbox (not a sandbox)")
    return p
