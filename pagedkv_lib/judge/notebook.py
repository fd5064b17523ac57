"""Grading code written in a notebook: `judge(127)` or the `%judge 127` magic (`%load_ext pagedkv_lib.judge`).

The graded names are looked up in the notebook's globals; the same hidden cases run in a forked child, as
for a file. The report leaves out timings, so a notebook's stored output does not change from run to run.
"""
from __future__ import annotations

import inspect
import shlex

from . import report, status
from .grading import Limits, Result, Submission, grade


def judge(exercise_id: int, namespace: dict | None = None, *, seed: int = 0, device: str = "cpu",
          verbose: bool = False, limits: Limits | None = None) -> Result:
    """Grade the functions/classes of exercise `exercise_id` defined in `namespace` (default: the caller's
    globals), print the report, record the status, and return the Result."""
    if namespace is None:
        namespace = inspect.currentframe().f_back.f_globals
    result = grade(exercise_id, [Submission("notebook", namespace=namespace)], seed=seed, device=device,
                   limits=limits)[0]
    print(report.text(result, verbose=verbose, timing=False))
    status.record(result, source="notebook")
    return result


def load_ipython_extension(ipython) -> None:
    """Register `%judge ID [--seed N] [-v]`."""

    def judge_magic(line: str) -> None:
        words = shlex.split(line)
        if not words or not words[0].isdigit():
            print("usage: %judge ID [--seed N] [-v]")
            return
        seed = int(words[words.index("--seed") + 1]) if "--seed" in words else 0
        judge(int(words[0]), ipython.user_ns, seed=seed, verbose="-v" in words)

    ipython.register_magic_function(judge_magic, "line", "judge")
