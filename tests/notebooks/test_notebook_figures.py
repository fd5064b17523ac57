"""What a stored notebook shows is what it means to show: figures as images, never as their text repr.

nbval compares a re-run with the stored outputs, so a figure stored as `<Figure size 640x136 with 1 Axes>`
passes it as long as every run fails the same way. These checks read the stored notebooks instead:
- no output is a bare figure repr or a judge `Result` repr;
- a cell that draws (it calls pyplot, builds a Figure or calls a `plot_*` / `*_figure` helper) shows at least
  as many images as it has `plt.show()` calls, and at least one; a cell whose output depends on the machine
  (`NBVAL_IGNORE_OUTPUT`, e.g. a GPU-only plot) is held to the first rule only.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
STORED = sorted(NOTEBOOKS.glob("*.ipynb"))
BARE_REPR = re.compile(r"^<(?:matplotlib\.figure\.)?Figure\b|^<Result \d+ ")
DRAWS = re.compile(r"\bplt\.|\bFigure\(|\bplot_\w+\(|\w+_figure\(")


def problems(nb) -> list[str]:
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        images = 0
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            images += "image/png" in data
            text = data.get("text/plain", "")
            if BARE_REPR.match(text) and "image/png" not in data:
                found.append(f"cell {i}: shows `{text.strip()}` as text")
        if DRAWS.search(cell.source) and "NBVAL_IGNORE_OUTPUT" not in cell.source:  # not machine-dependent
            wanted = max(1, cell.source.count("plt.show()"))
            if images < wanted:
                found.append(f"cell {i}: draws a figure but shows {images} image(s), expected {wanted}")
    return found


def _notebook(source: str, outputs: list) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source, outputs=outputs)]
    return nb


FIGURE_TEXT = nbformat.v4.new_output("execute_result", {"text/plain": "<Figure size 640x136 with 1 Axes>"})
FIGURE_IMAGE = nbformat.v4.new_output("display_data", {"image/png": "iVBORw0KGgo=",
                                                       "text/plain": "<Figure size 640x136 with 1 Axes>"})
RESULT_TEXT = nbformat.v4.new_output("execute_result", {"text/plain": "<Result 132 notebook: not graded>"})


@pytest.mark.parametrize("source, outputs, expected", [
    ("frame_figure(frames[3])", [FIGURE_TEXT], ["shows `<Figure size 640x136 with 1 Axes>` as text",
                                                "shows 0 image(s)"]),
    ("judge(132)", [RESULT_TEXT], ["shows `<Result 132"]),
    ("fig, ax = plt.subplots()\nplt.show()", [], ["shows 0 image(s), expected 1"]),
    ("plt.show()\nplt.show()", [FIGURE_IMAGE], ["shows 1 image(s), expected 2"]),
])
def test_the_check_finds_a_figure_that_is_not_shown(source, outputs, expected):
    found = problems(_notebook(source, outputs))
    assert len(found) == len(expected) and all(e in f for e, f in zip(expected, found)), found


def test_the_check_accepts_a_shown_figure():
    assert problems(_notebook("fig, ax = plt.subplots()\nplt.show()", [FIGURE_IMAGE])) == []


@pytest.mark.parametrize("path", STORED, ids=[p.stem for p in STORED])
def test_every_figure_is_stored_as_an_image(path):
    found = problems(nbformat.read(path, as_version=4))
    assert not found, f"{path.name}:\n  " + "\n  ".join(found)
