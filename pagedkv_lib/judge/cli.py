"""The judge's command line, behind `python practice/judge.py ID [FILE ...]` and `python judge.py`.

Exit status 0 only when every case of every graded file passes, 1 when one fails, 2 on a usage error, 3 when
an unsandboxed submission changed a file the verdicts rest on (tampering), 130 when interrupted (Ctrl-C).
Several files are graded in the bwrap sandbox; where bwrap is missing they need --no-sandbox. The --json
schema is in report.py.
"""
from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import sys
from pathlib import Path

from . import isolation, registry, status


class UsageError(Exception):
    """A command that grades nothing and records nothing: one line on stderr, exit status 2."""


def main(argv=None) -> int:
    try:
        return _main(_parser().parse_args(argv))
    except UsageError as err:
        print(f"judge.py: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:                         # the children are already killed and reaped
        print("\njudge.py: interrupted; nothing was recorded", file=sys.stderr)
        return 130


def _main(args) -> int:
    if args.list:
        print(list_text())
        return 0
    if args.id is None:
        raise UsageError("give an exercise id (or --list); judge.py --help says more")
    try:
        exercise = registry.get(args.id)
    except KeyError as err:
        raise UsageError(err.args[0]) from None
    if args.reset:
        status.forget(exercise.id)
        from .stubs import write_stub

        print(write_stub(exercise, force=True))
        return 0
    files = [Path(f) for f in args.files] or [exercise.practice_path]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise UsageError(f"no such file: {', '.join(missing)}")
    if importlib.util.find_spec("torch") is None:
        raise UsageError(f"torch is not installed for {sys.executable}: activate the course's environment "
                         "first (. .venv/bin/activate, or conda activate pagedkv-course)")
    if len(files) > 1 and not args.no_sandbox and isolation.bwrap_path() is None:
        raise UsageError("grading several files needs the bwrap sandbox, which is missing or cannot sandbox "
                         "here: install bubblewrap (apt install bubblewrap), or pass --no-sandbox to grade "
                         "them in plain processes that can change any of your files")
    device = args.device or exercise.devices[0]
    if device not in exercise.devices:
        raise UsageError(f"exercise {exercise.id} has cases for {', '.join(exercise.devices)}, not {device}")
    if device == "cuda":
        os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")   # NVML: CUDA stays unstarted for a fork
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda needs a CUDA GPU, and torch sees none here (grade on the CPU: "
                             "leave out --device)")
    if args.bench and not hasattr(exercise.cases(), "bench"):
        raise UsageError(f"exercise {exercise.id} has no benchmark")
    return _grade(exercise, files, args, device)


def _grade(exercise, files, args, device) -> int:
    from .grading import Limits, grade

    done = itertools.count(1)

    def progress(run) -> None:
        print(f"{next(done)}/{len(files)} graded: {run.label}", file=sys.stderr)

    results = grade(exercise.id, [str(f) for f in files], seed=args.seed, device=device, jobs=args.jobs,
                    limits=Limits.for_exercise(exercise, time_limit_s=args.time_limit), bench=args.bench,
                    on_done=progress if len(files) > 1 else None,
                    isolation=isolation.FORK if args.no_sandbox else None)
    from . import report  # imports torch: after the children started

    tampered = [r.label for r in results if r.tampered]
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
        print(f"judge.py: TAMPERING: the status file or the judge's own files changed while "
              f"{', '.join(tampered)} ran unsandboxed; the batch stopped there and nothing was recorded",
              file=sys.stderr)
        return 3
    return 0 if all(r.ok for r in results) else 1


def list_text() -> str:
    rows = [f"{'id':>3}  {'title':<36} {'difficulty':<10} {'notebook':<38} status"]
    for ex in registry.EXERCISES.values():
        state = status.describe(ex.id)
        rows.append(f"{ex.id:>3}  {ex.title:<36} {ex.difficulty:<10} {ex.notebook:<38} {state}")
    return "\n".join(rows)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="judge.py", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("id", nargs="?", help="exercise id, e.g. 127")
    p.add_argument("files", nargs="*", help="files to grade (default: practice/ID_<slug>.py)")
    p.add_argument("--list", action="store_true", help="list the exercises and your status")
    p.add_argument("--reset", action="store_true", help="put back the stub of ID (your file is backed up)")
    p.add_argument("--json", action="store_true", help="print machine-readable results")
    p.add_argument("--csv", metavar="PATH", help="also write one CSV row per file (- for stdout)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random cases (default 0)")
    p.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="submissions graded at once")
    p.add_argument("--device", choices=("cpu", "cuda"), help="case set (default: the exercise's first)")
    p.add_argument("--bench", action="store_true", help="also benchmark the submission (where there is one)")
    p.add_argument("--time-limit", type=float, metavar="S", help="seconds per case (default: the exercise's)")
    p.add_argument("--verbose", "-v", action="store_true", help="list every case")
    p.add_argument("--no-sandbox", action="store_true", help="grade in plain processes, not in bwrap")
    return p
