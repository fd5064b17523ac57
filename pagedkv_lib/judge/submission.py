"""Loading a submission inside the child, with the library's answers closed first.

`close_library` replaces every library object the exercise grades (or forbids) with one that refuses to work,
wherever pagedkv_lib holds it, and blocks `import solutions...`; the guard (guards.py) then keeps the solution
files and the oracle's source from being read. A file imported afterwards can only reach the refusing
objects. A notebook's globals were made before: a graded name there may not be a library object, nor a
class built on one.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import inspect
import os
import sys

from .outcome import NOT_IMPLEMENTED, RUNTIME_ERROR, ForbiddenCall, Outcome
from .registry import SOLUTIONS_DIR, resolve


class LoadError(Exception):
    """The submission cannot be graded at all; `outcome` says why."""

    def __init__(self, verdict: str, message: str, hint: str = "", details=()):
        super().__init__(message)
        self.outcome = Outcome(verdict, message, hint, list(details))


class _NoSolutions(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname == "solutions" or fullname.startswith("solutions."):
            raise ImportError("the reference solutions cannot be imported while grading")
        return None


def close_library(exercise, graded_file: str | None = None):
    """Poison the library objects the exercise grades or forbids and block `import solutions`. Returns what
    the guard keeps closed, (files, directories, allowed files): the source and cached bytecode of the
    modules that hold those objects, and solutions/ except `graded_file`; and the objects themselves."""
    hidden, originals = set(), []
    for target in (*exercise.oracle.values(), *exercise.forbidden):
        original = resolve(target)
        originals.append(original)
        poison = _poisoned(original, f"{target.replace(':', '.')} is the library's implementation (the "
                                     f"oracle of exercise {exercise.id}): write your own")
        for name, module in list(sys.modules.items()):        # the judge's own modules too (case data)
            if module is not None and name.startswith("pagedkv_lib"):
                for attr, value in list(vars(module).items()):
                    if value is original:
                        setattr(module, attr, poison)
        source = os.path.realpath(sys.modules[target.partition(":")[0]].__file__)
        cache = os.path.join(os.path.dirname(source), "__pycache__")
        stem = os.path.basename(source)[:-3] + "."
        hidden.add(source)
        if os.path.isdir(cache):
            hidden.update(os.path.join(cache, f) for f in os.listdir(cache) if f.startswith(stem))
    sys.meta_path.insert(0, _NoSolutions())
    for name in [n for n in sys.modules if n == "solutions" or n.startswith("solutions.")]:
        del sys.modules[name]
    allowed = set()
    if graded_file:                                  # the graded file and its bytecode (read on import)
        real = os.path.realpath(graded_file)
        allowed = {real, importlib.util.cache_from_source(real)}
    return frozenset(hidden), (str(SOLUTIONS_DIR) + os.sep,), frozenset(allowed), tuple(originals)


def _poisoned(original, message: str):
    def refuse(*args, **kwargs):
        raise ForbiddenCall(message)

    if not isinstance(original, type):
        return refuse

    class Poisoned:
        __doc__ = message

        def __new__(cls, *args, **kwargs):
            raise ForbiddenCall(message)

        def __init_subclass__(cls, **kwargs):
            raise ForbiddenCall(message)

    Poisoned.__name__ = Poisoned.__qualname__ = original.__name__
    return Poisoned


def load(path: str | None, namespace: dict | None, exercise, originals=()):
    """(namespace, files) of the submission: a file's module globals, or a notebook's globals, where no
    graded name may be one of the library's `originals`."""
    if path is None:
        ns, files, label = dict(namespace), (), "the notebook"
    else:
        path = os.path.realpath(path)
        sys.path.insert(0, os.path.dirname(path))          # its own helper modules, if any
        spec = importlib.util.spec_from_file_location("submission", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["submission"] = module
        try:
            spec.loader.exec_module(module)
        except BaseException as exc:
            o = Outcome.of_exception(exc, (path,))
            raise LoadError(o.verdict, f"while importing the file: {o.message}", o.hint, o.details) from None
        ns, files, label = dict(vars(module)), (path,), os.path.basename(path)
    if not any(name in ns for name in exercise.functions):
        names = ", ".join(exercise.functions)
        raise LoadError(NOT_IMPLEMENTED, f"{label} defines none of what exercise {exercise.id} grades "
                        f"({names})", f"is it the file of exercise {exercise.id}? Its stub is "
                        f"practice/{exercise.filename}")
    for name in exercise.functions:
        if name not in ns:
            ns[name] = _missing(name)
        elif _from_library(ns[name], originals):
            raise LoadError(RUNTIME_ERROR, f"`{name}` is the library's own (the oracle of exercise "
                            f"{exercise.id}), not code of yours", "define the graded names yourself")
    return ns, files


def _from_library(obj, originals) -> bool:
    """The object, what it wraps, or a class it is built on, is one of the library's closed objects."""
    try:
        found = [inspect.unwrap(obj), *(getattr(obj, "__mro__", ())[1:])]
        return any(any(o is x for x in originals) for o in [obj, *found])
    except Exception:                                # a hostile object that breaks inspection
        return True


def _missing(name: str):
    def missing(*args, **kwargs):
        raise NotImplementedError(f"`{name}` is not defined")
    return missing
