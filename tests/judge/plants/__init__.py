"""Submissions the judge must reject, each with the verdict and the hint it must give.

- exNNN.py: the planted bugs of exercise NNN,
  PLANTS[name] = Plant(edits, verdict, hint[, interpreter_only, counts_dots]): a copy of the reference
  solution with one classic mistake. `edits` are (text in the solution, its buggy replacement) pairs, each
  text occurring exactly once in the solution, or (text, replacement, n) for a text that occurs n times, all
  replaced (the test says so when a solution changes). Every clause of a contract has a plant that breaks it
  alone, and every hint a case module gives has a plant that gets it; `hint` holds words the first failing
  case's hint (or message) must contain, and two plants with different hint words name different causes.
  test_judge_plants.py runs them all.
- hostile.py: submissions that reach outside their process (processes, files, native code, sockets);
  adversarial.py: submissions that hang, crash, exit, hog memory or flood output.
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import NamedTuple

WA, RE = "wrong answer", "runtime error"


class Plant(NamedTuple):
    edits: list
    verdict: str
    hint: str
    interpreter_only: bool = False    # valid Triton that only some interpreters reject: elsewhere it passes
    counts_dots: bool = False         # seen only where the interpreter counts tl.dot calls (triton >= 3.3)


BUGS = {int(p.stem[2:]): importlib.import_module(f"plants.{p.stem}").PLANTS
        for p in sorted(Path(__file__).parent.glob("ex[0-9][0-9][0-9].py"))}


def plant_file(exercise_id: int, name: str, folder: Path) -> Path:
    """folder/ID_name.py: the reference solution with plant `name`'s edits (each text found as often as the
    plant says: else the solution changed under it)."""
    from pagedkv_lib.judge.registry import get

    text = get(exercise_id).solution_path.read_text()
    for good, bad, *times in BUGS[exercise_id][name].edits:
        assert text.count(good) == (times or [1])[0], f"{exercise_id}/{name}: the solution changed"
        text = text.replace(good, bad)
    path = Path(folder) / f"{exercise_id}_{name}.py"
    path.write_text(text)
    return path
