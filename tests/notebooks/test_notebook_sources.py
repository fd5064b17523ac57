"""Every stored notebook holds exactly the cells of its source in notebooks/src (one source of truth), and no
cell of a source is empty (a stray `# %% [markdown]` marker shows as a blank cell)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
_spec = importlib.util.spec_from_file_location("nb_build", NOTEBOOKS / "build.py")
nb_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nb_build)
SOURCES = sorted((NOTEBOOKS / "src").glob("*.py"))


@pytest.mark.parametrize("src", SOURCES, ids=[s.stem for s in SOURCES])
def test_notebook_cells_equal_their_source(src):
    stored = nbformat.read(NOTEBOOKS / f"{src.stem}.ipynb", as_version=4)
    expected = nb_build.source_notebook(src)
    got = [(c.cell_type, c.source) for c in stored.cells]
    want = [(c.cell_type, c.source) for c in expected.cells]
    assert got == want, f"{src.stem}.ipynb is stale: run `python notebooks/build.py {src.stem[:2]}`"


def test_every_stored_notebook_has_a_source():
    stems = {s.stem for s in SOURCES}
    orphans = [p.name for p in NOTEBOOKS.glob("*.ipynb") if p.stem not in stems]
    assert not orphans, f"notebooks without a source in notebooks/src: {orphans}"


@pytest.mark.parametrize("src", SOURCES, ids=[s.stem for s in SOURCES])
def test_notebook_outputs_have_no_errors(src):
    stored = nbformat.read(NOTEBOOKS / f"{src.stem}.ipynb", as_version=4)
    errors = [o for c in stored.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors, f"{src.stem}.ipynb stores an error output: {errors[0].get('ename')}"


@pytest.mark.parametrize("src", SOURCES, ids=[s.stem for s in SOURCES])
def test_no_cell_is_empty(src):
    cells = nb_build.source_notebook(src).cells
    empty = [i for i, c in enumerate(cells) if not c.source.strip()]
    assert not empty, f"{src.stem}: cells {empty} (counted in the built notebook) are empty"
