"""The learner's status per exercise, kept in a small git-ignored JSON file that each grading run updates.

Path: practice/.judge_status.json, or $PAGEDKV_JUDGE_STATUS.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from .registry import PRACTICE_DIR


def path() -> Path:
    return Path(os.environ.get("PAGEDKV_JUDGE_STATUS", PRACTICE_DIR / ".judge_status.json"))


def read() -> dict:
    try:
        data = json.loads(path().read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def record(result, keep_pass: bool = False) -> None:
    """Remember the verdict of `result` (an engine.Result) for its exercise; never fails the grading.

    keep_pass: do not replace a stored full pass with a worse verdict (a notebook re-run grades the
    notebook's own empty stub and must not erase what the learner's file earned).
    """
    data = read()
    old = data.get(str(result.exercise_id), {})
    if keep_pass and old.get("passed") == old.get("total") and old.get("total") and \
            result.passed != result.total:
        return
    data[str(result.exercise_id)] = {"verdict": result.verdict, "passed": result.passed,
                                     "total": result.total, "file": result.label, "seed": result.seed,
                                     "when": time.strftime("%Y-%m-%d %H:%M:%S")}
    try:
        target = path()
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        tmp.replace(target)
    except OSError:
        pass


def describe(exercise_id: int) -> str:
    entry = read().get(str(exercise_id))
    if not entry:
        return "not graded yet"
    return f"{entry.get('verdict', '?')} ({entry.get('passed', '?')}/{entry.get('total', '?')})"
