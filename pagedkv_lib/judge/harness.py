"""The harness: which library files a sandboxed child gets for an exercise, and which it never gets.

An exercise's closed set is the modules of its oracle and its forbidden objects (the card's `oracle` and
`forbidden`) and the card's `closed` modules (others that could do the graded work). The harness is the
static import closure of what the child runs (judge/child.py, the exercise's case module, and the library
modules its reference solution imports, which the exercise may use) minus the closed set: a closed module
is absent from the sandbox, so importing it is an ImportError and no object in the child's memory holds the
answer. The closure reads import statements (lazy ones inside functions too) with `ast`, without importing
anything. A case module's `PARENT_SIDE` functions (the case modules' interface to the judge: what grading
calls on them) run only in the judge's own process (a sandboxed child gets its cases from the judge), so
their imports do not count; nor do the `PARENT_MODULES`, the judge's own case code that drives the library
(case scripts simulated on it, the attention checks' fp64 reference): the case modules that other case
modules import only inside functions, never at their top level. The list is written out, not found by a walk
over every case module (that would cost each grading call a tenth of a second): a test makes that walk and
fails when a module is missing from the list, or listed but imported at a top level.
"""
from __future__ import annotations

import ast
import functools
import re
import textwrap
from pathlib import Path

PACKAGE = "pagedkv_lib"
PACKAGE_DIR = Path(__file__).resolve().parents[1]
CASES = f"{PACKAGE}.judge.cases"
PARENT_SIDE = ("build", "make_case", "check", "bench_report", "library_kernel")    # run by the judge only
PARENT_MODULES = frozenset(f"{CASES}.{m}" for m in ("attention_checks", "ex127_data", "ex129_data",
                                                       "ex134_checks", "ex136_data"))  # imported in functions
ROOTS = (f"{PACKAGE}.judge.child",)


def module_file(name: str) -> Path | None:
    """The source file of library module `name` ("pagedkv_lib.core.block_pool"), or None if none."""
    if name != PACKAGE and not name.startswith(PACKAGE + "."):
        return None
    base = PACKAGE_DIR.joinpath(*name.split(".")[1:])
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _exported(name: str) -> str | None:
    """`from pagedkv_lib import BlockPool`: the module that the package's lazy exports take it from."""
    import pagedkv_lib

    where = getattr(pagedkv_lib, "_WHERE", {}).get(name)
    return f"{PACKAGE}.{where}" if where else None


def parsed(name: str) -> tuple:
    """(the top-level statements of library module `name`, the package its relative imports start from)."""
    path = module_file(name)
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    if path.name == "__init__.py":
        return tree.body, name
    return tree.body, name.rpartition(".")[0]


@functools.cache
def imports_of(name: str) -> frozenset:
    """The library modules that module `name`'s import statements name (at any depth of its code)."""
    body, package = parsed(name)
    kept = [n for n in body if not (name.startswith(CASES + ".") and isinstance(n, ast.FunctionDef)
                                    and n.name in PARENT_SIDE)]
    return imports_in(kept, package)


def imports_in(statements, package: str) -> frozenset:
    """The library modules that the import statements in `statements` (and the blocks inside them) name;
    `package` is where a relative import starts."""
    todo = list(statements)
    found = set()
    while todo:
        node = todo.pop()
        if _type_checking_only(node):             # `if TYPE_CHECKING:` never runs: its imports need no file
            todo.extend(node.orelse)
            continue
        for block in ("body", "orelse", "finalbody", "handlers", "cases"):   # statements only: imports are
            todo.extend(getattr(node, block, ()))                            # statements
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if module_file(sub) is not None:
                    found.add(sub)
                elif base == PACKAGE:
                    found.add(_exported(alias.name) or base)
    return frozenset(n for n in found if module_file(n) is not None)


def _type_checking_only(node) -> bool:
    """`if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`): a block for type checkers, never run."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def closure(roots) -> frozenset:
    """Every library module that `roots` import, directly or not, with the packages above each."""
    seen = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen or name in PARENT_MODULES or module_file(name) is None:
            continue
        seen.add(name)
        parts = name.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))
        todo.extend(imports_of(name))
    return frozenset(seen)


def solution_imports(exercise) -> frozenset:
    """The library modules that the exercise's reference solution imports (what a submission may use)."""
    path = exercise.solution_path
    if not path.is_file():
        return frozenset()
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            if node.module == PACKAGE:
                found.update(filter(None, (_exported(alias.name) for alias in node.names)))
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return frozenset(n for n in found if module_file(n) is not None)


def closed_modules(exercise) -> frozenset:
    """The modules that hold what exercise `exercise` grades, or could do its work: never in its sandbox."""
    targets = (*exercise.oracle.values(), *exercise.forbidden)
    return frozenset({t.partition(":")[0] for t in targets} | set(exercise.closed))


def needed_modules(exercise) -> frozenset:
    """What the child runs for `exercise`: the import closure of the child, its case module, and the library
    modules its reference solution imports."""
    return closure((*ROOTS, f"{CASES}.ex{exercise.id}", *solution_imports(exercise)))


def closed_objects(exercise) -> dict:
    """module -> the names in it that exercise `exercise` grades or forbids."""
    found: dict = {}
    for target in (*exercise.oracle.values(), *exercise.forbidden):
        module, _, attr = target.partition(":")
        found.setdefault(module, set()).add(attr)
    return found


def _defined(node) -> set:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def reduced_source(name: str, removed) -> str:
    """Module `name`'s source without the top-level definitions of `removed`, nor the private ones ("_x")
    that only they used: what an exercise may use that lives beside its answer (128's ModelInputs beside
    prepare_prefill, 135's gpu_dot_rule beside the puzzles' kernels), without the answer."""
    text = module_file(name).read_text(encoding="utf-8")
    body = ast.parse(text).body
    gone = set(removed)
    while True:
        kept = [n for n in body if not _defined(n) & gone]
        used = {x.id for n in kept for x in ast.walk(n) if isinstance(x, ast.Name)}
        unused = {d for n in kept for d in _defined(n) if d.startswith("_") and d not in used}
        if not unused:
            break
        gone |= unused
    lines = text.splitlines(keepends=True)
    for node in reversed([n for n in body if _defined(n) & gone]):
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1
        del lines[start : node.end_lineno]
    note = textwrap.fill(f"The judge's sandbox copy (judge/harness.py), without {', '.join(sorted(gone))}.",
                         100, initial_indent="# ", subsequent_indent="# ")
    return re.sub(r"\n{4,}", "\n\n\n", "".join(lines)) + note + "\n"


@functools.cache
def harness_files(exercise_id: int) -> tuple:
    """(path relative to the library's parent, source path, None or the reduced source) of every library
    file the child of `exercise_id` gets: a needed module that holds a graded or forbidden object comes
    reduced (`reduced_source`); a module of the card's `closed` list never comes."""
    from . import registry

    exercise = registry.get(exercise_id)
    needed = needed_modules(exercise)
    objects = closed_objects(exercise)
    files = []
    for name in sorted(needed - set(exercise.closed)):
        path = module_file(name)
        text = reduced_source(name, objects[name]) if name in objects else None
        files.append((str(path.relative_to(PACKAGE_DIR.parent)), str(path), text))
    return tuple(files)
