"""The judge's command line, behind `python practice/judge.py ID [FILE ...]` and `python judge.py`.

Exit status 0 only when every case of every graded file passes, 1 when one fails, 2 on a usage error (every
value is checked before anything is graded: one line on stderr), 3 when an unsandboxed submission changed a
file the verdicts rest on (tampering), 4 when the judge itself failed on a file (a judge error: nothing is
recorded; its report says what to report), 130 when interrupted (Ctrl-C, pressed once or more), 141 when the
output went to a pipe that closed (`--list | head`). Several files are graded in the bwrap sandbox; where
bwrap is missing they need --no-sandbox. The --json schema is in report.py.

A file is a file even where its name looks like an option (`--jobs=2.py` among `*.py`): an argument that
names an existing *.py file, and every argument after `--`, is a file to grade. A file larger than
MAX_FILE_BYTES is a usage error. A symbolic link is graded as the file it points to, under the name given.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import itertools
import json
import math
import os
import signal
import sys
import threading
from pathlib import Path

from . import isolation, registry, status, supervisor
from .outcome import JUDGE_ERROR

MAX_SEED = 2**32 - 1                  # seeds reach torch.Generator.manual_seed as 1000 * seed + i
MAX_TIME_LIMIT_S = 3600.0             # seconds of CPU per case
MAX_JOBS = 64
MAX_FILE_BYTES = 64 * 2**20           # a submission's size (a sandboxed child gets a copy in memory)
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130                # 128 + SIGINT, as a shell reports it
EXIT_BROKEN_PIPE = 141                # 128 + SIGPIPE
EXIT_JUDGE_ERROR = 4                  # the judge's own machinery failed (outcome.JUDGE_ERROR)


class UsageError(Exception):
    """A command that grades nothing and records nothing: one line on stderr, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):                     # argparse's usage block and exit: one line instead
        raise UsageError(message)


