"""The maps of the course say what the judge's registry and the notebooks' sources say: one source for each
fact.

README.md and notebook 00 each hold a table of the notebooks (number, title or file, the exercises it
teaches) and a table of the exercises (id, title, difficulty, and in the README its notebook). Every row must
agree with the registry (`pagedkv_lib.judge.registry`) and with the notebooks' sources, and every notebook and
every exercise must have its row.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from pagedkv_lib.judge.cli import course_order
from pagedkv_lib.judge.registry import EXERCISES

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "notebooks" / "src").glob("[0-9][0-9]_*.py"))


def tables(text: str) -> list[list[list[str]]]:
    """Every pipe table of a markdown text (a notebook source's `# ` prefix removed): rows of cells, the
    header row first, the separator row left out."""
    found, rows = [], []
    for line in [*text.splitlines(), ""]:
        line = line.removeprefix("# ").strip()
        if line.startswith("|") and line.endswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                rows.append(cells)
        elif rows:
            found.append(rows)
            rows = []
    return found


def table_with(text: str, header: tuple) -> list[list[str]]:
    (rows,) = [t[1:] for t in tables(text) if tuple(c.lower() for c in t[0][: len(header)]) == header]
    return rows


def title(source: Path) -> str:
    return source.read_text().splitlines()[1].removeprefix("# # ").split(" · ", 1)[1]


def taught_in() -> dict[int, list[int]]:
    """notebook number -> the ids of the exercises whose registry entry names it."""
    by_notebook: dict[int, list[int]] = {}
    for ex in EXERCISES.values():
        by_notebook.setdefault(int(ex.notebook[:2]), []).append(ex.id)
    return by_notebook


def ids(cell: str) -> list[int]:
    return [int(n) for n in re.findall(r"\b1\d\d\b", cell)]


README = (ROOT / "README.md").read_text()
START = (ROOT / "notebooks" / "src" / "00_start_here.py").read_text()


@pytest.mark.parametrize("where, text", [("README.md", README), ("notebook 00", START)])
def test_the_notebook_map_has_every_notebook_and_the_exercises_the_registry_puts_there(where, text):
    rows = table_with(text, ("#", "notebook"))
    assert [int(r[0]) for r in rows] == [int(s.name[:2]) for s in SOURCES], where
    for row, source in zip(rows, SOURCES):
        if where == "README.md":
            assert row[1].strip("`") == source.stem, (where, row)
        else:
            assert row[1] == title(source), (where, row, title(source))
        assert sorted(ids(row[-1])) == sorted(taught_in().get(int(source.name[:2]), [])), (where, row)


@pytest.mark.parametrize("where, text", [("README.md", README), ("notebook 00", START)])
def test_the_exercise_table_has_every_exercise_as_the_registry_has_it(where, text):
    """A table with a notebook column goes in course order, as `judge.py --list` does; one without, by id."""
    rows = table_with(text, ("id",))
    order = [ex.id for ex in course_order()] if len(rows[0]) > 3 else sorted(EXERCISES)
    assert [int(r[0]) for r in rows] == order, where
    for row in rows:
        ex = EXERCISES[int(row[0])]
        assert (row[1], row[2]) == (ex.title, ex.difficulty), (where, row)
        if len(row) > 3:
            assert row[3] == ex.notebook[:2], (where, row, ex.notebook)


@pytest.mark.parametrize("where, text", [("README.md", README), ("notebook 00", START)])
def test_the_triton_exercises_named_are_the_registrys(where, text):
    flat = text.replace("\n# ", " ").replace("\n", " ")
    sentence = re.search(r"Triton[^.]*kernels \(notebooks[^)]*\)", flat)
    assert sentence, where
    assert sorted(ids(sentence.group(0))) == sorted(e.id for e in EXERCISES.values() if e.triton), where


def test_the_checker_reads_a_planted_table():
    text = "# | id | exercise | difficulty |\n# |---|---|---|\n# | 121 | KV | easy |\n\nafter\n"
    assert table_with(text, ("id",)) == [["121", "KV", "easy"]]
