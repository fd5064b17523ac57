"""A notebook teaches an exercise without giving it away, and its exercise cells end the same clean way.

For every notebook source, against the judge's registry (so exercises added later are covered too):
- no `inspect.getsource` of a graded or forbidden library object, unless the call sits under
  `if show_reference(ID):`, which opens only once the learner's own version has passed;
- no cell defines a graded name (`def paged_attention_decode`, `class BlockPool`) with a body that is more
  than a stub (`raise NotImplementedError`);
- no cell defines a graded function under another name: a def whose first parameters are those of a graded
  function (three or more), or a class with two or more of a graded class's methods;
- a cell that calls `judge(...)` ends with `result = judge(...)`, never with a bare call whose Result repr
  would become the cell's output;
- every notebook writes the call one way, `judge(ID)` (it grades the caller's globals), in code and prose.
Code that is wrong on purpose (a bug shown by its symptoms) carries `BUGGY on purpose` on its def line or the
line above, and is exempt. The checks are tested on small planted sources first.
"""
from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from pagedkv_lib.judge import registry

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "notebooks" / "src").glob("*.py"))
BUGGY = "BUGGY on purpose"
# notebooks whose owners re-cut them in their own branches; strict: remove an entry once it passes
PENDING: dict[str, str] = {}  # notebook -> what remains: a strict xfail, removed when it is fixed


def graded() -> tuple[set, dict, dict]:
    """(library names the notebooks must not print, graded function -> its parameters, graded class ->
    its public methods), over every exercise of the registry."""
    hidden, functions, classes = set(), {}, {}
    for exercise in registry.EXERCISES.values():
        for target in (*exercise.oracle.values(), *exercise.forbidden):
            if target not in exercise.statement:      # a puzzle's spec is its statement: shown on purpose
                hidden.add(target.partition(":")[2])
        hidden.update(exercise.oracle)
        for name, target in exercise.oracle.items():
            obj = registry.resolve(target)
            if inspect.isclass(obj):
                classes[name] = {m for m in vars(obj) if not m.startswith("_") and callable(getattr(obj, m))}
            else:
                functions[name] = list(inspect.signature(obj).parameters)
    return hidden, functions, classes


def _is_stub(node) -> bool:
    """A def whose body is only a docstring and `raise NotImplementedError`; a class of such methods."""
    if isinstance(node, ast.ClassDef):
        methods = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        return all(_is_stub(m) for m in methods)
    body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return all(isinstance(s, ast.Raise) and "NotImplementedError" in ast.unparse(s.exc) for s in body)


def _gated(node, parents) -> bool:
    """Whether `node` sits under `if show_reference(...)`."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "show_reference(" in ast.unparse(node.test):
            return True
    return False


def give_aways(source: str, hidden: set, functions: dict, classes: dict) -> list[str]:
    """Every place where `source` (a notebook's percent-format source) prints or builds a graded answer."""
    tree, lines = ast.parse(source), source.splitlines()
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []

    def buggy(node) -> bool:
        return any(BUGGY in lines[i] for i in range(max(0, node.lineno - 2), node.lineno))

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("getsource") and node.args:
            shown = ast.unparse(node.args[0])
            names = set(shown.replace("(", ".").replace(")", ".").split("."))
            if names & hidden and not _gated(node, parents):
                found.append(f"line {node.lineno}: prints the library's `{shown}` before the exercise passed "
                             "(put it under `if show_reference(ID):`)")
        if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) or _is_stub(node) or buggy(node):
            continue
        if node.name in functions or node.name in classes:
            found.append(f"line {node.lineno}: defines the graded `{node.name}` with a body (a stub raises "
                         "NotImplementedError)")
        elif isinstance(node, ast.FunctionDef):
            params = [a.arg for a in node.args.args]
            for name, wanted in functions.items():
                if len(wanted) >= 3 and params[:len(wanted)] == wanted:
                    found.append(f"line {node.lineno}: `{node.name}` takes the parameters of the graded "
                                 f"`{name}`: it builds the exercise's answer in the notebook")
                    break
        else:
            methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef) and not _is_stub(n)}
            for name, wanted in classes.items():
                if len(methods & wanted) >= 2:
                    found.append(f"line {node.lineno}: class `{node.name}` implements "
                                 f"{sorted(methods & wanted)} of the graded `{name}`")
    return found


def bare_judge_calls(source: str) -> list[str]:
    """Top-level statements `judge(...)` whose value a notebook would display."""
    return [f"line {s.lineno}: `{ast.unparse(s)}` shows a Result repr; write `result = {ast.unparse(s)}`"
            for s in ast.parse(source).body
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
            and ast.unparse(s.value.func).split(".")[-1] == "judge"]


