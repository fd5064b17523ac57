"""Every markdown table renders as written: each row has as many cells as its header.

A row broken across two source lines (`| 01 | Why paging | ... |` then `121 |` on the next line) renders as
a short row plus a stray one, and nothing fails. The tables are found the way a renderer finds them
(markdown-it with GitHub's tables, as JupyterLab and GitHub draw them), in every notebook source's markdown
cells, in the markdown the stored notebooks print, in README.md and in docs/; then each row's cells are
counted in its source line (a `\\|` is a pipe inside a cell). The checker is tested on planted tables first.
"""
from __future__ import annotations

import re
from pathlib import Path

import jupytext
import nbformat
import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "notebooks" / "src").glob("*.py"))
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKDOWN = MarkdownIt("commonmark").enable("table")


def cells(line: str) -> int:
    """The cells of one table row as written: pipes that are not escaped separate them."""
    row = line.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return len(re.split(r"(?<!\\)\|", row))


def bad_rows(markdown: str) -> list[str]:
    """Every row of every table in `markdown` whose cell count differs from its header's, as 'line N: ...'."""
    lines, found, header = markdown.splitlines(), [], None
    for token in MARKDOWN.parse(markdown):
        if token.type == "table_open":
            header = None
        elif token.type == "tr_open":
            first = token.map[0]
            n = cells(lines[first])
            if header is None:
                header = n
            elif n != header:
                found.append(f"line {first + 1}: {n} cells, the header has {header}: "
                             f"{lines[first].strip()!r}")
    return found


def notebook_markdown(src: Path) -> list[tuple[str, str]]:
    """(where, markdown) for each markdown cell of a source and each markdown output of its stored
    notebook."""
    source = jupytext.read(src, fmt="py:percent")
    parts = [(f"markdown cell {i}", c.source) for i, c in enumerate(source.cells)
             if c.cell_type == "markdown"]
    stored = src.parent.parent / f"{src.stem}.ipynb"
    if stored.exists():
        for i, c in enumerate(nbformat.read(stored, as_version=4).cells):
            for out in c.get("outputs", []):
                if "text/markdown" in out.get("data", {}):
                    parts.append((f"output of cell {i}", "".join(out["data"]["text/markdown"])))
    return parts


# ------------------------------------------------------------------------------------------------------------
# the checker, on planted tables

def test_the_checker_finds_a_row_broken_across_two_lines():
    text = "| # | name | exercises |\n|---|---|---|\n| 01 | Why paging |\n121 |\n| 02 | Block pool | 127 |\n"
    assert [r.split(":")[0] for r in bad_rows(text)] == ["line 3", "line 4"]


def test_the_checker_finds_a_row_with_a_cell_too_many_and_counts_escaped_pipes_as_text():
    assert len(bad_rows("| a | b |\n|---|---|\n| 1 | 2 | 3 |\n")) == 1
    assert bad_rows("| a | b |\n|---|---|\n| `x \\| y` | 2 |\n| 1 | 2 |\n\nafter | the table\n") == []


def test_the_checker_ignores_pipes_in_code_blocks_and_prose():
    assert bad_rows("```\n| a | b |\n|---|---|\n| 1 |\n```\nor | not\n") == []


# ------------------------------------------------------------------------------------------------------------
# the course

@pytest.mark.parametrize("src", SOURCES, ids=[s.stem for s in SOURCES])
def test_every_table_of_a_notebook_renders_with_whole_rows(src):
    found = [f"{where}, {row}" for where, text in notebook_markdown(src) for row in bad_rows(text)]
    assert not found, f"{src.name}:\n  " + "\n  ".join(found)


@pytest.mark.parametrize("doc", DOCUMENTS, ids=[str(d.relative_to(ROOT)) for d in DOCUMENTS])
def test_every_table_of_the_readme_and_docs_renders_with_whole_rows(doc):
    found = bad_rows(doc.read_text())
    assert not found, f"{doc.relative_to(ROOT)}:\n  " + "\n  ".join(found)
