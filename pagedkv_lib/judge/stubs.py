"""Practice stubs from the reference solutions, the one source of truth: in `solutions/<id>_<slug>.py` the
code between `# BEGIN SOLUTION` and `# END SOLUTION` becomes `raise NotImplementedError(...)` inside a
function, and is dropped at module level; signatures and docstrings stay. A file in practice/ is replaced only
while it holds a stub we shipped (the committed one, or what its solution makes now or at HEAD); a learner's
work is kept unless `--force` is given, and then first copied to `<file>.bak-<time>` beside it.

    python -m pagedkv_lib.judge.stubs [ID ...] [--force]    write practice/ from solutions/

That the committed stubs are up to date is a test (tests/judge/test_judge_exercises.py).
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

from .registry import EXERCISES, ROOT

BEGIN = "# BEGIN SOLUTION"
END = "# END SOLUTION"
_DEF = re.compile(r"^(\s*)(?:async\s+def|def|class)\s+(\w+)")


def make_stub(source: str, exercise_id: int) -> str:
    """The stub of one solution file's text."""
    lines = source.splitlines()
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() != BEGIN:
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(line.lstrip())]
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == END), None)
        if end is None:
            raise ValueError(f"line {i + 1}: {BEGIN} without {END}")
        if indent:
            name = _enclosing(lines, i, len(indent))
            out.append(f'{indent}raise NotImplementedError("{name}: your code here '
                       f'(exercise {exercise_id})")')
        i = end + 1
    return re.sub(r"\n{4,}", "\n\n\n", "\n".join(out) + "\n")


def _enclosing(lines: list, at: int, indent: int) -> str:
    """`name` or `Class.name` of the def around line `at`."""
    names = []
    for line in reversed(lines[:at]):
        m = _DEF.match(line)
        if m and len(m.group(1)) < indent:
            names.insert(0, m.group(2))
            indent = len(m.group(1))
    if not names:
        raise ValueError(f"line {at + 1}: {BEGIN} is indented but not inside a def")
    return ".".join(names)


def stub_of(exercise) -> str:
    return make_stub(exercise.solution_path.read_text(), exercise.id)


def committed(path: Path) -> str | None:
    """The text of `path` at git's HEAD, or None (not a git checkout, no git, or not committed)."""
    try:
        rel = path.resolve().relative_to(ROOT).as_posix()
        done = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=ROOT, capture_output=True, timeout=30)
    except (ValueError, OSError, subprocess.SubprocessError):
        return None
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else None


def shipped_stubs(exercise) -> set[str]:
    """Texts that count as an untouched stub: the committed stub, and what the solution generates now and at
    HEAD (a maintainer who just edited a solution)."""
    head_solution = committed(exercise.solution_path)
    texts = {stub_of(exercise), committed(exercise.practice_path),
             head_solution and make_stub(head_solution, exercise.id)}
    return texts - {None}


def write_stub(exercise, force: bool = False) -> str:
    """Write one exercise's stub into practice/, never losing a learner's file; says what it did."""
    target = exercise.practice_path
    stub = stub_of(exercise)
    old = target.read_text(errors="replace") if target.exists() else None
    if old == stub:
        return f"unchanged {target}: it already is the stub"
    learners = old is not None and old not in shipped_stubs(exercise)
    if learners and not force:
        return f"kept {target}: it holds your work (use --force to replace it; a backup is made first)"
    saved = None
    if learners:                                          # microseconds: never over an older backup
        saved = target.with_name(f"{target.name}.bak-{datetime.now():%Y%m%d-%H%M%S-%f}")
        shutil.copy2(target, saved)
    target.write_text(stub)
    return f"replaced {target} with its stub; your version is in {saved}" if saved else f"wrote {target}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pagedkv_lib.judge.stubs",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("ids", nargs="*", type=int, help="exercise ids (default: all)")
    parser.add_argument("--force", action="store_true", help="also replace your work (backed up first)")
    args = parser.parse_args(argv)
    for ex in EXERCISES.values():
        if not args.ids or ex.id in args.ids:
            print(write_stub(ex, args.force))


if __name__ == "__main__":
    main()
