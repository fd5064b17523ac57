"""The package's layout shows its architecture: layers you can read off the folders, imports that only go
down, no cycle, no two modules with the same file name, and a conventions page every module points to."""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pagedkv_lib"
# lowest first: a module may import its own layer and the layers before it, never one after it
LAYERS = ["core", "testing", "kernels", "engine", "distributed", "studies", "viz", "judge"]
TOP = {"__init__", "environment"}         # the package's own modules: import nothing of the package eagerly


def modules() -> dict[str, Path]:
    return {".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
            for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}


def imports_of(name: str, path: Path) -> set[str]:
    """The pagedkv_lib modules `path` imports, relative imports resolved, function-level ones included."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("pagedkv_lib"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            if base.startswith("pagedkv_lib"):
                known = modules()
                for a in node.names:                     # a submodule, or a name of the package itself
                    found.add(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base)
    known = modules()
    return {m for m in found if m in known and m != name}


def layer(name: str) -> int:
    parts = name.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 2 or parts[-1] in LAYERS else -1


def test_no_two_modules_share_a_file_name():
    seen = defaultdict(list)
    for name, path in modules().items():
        if path.name != "__init__.py":
            seen[path.name].append(name)
    assert not {k: v for k, v in seen.items() if len(v) > 1}


def test_every_module_lives_in_a_layer_folder():
    stray = [n for n in modules() if n.count(".") == 1 and n.split(".")[1] not in {*LAYERS, *TOP}]
    assert not stray, f"modules outside the layer folders {LAYERS}: {stray}"


def test_imports_only_go_down_the_layers():
    upward = []
    for name, path in modules().items():
        if layer(name) < 0:
            continue
        for target in imports_of(name, path):
            if layer(target) > layer(name):
                upward.append(f"{name} -> {target}")
    assert not upward, upward


def test_the_import_graph_has_no_cycle():
    graph = {n: imports_of(n, p) for n, p in modules().items()}
    state: dict[str, int] = {}

    def visit(node, trail):
        if state.get(node) == 1:
            raise AssertionError("import cycle: " + " -> ".join(trail[trail.index(node):] + [node]))
        if state.get(node) == 2:
            return
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if not nxt.endswith("__init__"):
                visit(nxt, trail + [node])
        state[node] = 2

    for n in sorted(graph):
        visit(n, [])


def test_modules_point_to_the_one_conventions_page_instead_of_a_legend():
    docs = PACKAGE.parent / "docs" / "conventions.md"
    assert docs.is_file()
    legends = [n for n, p in modules().items()
               if "Symbols:" in (ast.get_docstring(ast.parse(p.read_text())) or "")]
    assert not legends, f"a symbol legend repeated (point to docs/conventions.md instead): {legends}"
