"""`show_reference(ID)`: the library's implementation of an exercise, shown only once the learner's own
version has passed (the status file records it), so that a notebook never gives an exercise away. For a
Triton exercise that is the library's kernel and launcher, not the PyTorch oracle the cases compare with."""
from __future__ import annotations

import inspect

from . import registry, status
from .outcome import PASSED


def reference_source(exercise_id: int) -> str:
    """The source of the library objects that exercise `exercise_id` shows as its reference."""
    exercise = registry.get(exercise_id)
    parts = []
    for target in exercise.reference_targets():
        obj = registry.resolve(target)
        source = inspect.getsource(getattr(obj, "fn", obj))          # a @triton.jit kernel wraps its fn
        parts.append(f"# {target.replace(':', '.')}:\n{source}")
    return "\n\n".join(parts)


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
