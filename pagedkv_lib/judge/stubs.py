"""Practice stubs from the reference solutions: the one source of truth is `solutions/<id>_<slug>.py`.

In a solution, code between `# BEGIN SOLUTION` and `# END SOLUTION` is the answer. Inside a function the
region becomes `raise NotImplementedError(...)`; at module level (imports only the answer needs) it is
dropped. Signatures and docstrings stay, so stub and solution share them by construction.

`practice/` belongs to the learner: a file there is replaced only while it still holds a stub we shipped
(the committed one, or the one its committed solution generates). Anything else is the learner's work and
is kept, unless `--force` is given; then it is first copied to `<file>.bak-<time>` beside it.

    python -m pagedkv_lib.judge.stubs [ID ...]   write practice/ from solutions/ (every exercise, or those)
    python -m pagedkv_lib.judge.stubs --check    exit 1 if a COMMITTED stub differs from its solution's
    python -m pagedkv_lib.judge.stubs --force    also replace files that hold your work (with a backup)
    python -m pagedkv_lib.judge.stubs --out DIR  write the stubs into DIR instead
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .registry import EXERCISES, PRACTICE_DIR, ROOT

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


def stub_of(exercise) -> str:
    """The stub the exercise's solution (as it is on disk) generates."""
    return make_stub(exercise.solution_path.read_text(), exercise.id)


def committed(path: Path) -> str | None:
    """The text of `path` at git's HEAD, or None (not a git checkout, no git, or not committed)."""
    try:
        rel = path.resolve().relative_to(ROOT)
        done = subprocess.run(["git", "show", f"HEAD:{rel.as_posix()}"], cwd=ROOT, capture_output=True,
                              timeout=30)
    except (ValueError, OSError, subprocess.SubprocessError):
        return None
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else None


def shipped_stubs(exercise) -> set[str]:
    """Texts that count as an untouched stub of `exercise`: what the solution generates now, the committed
    stub, and what the committed solution generates (a maintainer who just edited a solution)."""
    texts = {stub_of(exercise)}
    head_stub = committed(exercise.practice_path)
    if head_stub is not None:
        texts.add(head_stub)
    head_solution = committed(exercise.solution_path)
    if head_solution is not None:
        texts.add(make_stub(head_solution, exercise.id))
    return texts


def backup(path: Path) -> Path:
    """Copy `path` to `<name>.bak-<YYYYmmdd-HHMMSS>` beside it (never over an older backup)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target, n = path.with_name(f"{path.name}.bak-{stamp}"), 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.bak-{stamp}-{n}")
    shutil.copy2(path, target)
    return target


@dataclass
class Written:
    path: Path
    action: str                 # "wrote", "unchanged", "kept" (holds the learner's work), "replaced"
    backup: Path | None = None

    def __str__(self) -> str:
        if self.action == "kept":
            return (f"kept {self.path}: it holds your work (use --force to replace it; a backup is made "
                    "first)")
        if self.action == "replaced":
            return f"replaced {self.path} with its stub; your version is in {self.backup}"
        return f"{self.action} {self.path}"


def write_stub(exercise, out_dir: Path = PRACTICE_DIR, force: bool = False) -> Written:
    """Write one exercise's stub into `out_dir`, never losing a learner's file (see the module doc)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    target, stub = out_dir / exercise.filename, stub_of(exercise)
    if not target.exists():
        target.write_text(stub)
        return Written(target, "wrote")
    old = target.read_text(errors="replace")
    if old == stub:
        return Written(target, "unchanged")
    pristine = out_dir.resolve() == PRACTICE_DIR.resolve() and old in shipped_stubs(exercise)
    if pristine:
        target.write_text(stub)
        return Written(target, "wrote")
    if not force:
        return Written(target, "kept")
    saved = backup(target)
    target.write_text(stub)
    return Written(target, "replaced", saved)


def write_stubs(out_dir: Path = PRACTICE_DIR, ids=(), force: bool = False) -> list[Written]:
    return [write_stub(ex, out_dir, force) for ex in EXERCISES.values() if not ids or ex.id in ids]


def drifted() -> list[str] | None:
    """The COMMITTED practice stubs that differ from what their solutions generate (a maintainer forgot to
    regenerate them), or None outside a git checkout. Files a learner edited are not looked at: the working
    tree's practice/ is the learner's."""
    found = []
    for ex in EXERCISES.values():
        head = committed(ex.practice_path)
        if head is None:
            if committed(ex.solution_path) is None:
                return None                                  # no git here: nothing to compare with
            found.append(ex.filename)                        # a solution without a committed stub
        elif head != stub_of(ex):
            found.append(ex.filename)
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pagedkv_lib.judge.stubs",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("ids", nargs="*", type=int, help="exercise ids (default: all)")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if a committed practice stub differs from what its solution generates")
    parser.add_argument("--force", action="store_true",
                        help="also replace practice files that hold your work (each is backed up first)")
    parser.add_argument("--out", type=Path, default=PRACTICE_DIR, help="where to write the stubs")
    args = parser.parse_args(argv)
    if args.check:
        bad = drifted()
        if bad is None:
            print("not a git checkout: nothing to compare the stubs with", file=sys.stderr)
            return 0
        for name in bad:
            print(f"practice/{name} (committed) differs from what solutions/{name} generates",
                  file=sys.stderr)
        return 1 if bad else 0
    results = write_stubs(args.out, args.ids, args.force)
    for written in results:
        print(written)
    return 0


if __name__ == "__main__":
    sys.exit(main())
