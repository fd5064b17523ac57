"""The judge from a notebook: `judge(127)` or `%judge 127` (after `%load_ext pagedkv_lib.judge`) grade what is
defined there, in a forked child (the learner's own code: no sandbox), reporting without timings so stored
outputs stay stable. `show_reference(127)` prints the library's implementation (a Triton exercise's kernels
and their `@triton.jit` helpers) once the status file records a pass, so a notebook never gives an exercise
away.
"""
from __future__ import annotations

import inspect
import shlex

from . import registry, report, status
from .grading import Limits, Result, Submission, grade
from .outcome import PASSED


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


def reference_source(exercise_id: int) -> str:
    """The source of the library objects that exercise `exercise_id` shows as its reference; a Triton
    kernel comes after the `@triton.jit` helpers it calls (each helper printed once)."""
    parts = []
    shown = set()
    exercise = registry.get(exercise_id)
    for target in exercise.reference or exercise.oracle.values():
        obj = registry.resolve(target)
        for helper in jit_helpers(obj):
            if helper not in shown:
                shown.add(helper)
                name = f"{helper.fn.__module__}.{helper.fn.__name__}"
                parts.append(f"# {name} (a helper of the kernel below):\n{inspect.getsource(helper.fn)}")
        parts.append(f"# {target.replace(':', '.')}:\n{inspect.getsource(getattr(obj, 'fn', obj))}")
    return "\n\n".join(parts)


def jit_helpers(kernel) -> list:
    """The `@triton.jit` functions that `kernel` calls, directly or through each other, callees first
    ([] for an object that is not a Triton function)."""
    fn = getattr(kernel, "fn", None)
    if fn is None:
        return []
    found = []
    for name in fn.__code__.co_names:
        helper = fn.__globals__.get(name)
        if type(helper) is type(kernel) and helper is not kernel:
            for inner in [*jit_helpers(helper), helper]:
                if inner not in found:
                    found.append(inner)
    return found


def show_reference(exercise_id: int) -> bool:
    """Print the library's implementation of exercise `exercise_id` if your version passed; else say how to
    unlock it. Returns whether it was shown."""
    exercise = registry.get(exercise_id)
    entry = status.entry(exercise.id)
    if entry is None or entry.get("verdict") != PASSED:
        state = "not graded yet" if entry is None else f"last verdict: {entry['verdict']}"
        print(f"The reference of exercise {exercise.id} ({exercise.title}) opens once your own version "
              f"passes ({state}). Grade it with `python practice/judge.py {exercise.id}`, or "
              f"`judge({exercise.id})` in a notebook, then run this cell again.")
        return False
    print(reference_source(exercise.id))
    return True
