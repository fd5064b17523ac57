"""Hidden cases: one module `exNNN.py` per exercise, holding its cases as data and its checks with hints.

A case module defines
    build(seed, device) -> list[Case]       fixed edge cases, then seeded random ones (inputs, no answers)
    run(ns, case) -> dict                   calls the graded names found in `ns` on copies of the inputs and
                                            returns what can be observed, through `observe`; it runs in the
                                            child for the submission and in the parent for the oracle
    check(case, expected, got) -> Outcome   compares two observations; a hint names the usual mistake
    bench(ns, device) -> dict   (optional)  figures printed by `judge.py ID --bench`; with a speed bar in
                                            the card, bench(ns, device, mark=): `mark(i)` has the parent
                                            read its clock (kernel_harness.timed_calls)
build and check run in the judge's process only (a sandboxed child gets the cases from it, and its file tree
lacks the library's answer: judge/harness.py), run and bench in the child too.
Exceptions raised by submitted code inside `run` give the case its verdict (runtime error, not implemented,
memory limit); scripted cases (127, 129) catch them per step instead, see `script.py`. `exercises.py` holds
each exercise's card (title, notebook, oracle, limits). Importing this package imports no torch (the judge's
--list reads the cards); the case modules do.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field


@dataclass
class Case:
    name: str                       # "fixed/worked_example", "random/3"
    args: dict                      # the inputs; the child sees them, never the expected results
    show: list = field(default_factory=list)   # lines that describe the call for a failure report


def fresh(value):
    """A deep copy of case inputs, so that neither side can change the case itself."""
    return copy.deepcopy(value)


def observe(value, depth: int = 0):
    """`value` as plain data the parent can load safely: tensors, ints, floats, str, None, lists, dicts.

    Anything else becomes {"__opaque__": type name, "repr": ...}, which never equals an expected value.
    """
    import torch

    if depth > 20:
        return {"__opaque__": "too deeply nested", "repr": ""}
    t = type(value)
    if value is None or t in (bool, int, float, str):
        return value
    if isinstance(value, torch.Tensor):
        return value.detach().as_subclass(torch.Tensor).cpu().clone().contiguous()
    if t in (list, tuple):
        items = [observe(v, depth + 1) for v in value]
        return items if t is list else tuple(items)
    if t is dict:
        return {observe(k, depth + 1): observe(v, depth + 1) for k, v in value.items()}
    try:
        text = repr(value)[:120]
    except Exception:
        text = "?"
    return {"__opaque__": f"{t.__module__}.{t.__qualname__}", "repr": text}


def diff_free(a, b) -> bool:
    """True when two case inputs are equal (tensors elementwise, NaN equal to NaN, objects by their state)."""
    from pagedkv_lib.judge.cases.compare import diff

    return diff(observe(_state(a)), observe(_state(b))) is None


def _state(value):
    import torch

    if isinstance(value, (list, tuple)):
        return [_state(v) for v in value]
    if isinstance(value, dict):
        return {k: _state(v) for k, v in value.items()}
    if hasattr(value, "__dict__") and not isinstance(value, torch.Tensor):
        return _state(vars(value))
    return value


def call_text(fn: str, **kwargs) -> str:
    """`slot_mapping_for(block_table=[5, 6], ...)` with long values abbreviated."""
    from pagedkv_lib.judge.cases.compare import show

    return f"{fn}(" + ", ".join(f"{k}={show(v)}" for k, v in kwargs.items()) + ")"


def tensor_text(name: str, t, note: str = "") -> str:
    dtype = str(t.dtype).replace("torch.", "")
    small = f" = {t.tolist()}" if t.numel() <= 16 and not t.is_floating_point() else ""
    return f"{name}: shape {list(t.shape)} {dtype}{small}{note}"


ELSEWHERE = {  # the device graded -> (the case module's clauses that only the other device checks, in words)
    "cpu": ("GPU_ONLY", "checked only with --device cuda"),
    "cuda": ("CPU_ONLY", "checked only with --device cpu (in Triton's interpreter)"),
}


def checked_elsewhere(result) -> list:
    """The report's lines for the clauses of a graded exercise that only the other device's cases check: its
    case module's GPU_ONLY on the CPU (a case too big for it), CPU_ONLY on a GPU (what only the interpreter
    can see)."""
    import importlib

    module = importlib.import_module(f"pagedkv_lib.judge.cases.ex{result.exercise_id}")
    attribute, words = ELSEWHERE.get(result.device, ("", ""))
    return [f"{words}: {clause}" for clause in getattr(module, attribute, ())]
