"""Loading a submission inside the child: the library's answers closed first, then the graded names checked.

`close_library` replaces every library object the exercise grades (or forbids) with one that refuses to work
and blocks `import solutions...`; the guard (guards.py) then keeps the solution files and the oracle's source
from being read. `load` imports the submitted file (or takes a notebook's globals): each graded name must be
a top-level def or class written there, and a class may not inherit from a class defined elsewhere.
"""
from __future__ import annotations

import ast
import importlib.abc
import importlib.util
import inspect
import os
import sys

from .outcome import NOT_IMPLEMENTED, RUNTIME_ERROR, ForbiddenCall, Outcome
from .registry import LIBRARY_DIR, SOLUTIONS_DIR, resolve


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
    """Poison the library objects the exercise grades or forbids, wherever pagedkv_lib holds them, and block
    `import solutions`. Returns what the guard keeps closed: (files, directories, allowed files): the source
    and cached bytecode of the modules that hold those objects, and solutions/ except `graded_file`."""
    hidden = set()
    for target in (*exercise.oracle.values(), *exercise.forbidden):
        original = resolve(target)
        poison = _poisoned(original, f"{target.replace(':', '.')} is the library's implementation (the "
                                     f"oracle of exercise {exercise.id}): write your own")
        for name, module in list(sys.modules.items()):        # the judge's own modules too (case data)
            if module is not None and name.startswith("pagedkv_lib"):
                for attr, value in list(vars(module).items()):
                    if value is original:
                        setattr(module, attr, poison)
        source = os.path.realpath(sys.modules[target.partition(":")[0]].__file__)
        cache = os.path.join(os.path.dirname(source), "__pycache__")
        stem = os.path.splitext(os.path.basename(source))[0] + "."
        hidden.add(source)
        if os.path.isdir(cache):
            hidden.update(os.path.join(cache, f) for f in os.listdir(cache) if f.startswith(stem))
    sys.meta_path.insert(0, _NoSolutions())
    for name in [n for n in sys.modules if n == "solutions" or n.startswith("solutions.")]:
        del sys.modules[name]
    allowed = set()
    if graded_file:                                  # the graded file, and its cached bytecode (read on import)
        real = os.path.realpath(graded_file)
        allowed = {real, importlib.util.cache_from_source(real)}
    return frozenset(hidden), (str(SOLUTIONS_DIR) + os.sep,), frozenset(allowed)


def _poisoned(original, message: str):
    def refuse(*args, **kwargs):
        raise ForbiddenCall(message)

    refuse.__judge_poison__ = message
    if not isinstance(original, type):
        return refuse

    class Poisoned:
        __doc__ = message
        __judge_poison__ = message

        def __new__(cls, *args, **kwargs):
            raise ForbiddenCall(message)

        def __init_subclass__(cls, **kwargs):
            raise ForbiddenCall(message)

    Poisoned.__name__ = Poisoned.__qualname__ = original.__name__
    return Poisoned


def load(path: str | None, namespace: dict | None, exercise):
    """(namespace, files) of the submission: a file's module globals, or a notebook's globals."""
    if path is None:
        ns, files, here, label = namespace, (), _not_library, "the notebook"
    else:
        path = os.path.realpath(path)
        _check_source(path, exercise.functions)
        sys.path.insert(0, os.path.dirname(path))          # its own helper modules, if any
        spec = importlib.util.spec_from_file_location("submission", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["submission"] = module
        try:
            spec.loader.exec_module(module)
        except BaseException as exc:
            o = Outcome.of_exception(exc, (path,))
            raise LoadError(o.verdict, f"while importing the file: {o.message}", o.hint, o.details) from None
        ns, files, label = vars(module), (path,), os.path.basename(path)
        here = lambda f: os.path.realpath(f) == path  # noqa: E731
    if not any(name in ns for name in exercise.functions):
        names = ", ".join(exercise.functions)
        raise LoadError(NOT_IMPLEMENTED, f"{label} defines none of what exercise {exercise.id} grades ({names})",
                        f"is it the file of exercise {exercise.id}? Its stub is practice/{exercise.filename}")
    ns = dict(ns)
    for name in exercise.functions:
        if name not in ns:
            ns[name] = _missing(name)
            continue
        try:
            problem = _foreign(name, ns[name], here)
        except BaseException as exc:
            problem = f"`{name}` cannot be inspected: {type(exc).__name__}: {exc}"
        if problem:
            raise LoadError(RUNTIME_ERROR, problem, "define the graded names yourself, in your code")
    return ns, files


def _check_source(path: str, names) -> None:
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
    except SyntaxError as exc:
        raise LoadError(RUNTIME_ERROR, f"SyntaxError at line {exc.lineno}: {exc.msg}") from None
    except BaseException as exc:
        raise LoadError(RUNTIME_ERROR, f"cannot read {path}: {type(exc).__name__}: {exc}") from None
    defs = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
    for name in names:
        if name not in defs and name in bound:
            raise LoadError(RUNTIME_ERROR, f"`{name}` is not a top-level def or class of "
                            f"{os.path.basename(path)}", "write graded names in the file, don't import them")


def _missing(name: str):
    def missing(*args, **kwargs):
        raise NotImplementedError(f"`{name}` is not defined")
    return missing


def _not_library(filename: str) -> bool:
    real = os.path.realpath(filename)
    return not any(real.startswith(str(d) + os.sep) for d in (LIBRARY_DIR, SOLUTIONS_DIR))


def _foreign(name: str, obj, here) -> str | None:
    """Why `obj` does not count as written by the learner, or None."""
    if hasattr(obj, "__judge_poison__"):
        return f"`{name}` is imported: {obj.__judge_poison__}"
    if inspect.isclass(obj):
        for base in obj.__mro__[1:-1]:
            if base.__module__ != obj.__module__:
                return f"class `{name}` inherits from {base.__module__}.{base.__qualname__}: write your own"
        for attr, value in vars(obj).items():
            fn = getattr(value, "__func__", getattr(value, "fget", value))
            if inspect.isfunction(fn) and not here(fn.__code__.co_filename):
                return f"`{name}.{attr}` comes from {fn.__code__.co_filename}, not from the graded code"
        return None
    fn = inspect.unwrap(obj) if callable(obj) else obj
    if not inspect.isfunction(fn):
        return f"`{name}` must be a function written with def, got {type(obj).__name__}"
    if not here(fn.__code__.co_filename):
        return f"`{name}` comes from {fn.__code__.co_filename}, not from the graded code"
    return None
