"""Build the course notebooks from their sources: `notebooks/src/NN_slug.py` -> `notebooks/NN_slug.ipynb`.

The `.py` files (jupytext percent format: `# %%` code cells, `# %% [markdown]` text cells) are the one
source of truth: ruff lints them, and `tests/notebooks/test_notebook_sources.py` checks that every `.ipynb`
holds exactly their cells. This script converts each source and executes it top to bottom on this machine, so
the stored outputs are the ones nbval compares. The judge's status file is a fresh temporary one during the
build: the stored outputs are those of a learner who has not graded anything yet (so `show_reference`
reveals nothing), and the maintainer's own practice/ status is neither read nor changed.

    python notebooks/build.py            # every notebook
    python notebooks/build.py 01 02      # the notebooks whose names start with these prefixes
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

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "src"
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


def source_notebook(src: Path) -> nbformat.NotebookNode:
    """The notebook a source file describes, without outputs."""
    nb = jupytext.read(src, fmt="py:percent")
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


def main(prefixes: list[str]) -> None:
    status_dir = tempfile.mkdtemp(prefix="pagedkv-build-")
    os.environ["PAGEDKV_JUDGE_STATUS"] = os.path.join(status_dir, "status.json")
    for src in sorted(SOURCES.glob("*.py")):
        if prefixes and not any(src.stem.startswith(p) for p in prefixes):
            continue
        print(f"{src.stem}: {build(src):.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
