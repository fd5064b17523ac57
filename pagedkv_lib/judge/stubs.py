"""Practice stubs from the reference solutions: the one source of truth is `solutions/<id>_<slug>.py`.

In a solution, code between `# BEGIN SOLUTION` and `# END SOLUTION` is the answer. Inside a function the
region becomes `raise NotImplementedError(...)`; at module level (imports only the answer needs) it is
dropped. Signatures and docstrings stay, so stub and solution share them by construction.

    python -m pagedkv_lib.judge.stubs [ID ...]   write practice/ from solutions/ (every exercise, or those)
    python -m pagedkv_lib.judge.stubs --check    exit 1 if a committed stub differs from its solution
    python -m pagedkv_lib.judge.stubs --out DIR  write the stubs into DIR instead
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from .registry import EXERCISES, PRACTICE_DIR

BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
_DEF = re.compile(r"^(\s*)(?:async\s+def|def|class)\s+(\w+)")


def make_stub(source: str, exercise_id: int) -> str:
    """The stub of one solution file's text."""
    lines, out, i = source.splitlines(), [], 0
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
    text = "\n".join(out) + "\n"
    return re.sub(r"\n{4,}", "\n\n\n", text)


def _enclosing(lines: list, at: int, indent: int) -> str:
    """`name` or `Class.name` of the def around line `at`."""
    names = []
    for line in reversed(lines[:at]):
        m = _DEF.match(line)
        if m and len(m.group(1)) < indent:
            names.insert(0, m.group(2))
            indent = len(m.group(1))
    if not names or not any(_DEF.match(line) for line in lines[:at]):
        raise ValueError(f"line {at + 1}: {BEGIN} is indented but not inside a def")
    return ".".join(names)


def write_stubs(out_dir: Path = PRACTICE_DIR, ids=()) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for ex in EXERCISES.values():
        if ids and ex.id not in ids:
            continue
        target = out_dir / ex.filename
        target.write_text(make_stub(ex.solution_path.read_text(), ex.id))
        written.append(target)
    return written


def drifted() -> list[str]:
    """The practice stubs that differ from what their solutions generate."""
    return [ex.filename for ex in EXERCISES.values()
            if not ex.practice_path.exists()
            or ex.practice_path.read_text() != make_stub(ex.solution_path.read_text(), ex.id)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pagedkv_lib.judge.stubs",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("ids", nargs="*", type=int, help="exercise ids (default: all)")
    parser.add_argument("--check", action="store_true", help="exit 1 if practice/ differs from the solutions")
    parser.add_argument("--out", type=Path, default=PRACTICE_DIR, help="where to write the stubs")
    args = parser.parse_args(argv)
    if args.check:
        bad = drifted()
        for name in bad:
            print(f"practice/{name} differs from what solutions/{name} generates", file=sys.stderr)
        return 1 if bad else 0
    for path in write_stubs(args.out, args.ids):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
