"""Scripted cases for stateful exercises (127, 129): a list of operations, observed after every step.

`run_script` applies the ops to a fresh state built from the graded names and records, after each op,
its return value and a snapshot of everything the contract makes observable. Exceptions end the script
(recorded as the step's error), except on ops that may raise by contract, where what was raised is recorded
and the script goes on: the promised class's name when the exception is an instance of that class (the class
object itself, taken when the case module was imported, before the submission: a class merely named
ValueError is not one), else its own qualified name. `compare_steps` finds the first step where the
submission and the oracle differ and shows the ops so far, expected vs got, and the hint for that key.
"""
from __future__ import annotations

import torch

from pagedkv_lib.judge.cases.compare import diff, show
from pagedkv_lib.judge.outcome import ForbiddenCall, Outcome, wrong

from . import observe

_NOT_CONTRACT = (NotImplementedError, MemoryError, RecursionError, ForbiddenCall)


def run_script(ops, apply, snapshot, may_raise=None) -> dict:
    """{"steps": [...]}, step i {"ret": ..., **snapshot}, {"raised": name, **snapshot} or {"error": ...};
    `may_raise`: {op name: the exception class its contract promises}."""
    may_raise = may_raise or {}
    state, steps = {}, []
    for op in ops:
        try:
            try:
                step = {"ret": observe(apply(state, op))}
            except Exception as exc:
                if op[0] not in may_raise or isinstance(exc, _NOT_CONTRACT):
                    raise
                step = {"raised": raised(exc, may_raise[op[0]])}
            step.update(snapshot(state, op))
        except BaseException as exc:
            steps.append({"error": Outcome.of_exception(exc).to_dict()})
            break
        steps.append(step)
    return {"steps": steps}


def raised(exc: BaseException, promised: type) -> str:
    """`promised.__name__` when `exc` is an instance of `promised` (as `except promised` decides: by its
    type's real bases), else the qualified name of what it is, saying that it is not one."""
    kind = type(exc)
    if issubclass(kind, promised):
        return promised.__name__
    return f"{kind.__module__}.{kind.__qualname__}, not a {promised.__name__}"


def wrong_class_hint(got_raised) -> str:
    """The hint for a step that raised a class NAMED as the promised one but not it ("" for any other)."""
    if not (isinstance(got_raised, str) and ", not a " in got_raised):
        return ""
    what, promised = got_raised.split(", not a ", 1)
    if what.rpartition(".")[2] != promised:
        return ""
    return (f"raise the builtin {promised} (or a subclass of it): {what} is another class, whatever its "
            f"name, and a caller's `except {promised}` does not catch it")


def compare_steps(ops, expected: dict, got: dict, keys, render, hint, trail=None, error_hint=None):
    """The Outcome of the first differing step; `render(op, step)`, `hint(i, key, e, g)` come per exercise,
    and optionally `trail(ops, steps, i)`, the lines that lead to step i (default: the last ten ops, each
    with what the oracle returned), and `error_hint(i, steps)`, the hint for a step where the submission
    raised (steps: the oracle's; every step before i agreed), when the exception brought none."""
    exp_steps, got_steps = expected["steps"], got["steps"]
    for i, e in enumerate(exp_steps):
        if "error" in e:
            raise RuntimeError(f"the oracle failed at step {i + 1} of its own script: {e['error']}")
        g = got_steps[i] if i < len(got_steps) else {"error": {"message": "the script stopped"}}
        trail_lines = (trail or _numbered(render))(ops, exp_steps, i)
        if "error" in g:
            outcome = Outcome.from_child(g["error"])
            outcome.details = [f"at step {i + 1}, {render(ops[i], None)}:", *trail_lines, *outcome.details]
            if error_hint is not None and not outcome.hint:
                outcome.hint = error_hint(i, exp_steps)
            return outcome
        for key in keys:
            if key not in e and key not in g:
                continue
            found = diff(e.get(key), g.get(key))
            if found is None:
                continue
            path, ev, gv = found
            where = f"{key}{path}"
            whole = [] if isinstance(e.get(key), torch.Tensor) else [f"expected {key}: {show(e.get(key))}",
                                                              f"got      {key}: {show(g.get(key))}"]
            message = f"after step {i + 1}, {render(ops[i], None)}: {where} expected {show(ev)}, " \
                      f"got {show(gv)}"
            return wrong(message, hint(i, key, e, g), [*trail_lines, *whole])
    return None


def _numbered(render, last: int = 10):
    """trail(ops, steps, upto): the ops up to step `upto`, numbered, each with what the oracle returned (the
    last `last` of them)."""
    def trail(ops, steps, upto: int) -> list:
        lines = [f"{j + 1:>3}. {render(ops[j], steps[j] if j < upto else None)}"
                 for j in range(max(0, upto - last + 1), upto + 1)]
        return ([f"... {upto + 1 - last} earlier ops"] if upto + 1 > last else []) + lines
    return trail