def main(argv=None) -> int:
    """The command line (`argv`: sys.argv[1:] when None, as for the process's own command)."""
    main_thread = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGINT)
    supervisor.INTERRUPTED.clear()
    if main_thread and before is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted)
    interrupted = False                               # a KeyboardInterrupt ended it
    try:
        code = _main(_parse(sys.argv[1:] if argv is None else argv))
        sys.stdout.flush()                            # a closed pipe shows here, not at the exit
        if supervisor.INTERRUPTED.is_set():           # its KeyboardInterrupt was swallowed after the grading
            raise KeyboardInterrupt
        return code
    except UsageError as err:
        print(f"judge.py: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:                         # the children are already killed and reaped
        interrupted = True
        _ignore_interrupts()                          # a second Ctrl-C now changes nothing
        print("\njudge.py: interrupted; nothing was recorded", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:                           # `--list | head`: the reader left, so be quiet
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    finally:                                          # the process's own command, once interrupted, ends
        interrupted = interrupted or supervisor.INTERRUPTED.is_set()
        supervisor.INTERRUPTED.clear()                # it is 130 now: a later grading here is not stopped
        if main_thread and not (interrupted and argv is None):
            signal.signal(signal.SIGINT, before)


def _interrupted(signum, frame) -> None:
    """The first Ctrl-C: it is recorded (supervisor.INTERRUPTED), the next ones are ignored from now on, and
    KeyboardInterrupt ends the grading (its children are killed and reaped), then main returns 130. Where
    Python swallows that exception (it ran inside a callback: an import lock's, a fork's, a finalizer's),
    the record still ends the grading at the parent's next look (Supervisor.poll) and main with 130. A
    second press raises nothing anywhere: not while the first is handled, not after main returned (where
    it would end Python with -2). Ignoring comes first: a press inside INTERRUPTED.set() would run this
    handler again there, whose set() then waits for the lock the first holds (seen under load in CI)."""
    _ignore_interrupts()
    supervisor.INTERRUPTED.set()
    raise KeyboardInterrupt


def _ignore_interrupts() -> None:
    """Ctrl-C raised KeyboardInterrupt once and the judge is ending: ignore the next ones, so that it still
    ends with exit status 130 (a second press would end Python with -2)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _main(args) -> int:
    if args.list:
        print(json.dumps(list_rows(), indent=1) if args.json else list_text())
        return 0
    if args.id is None:
        raise UsageError("give an exercise id (or --list); judge.py --help says more")
    try:
        exercise = registry.get(args.id)
    except KeyError as err:
        raise UsageError(err.args[0]) from None
    if args.reset:
        from .stubs import write_stub

        print(write_stub(exercise, force=True))
        if status.entry(exercise.id) is not None:       # a verdict earned stays, and show_reference with it
            print(f"your verdict stays recorded: {status.describe(exercise.id)}, until you grade "
                  f"{exercise.practice_path.name} again")
        return 0
    files = [Path(f) for f in args.files] or [exercise.practice_path]
    for f in files:
        _check_submission(f)
    if args.csv and args.csv != "-":
        _check_csv(Path(args.csv))
    if importlib.util.find_spec("torch") is None:
        raise UsageError(f"torch is not installed for {sys.executable}: activate the course's environment "
                         "first (. .venv/bin/activate, or conda activate pagedkv-course)")
    try:
        mode = isolation.choose(_isolation_asked(args, files))
    except isolation.SandboxMissing as err:
        raise UsageError(f"grading several files: {err}, or pass --no-sandbox to grade them in plain "
                         "processes that can change any of your files") from None
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
    return _grade(exercise, files, args, device, mode)


def _parse(argv: list) -> argparse.Namespace:
    """The arguments, where a file named like an option (`-v.py`) and everything after `--` are files: each
    is handed to argparse as a placeholder it cannot read as an option (a NUL never reaches a command's
    arguments), then put back."""
    argv = list(argv)
    given = {}
    ends = argv.index("--") if "--" in argv else len(argv)
    for i, arg in enumerate(argv):
        if i > ends or (i < ends and arg.startswith("-") and arg.endswith(".py") and os.path.isfile(arg)):
            given[f"\0{i}"] = arg
            argv[i] = f"\0{i}"
    del argv[ends:ends + 1]
    args = _parser().parse_intermixed_args(argv)
    args.id = given.get(args.id, args.id)
    args.files = [given.get(f, f) for f in args.files]
    return args


def _isolation_asked(args, files) -> str | None:
    """Several files are graded only in the sandbox, unless --no-sandbox says otherwise; one file in the
    strongest isolation this machine has."""
    if args.no_sandbox:
        return isolation.FORK
    if len(files) > 1:
        return isolation.BWRAP
    return None


def _grade(exercise, files, args, device, mode: str) -> int:
    from .grading import Limits, grade

    done = itertools.count(1)

    def progress(submission) -> None:
        from .report import progress_line  # torch is imported by now (report imports it)

        print(progress_line(next(done), len(files), submission.label), file=sys.stderr)

    results = grade(exercise.id, [str(f) for f in files], seed=args.seed, device=device, jobs=args.jobs,
                    limits=Limits.for_exercise(exercise, time_limit_s=args.time_limit), bench=args.bench,
                    on_done=progress if len(files) > 1 else None,
                    isolation=mode)
    from . import report  # imports torch: after the children started

    if supervisor.INTERRUPTED.is_set():               # a Ctrl-C whose KeyboardInterrupt was swallowed
        raise KeyboardInterrupt
    tampered = [r.label for r in results if r.tampered]
    for f, result in zip(files, results):             # only the learner's own file of this exercise counts
        if f.resolve() == exercise.practice_path.resolve() and not tampered:
            status.record(result)
    if args.json:
        data = [report.to_dict(r) for r in results]
        print(json.dumps(data[0] if len(data) == 1 else data, indent=1, allow_nan=False))
    elif len(results) == 1:
        print(report.text(results[0], verbose=args.verbose))
    else:
        print(report.batch_table(results))
    if args.csv == "-":
        sys.stdout.write(report.to_csv(results))
    elif args.csv:
        Path(args.csv).write_text(report.to_csv(results))
    if tampered:
        print(f"judge.py: TAMPERING: the status file or the judge's own files changed while "
              f"{', '.join(tampered)} ran unsandboxed; the batch stopped there and nothing was recorded",
              file=sys.stderr)
        return 3
    if any(r.verdict == JUDGE_ERROR for r in results):
        return EXIT_JUDGE_ERROR
    return 0 if all(r.ok for r in results) else 1


def _check_submission(f: Path) -> None:
    """A file the judge can grade: a readable regular file (through any symlinks) named *.py, at most
    MAX_FILE_BYTES long."""
    if not f.is_file():
        raise UsageError(f"no such file: {f}")
    if f.suffix != ".py":
        raise UsageError(f"expected a Python file (*.py), got {f}")
    size = f.stat().st_size
    if size > MAX_FILE_BYTES:
        raise UsageError(f"{f} is too large to grade: {size} bytes, at most {MAX_FILE_BYTES} "
                         f"({MAX_FILE_BYTES // 2**20} MiB)")
    try:
        with open(f, "rb") as source:
            source.read(1)
    except OSError as err:
        raise UsageError(f"cannot read {f}: {err.strerror or err}") from None


def _check_csv(target: Path) -> None:
    """Where --csv writes: a file (new or not) in a folder that exists and can be written."""
    folder = target.parent
    if target.is_dir():
        raise UsageError(f"--csv: expected a file to write, got the directory {target}")
    if not folder.is_dir():
        raise UsageError(f"--csv: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise UsageError(f"--csv: cannot write {target}")


def _whole(low: int, high: int, what: str):
    """An argparse type: a whole number from `low` to `high`."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected {what} from {low} to {high}, got {text}")
        return value

    return parse


def _time_limit(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not (math.isfinite(value) and 0 < value <= MAX_TIME_LIMIT_S):
        raise argparse.ArgumentTypeError(f"expected seconds above 0, at most {MAX_TIME_LIMIT_S:g}, got "
                                         f"{text}")
    return value


def course_order() -> list:
    """The exercises as a learner meets them: by the notebook that teaches each, then by id."""
    return sorted(registry.EXERCISES.values(), key=lambda ex: (int(ex.notebook[:2]), ex.id))


def list_rows() -> list[dict]:
    """What --list shows, one dict per exercise in course order (--list --json prints them)."""
    return [{"id": ex.id, "notebook": ex.notebook, "title": ex.title, "difficulty": ex.difficulty,
             "status": status.describe(ex.id)} for ex in course_order()]


def list_text() -> str:
    rows = list_rows()
    nb = max(len("notebook"), *(len(row["notebook"]) for row in rows))     # columns as wide as their text
    title = max(len("title"), *(len(row["title"]) for row in rows))
    lines = [f"{'id':>3}  {'notebook':<{nb}}  {'title':<{title}}  {'difficulty':<10} status"]
    for row in rows:
        lines.append(f"{row['id']:>3}  {row['notebook']:<{nb}}  {row['title']:<{title}}  "
                     f"{row['difficulty']:<10} {row['status']}")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="judge.py", description=__doc__.split("\n")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("id", nargs="?", help="exercise id, e.g. 127")
    p.add_argument("files", nargs="*", help="files to grade (default: practice/ID_<slug>.py)")
    p.add_argument("--list", action="store_true", help="list the exercises and your status")
    p.add_argument("--reset", action="store_true",
                   help="put back the stub of ID (your file is backed up; your verdict is kept)")
    p.add_argument("--json", action="store_true", help="print machine-readable results (or --list)")
    p.add_argument("--csv", metavar="PATH", help="also write one CSV row per file (- for stdout)")
    p.add_argument("--seed", type=_whole(0, MAX_SEED, "a seed"), default=0,
                   help=f"seed of the random cases, 0 to {MAX_SEED} (default 0)")
    p.add_argument("--jobs", type=_whole(1, MAX_JOBS, "a number of submissions at once"),
                   default=min(4, os.cpu_count() or 1), help="submissions graded at once")
    p.add_argument("--device", choices=("cpu", "cuda"), help="case set (default: the exercise's first)")
    p.add_argument("--bench", action="store_true", help="also benchmark the submission (where there is one)")
    p.add_argument("--time-limit", type=_time_limit, metavar="S",
                   help="CPU seconds per case (default: the exercise's)")
    p.add_argument("--verbose", "-v", action="store_true", help="list every case")
    p.add_argument("--no-sandbox", action="store_true", help="grade in plain processes, not in bwrap")
    return p