def other_judge_forms(source: str) -> list[str]:
    """Calls of `judge` with more than the exercise id, in a cell or in its prose (`judge(138, globals())`):
    the course writes one form, `judge(ID)`."""
    return [f"line {source.count(chr(10), 0, m.start()) + 1}: `{m.group(0)}...`: write `judge(ID)`"
            for m in re.finditer(r"\bjudge\(\s*\d+\s*,", source)]


# ------------------------------------------------------------------------------------------------------------
# the checks, on planted sources

PLANTED_HIDDEN = {"paged_attention_decode", "_store_kvcache_kernel", "BlockPool"}
PLANTED_FUNCTIONS = {"paged_attention_decode": ["q", "k_cache", "v_cache", "block_tables", "context_lens",
                                                "scale"]}
PLANTED_CLASSES = {"BlockPool": {"allocate", "free", "fork", "num_free", "ref_count"}}


@pytest.mark.parametrize("source, expected", [
    ("import inspect\nprint(inspect.getsource(pk.paged_attention_decode))\n", "prints the library's"),
    ("print(inspect.getsource(ks._store_kvcache_kernel.fn))\n", "prints the library's"),
    ("print(inspect.getsource(pk.BlockPool.free))\n", "prints the library's"),
    ("def paged_attention_decode(q, k_cache, v_cache, block_tables, context_lens, scale):\n    return q\n",
     "defines the graded"),
    ("def mine(q, k_cache, v_cache, block_tables, context_lens, scale, extra=1):\n    return q\n",
     "takes the parameters"),
    ("class MiniPool:\n    def allocate(self, n):\n        return [0]\n\n    def free(self, blocks):\n"
     "        pass\n", "implements ['allocate', 'free']"),
])
def test_the_check_finds_a_planted_give_away(source, expected):
    found = give_aways(source, PLANTED_HIDDEN, PLANTED_FUNCTIONS, PLANTED_CLASSES)
    assert len(found) == 1 and expected in found[0], found


@pytest.mark.parametrize("source", [
    "def paged_attention_decode(q, k_cache, v_cache, block_tables, context_lens, scale):\n"
    "    raise NotImplementedError  # your code here\n",
    "class BlockPool:\n    def __init__(self, n):\n        raise NotImplementedError\n\n"
    "    def allocate(self, n):\n        raise NotImplementedError\n",
    "if show_reference(131):\n    print(inspect.getsource(ks._store_kvcache_kernel.fn))\n",
    "print(inspect.getsource(FirstFitAllocator.place))\n",
    "def no_cut(q, k_cache, v_cache, block_tables, context_lens, scale):  # BUGGY on purpose: the tail\n"
    "    return q\n",
])
def test_the_check_accepts_stubs_gated_reveals_and_marked_bugs(source):
    assert give_aways(source, PLANTED_HIDDEN, PLANTED_FUNCTIONS, PLANTED_CLASSES) == []


def test_the_check_finds_a_bare_judge_call():
    assert len(bare_judge_calls("from pagedkv_lib.judge import judge\njudge(132)\n")) == 1
    assert bare_judge_calls("result = judge(132)\n") == []


def test_the_check_finds_a_judge_call_in_another_form():
    found = other_judge_forms("# `judge(138, globals())` grades it\nresult = judge(138, globals())\n")
    assert [f.split(":")[0] for f in found] == ["line 1", "line 2"], found
    assert other_judge_forms("# `judge(138)` grades it\nresult = judge(138)\n") == []


# ------------------------------------------------------------------------------------------------------------
# the notebooks

def _pending(src, request):
    if src.stem in PENDING:
        reason = f"its owner re-cuts it: {PENDING[src.stem]}"
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


@pytest.mark.parametrize("src", SOURCES, ids=[s.stem for s in SOURCES])
def test_a_notebook_does_not_give_an_exercise_away(src, request):
    _pending(src, request)
    found = give_aways(src.read_text(), *graded())
    assert not found, f"{src.name}:\n  " + "\n  ".join(found)


@pytest.mark.parametrize("src", SOURCES, ids=[s.stem for s in SOURCES])
def test_exercise_cells_end_with_an_assignment(src):
    found = bare_judge_calls(src.read_text())
    assert not found, f"{src.name}:\n  " + "\n  ".join(found)


@pytest.mark.parametrize("src", SOURCES, ids=[s.stem for s in SOURCES])
def test_every_notebook_calls_the_judge_in_one_form(src):
    found = other_judge_forms(src.read_text())
    assert not found, f"{src.name}:\n  " + "\n  ".join(found)
