"""A package's docstring that lists its modules (`    name.py    what it holds`) lists modules that exist."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "pagedkv_lib"
INITS = sorted(PACKAGE.glob("*/__init__.py"))
LISTED = re.compile(r"^\s+([\w/]+\.py)\s{2,}\S", re.MULTILINE)


def listed_modules(docstring: str) -> list[str]:
    return LISTED.findall(docstring)


def test_the_listing_is_read_from_indented_lines_only():
    doc = "Intro naming notebook.py in prose.\n\n    config.py        ModelConfig\n    model.py  the model\n"
    assert listed_modules(doc) == ["config.py", "model.py"]


@pytest.mark.parametrize("init", INITS, ids=[p.parent.name for p in INITS])
def test_every_module_a_package_docstring_lists_exists(init):
    module = ast.parse(init.read_text())
    doc = module.body[0].value.value if module.body and isinstance(module.body[0], ast.Expr) else ""
    missing = [name for name in listed_modules(doc) if not (init.parent / name).exists()]
    assert not missing, f"{init.relative_to(PACKAGE.parent)} lists modules that do not exist: {missing}"
