"""Build the course notebooks from their sources: `notebooks/src/NN_slug.py` -> `notebooks/NN_slug.ipynb`.

The `.py` files (jupytext percent format: `# %%` code cells, `# %% [markdown]` text cells) are the one
source of truth: ruff lints them, and `tests/notebooks/test_notebook_sources.py` checks that every `.ipynb`
holds exactly their cells. This script converts each source and executes it top to bottom on this machine, so
the stored outputs are the ones nbval compares. The judge's status file is a fresh temporary one during the
build: the stored outputs are those of a learner who has not graded anything yet (so `show_reference`
reveals nothing), and the maintainer's own practice/ status is neither read nor changed.

The first code cell of every notebook, the one that sets the course up in Colab, is not in the sources: this
script puts `pagedkv_lib.environment.FIRST_CELL` right after a source's first cell, its title (a source that
carries a copy of it is refused). After a change to that cell alone, `--first-cell` writes its new text into
the stored notebooks without re-executing them (its output outside Colab, `describe_environment()`, does not
change); a notebook whose other cells differ from its source is left alone and named, to be rebuilt.

    python notebooks/build.py                  # every notebook
    python notebooks/build.py 01 02            # the notebooks whose names start with these prefixes
    python notebooks/build.py --first-cell     # only the first code cell's text, in every stored notebook
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

from pagedkv_lib.environment import FIRST_CELL

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "src"
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


def source_notebook(src: Path) -> nbformat.NotebookNode:
    """The notebook a source file describes, without outputs, FIRST_CELL put right after its title cell."""
    nb = jupytext.read(src, fmt="py:percent")
    carried = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "google.colab" in c.source]
    if carried:
        raise ValueError(f"{src.name}: cell {carried[0]} sets the course up in Colab; build.py inserts "
                         "that cell (pagedkv_lib.environment.FIRST_CELL): delete it from the source")
    nb.cells.insert(1, nbformat.v4.new_code_cell(FIRST_CELL))  # after the title, before everything else
    nb.metadata = {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}}
    for i, cell in enumerate(nb.cells):
        cell.metadata = {k: v for k, v in cell.metadata.items() if k in ("tags",)}
        cell.id = f"cell-{i:03d}"                 # the same ids at every build: no churn in the stored files
    return nb


def build(src: Path, timeout: int = 300) -> float:
    nb = source_notebook(src)
    start = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(HERE)}}).execute()
    seconds = time.perf_counter() - start
    for cell in nb.cells:                      # keep stored notebooks free of run-to-run noise
        cell.metadata.pop("execution", None)
    widgets = nb.metadata.get("widgets")       # saved widget state: widgets render before the cells run
    nb.metadata = {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}}
    if widgets:
        nb.metadata["widgets"] = widgets
    nbformat.write(nb, HERE / f"{src.stem}.ipynb")
    return seconds


def first_code_cell(nb: nbformat.NotebookNode) -> int:
    return next(i for i, cell in enumerate(nb.cells) if cell.cell_type == "code")


def replace_first_cell(src: Path) -> bool:
    """Write the source's first code cell into the stored notebook, outputs kept, when every other cell
    already equals the source's; return whether it did."""
    path = HERE / f"{src.stem}.ipynb"
    stored = nbformat.read(path, as_version=4)
    expected = source_notebook(src)
    i, j = first_code_cell(stored), first_code_cell(expected)
    others = [[(c.cell_type, c.source) for k, c in enumerate(nb.cells) if k != at]
              for nb, at in ((stored, i), (expected, j))]
    if i != j or others[0] != others[1]:
        return False
    stored.cells[i].source = expected.cells[j].source
    nbformat.write(stored, path)
    return True


def selected(prefixes: list[str]) -> list[Path]:
    """The sources whose names start with one of `prefixes` (all of them for none)."""
    return [src for src in sorted(SOURCES.glob("*.py"))
            if not prefixes or any(src.stem.startswith(p) for p in prefixes)]


def main(args: list[str]) -> None:
    prefixes = [a for a in args if a != "--first-cell"]
    if "--first-cell" in args:
        stale = [src.stem[:2] for src in selected(prefixes) if not replace_first_cell(src)]
        if stale:
            sys.exit(f"other cells differ from their sources: python notebooks/build.py {' '.join(stale)}")
        return
    status_dir = tempfile.mkdtemp(prefix="pagedkv-build-")
    os.environ["PAGEDKV_JUDGE_STATUS"] = os.path.join(status_dir, "status.json")
    for src in selected(prefixes):
        print(f"{src.stem}: {build(src):.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
