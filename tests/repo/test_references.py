"""Every reference in the course leads somewhere: repository files, notebooks, exercises and sections exist.

Checked in the notebooks' sources, the library, the solutions, the README and docs/ (and, for the design notes
that are not part of the repository, in every tracked text file):
- a path of this repository (`pagedkv_lib/...`, `docs/...`, `practice/...`, ...) names an existing file or
  folder; a file of ANOTHER repository is written with its repository, `owner/repo:path` (or
  `owner/repo@commit:path`), and is not checked here;
- a relative Markdown link in README.md or docs/ leads to an existing file;
- "notebook NN" (also "notebooks 10-11", "notebooks 02 and 05") names a notebook of notebooks/src;
- "exercise NNN", `judge.py NNN`, `judge(NNN`, `show_reference(NNN` name an exercise of the judge's registry;
- "section N" / "§N" in a notebook names one of its own numbered headings ("## N. ..."), and "section N of
  notebook NN" one of that notebook's; a paper's section ("the PagedAttention paper, section 4.4") is not
  ours; `docs/x.md, "Title"` names a heading of that document;
- nothing names the course's design notes, which live outside the repository.
The checker is tested on small planted strings first, so that a checker that finds nothing cannot pass.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pagedkv_lib.judge.registry import EXERCISES

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_SOURCES = sorted((ROOT / "notebooks" / "src").glob("*.py"))
THIS = Path(__file__).resolve()

# the design notes that live outside the repository (spelled in pieces so that this file does not name them)
OUTSIDE_NOTES = re.compile(r"\b(?:" + "|".join(n + r"\.md" for n in ("COURSE", "ENGINES", "STYLE")) + "|"
                           + "STYLE" + r" rule)")
REPO_DIRS = ("pagedkv_lib", "practice", "solutions", "notebooks", "tests", "benchmarks", "docs", ".ci")
# a path of this repository; not preceded by a character that would make it part of a longer path or of
# `owner/repo:path`, `owner/repo@commit:path`
REPO_PATH = re.compile(r"(?<![\w./:@-])((?:" + "|".join(re.escape(d) for d in REPO_DIRS)
                       + r")/[\w./<>{}*-]*[\w/*>}])")
MD_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
LIST = r"(?:\s*(?:-|–|to|,|and|or|, and)\s*{n})*"                    # "02-05", "02 and 05", "121, 122"
NOTEBOOK_REF = re.compile(r"\bnotebooks?[ -](\d{1,2}" + LIST.format(n=r"\d{1,2}\b") + ")", re.IGNORECASE)
EXERCISE_REF = re.compile(r"\bexercises?\s+(\d{3}" + LIST.format(n=r"\d{3}\b") + ")", re.IGNORECASE)
EXERCISE_CALL = re.compile(r"(?:judge\.py|%judge|\bjudge\(|show_reference\(|reveal\()\s*(\d+)")
SECTION_REF = re.compile(r"(?:\bsections?\s+|§\s*)" + r"(\d+(?:\.\d+)?(?:\s*(?:-|–|,|and)\s*\d+)*)"
                         + r"(?:\s+of\s+notebook\s+(\d+))?", re.IGNORECASE)
HEADING = re.compile(r"^# #{2,3} (\d+)\. ", re.MULTILINE)
# a heading of a document named with it: docs/engines.md, "Known pitfalls"
DOC_HEADING_REF = re.compile(r"(docs/[\w.-]+\.md)\W{1,4}\"([^\"\n]+)\"")
# files the course writes at run time (git-ignored), named in the docs
GENERATED = {"practice/.judge_status.json"}


def _numbers(text: str) -> list[int]:
    """'09-10' -> [9, 10]; '02 and 05' -> [2, 5]; ranges are checked at both ends."""
    return [int(n) for n in re.findall(r"\d+", text)]


def notebook_numbers() -> dict[int, Path]:
    return {int(p.stem[:2]): p for p in NOTEBOOK_SOURCES}


def headings(text: str) -> set[int]:
    return {int(n) for n in HEADING.findall(text)}


@dataclass
class Context:
    """What a reference can resolve to."""
    notebooks: dict = field(default_factory=notebook_numbers)           # number -> source path
    exercises: set = field(default_factory=lambda: set(EXERCISES))
    root: Path = ROOT

    def notebook_headings(self, number: int) -> set[int]:
        return headings(self.notebooks[number].read_text()) if number in self.notebooks else set()


def problems(text: str, where: Path, ctx: Context | None = None) -> list[str]:
    """Every reference in `text` (the contents of `where`) that leads nowhere, as 'line N: why'."""
    ctx = ctx or Context()
    found = []

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    for m in OUTSIDE_NOTES.finditer(text):
        found.append(f"line {line_of(m.start())}: `{m.group(0)}` is not part of the repository; "
                     "point into docs/ or say it in a sentence")
    for m in REPO_PATH.finditer(text):
        path = m.group(1).rstrip(".")
        if re.search(r"[<>{}*]|NN|XXX|\.\.\.", path) or path in GENERATED:    # a pattern, or made at run time
            continue
        if not (ctx.root / path).exists():
            found.append(f"line {line_of(m.start())}: `{path}` does not exist in this repository (a file of "
                         "another repository is written `owner/repo:path`)")
    for m in DOC_HEADING_REF.finditer(text):
        doc = ctx.root / m.group(1)
        titles = re.findall(r"^#+ (.+?)\s*$", doc.read_text(), re.MULTILINE) if doc.exists() else []
        if doc.exists() and m.group(2) not in titles:
            found.append(f"line {line_of(m.start())}: {m.group(1)} has no heading \"{m.group(2)}\"")
    if where.suffix == ".md":
        for m in MD_LINK.finditer(text):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):                           # http:, https:, mailto:
                continue
            if not (where.parent / target).exists():
                found.append(f"line {line_of(m.start())}: the link `{target}` leads nowhere")
    for m in NOTEBOOK_REF.finditer(text):
        for n in _numbers(m.group(1)):
            if n not in ctx.notebooks:
                found.append(f"line {line_of(m.start())}: `{m.group(0)}`: there is no notebook {n:02d}")
    for m in EXERCISE_REF.finditer(text):
        for n in _numbers(m.group(1)):
            if n not in ctx.exercises:
                found.append(f"line {line_of(m.start())}: `{m.group(0)}`: there is no exercise {n}")
    for m in EXERCISE_CALL.finditer(text):
        if int(m.group(1)) not in ctx.exercises:
            found.append(f"line {line_of(m.start())}: `{m.group(0)}`: there is no exercise {m.group(1)}")
    is_notebook = where.parent.name == "src" and where.parent.parent.name == "notebooks"
    own = headings(text) if is_notebook else set()
    for m in SECTION_REF.finditer(text):
        before = text[max(0, m.start() - 80):m.start()]
        after = text[m.end():m.end() + 12]
        if re.search(r"paper|\bet al\.", before, re.IGNORECASE) or re.match(r",? p\. \d", after):
            continue                                                   # a paper's section (with its page)
        numbers = m.group(1)
        if "." in numbers:                                             # "section 4.4": a paper's numbering
            continue
        if m.group(2):
            target, names = ctx.notebook_headings(int(m.group(2))), f"notebook {m.group(2)}"
        elif is_notebook:
            target, names = own, where.stem
        else:
            found.append(f"line {line_of(m.start())}: `{m.group(0)}` names no notebook: write "
                         "'section N of notebook NN'")
            continue
        for n in _numbers(numbers):
            if n not in target:
                found.append(f"line {line_of(m.start())}: `{m.group(0)}`: {names} has no section {n}")
    return found


# ------------------------------------------------------------------------------------------------------------
# the checker, on planted references

SAMPLE_CTX = Context(notebooks={2: ROOT / "notebooks" / "src" / "02_block_pool.py",
                                3: ROOT / "notebooks" / "src" / "03_slot_mapping.py"},
                     exercises={122, 127})
NOTEBOOK = ROOT / "notebooks" / "src" / "99_sample.py"
HEADINGS = "# ## 1. One\n# ## 2. Two\n"


@pytest.mark.parametrize("text, where, expected", [
    ("see " + "COURSE" + ".md for the contract", ROOT / "README.md", "not part of the repository"),
    ("a module-level context (" + "STYLE" + " rule 9)", ROOT / "pagedkv_lib" / "x.py", "not part of"),
    ("in `pagedkv_lib/core/no_such_module.py`", ROOT / "pagedkv_lib" / "x.py", "does not exist"),
    ("FlashInfer's `docs/tutorials/kv_layout.rst`", ROOT / "README.md", "does not exist"),
    ("as notebook 07 shows", ROOT / "README.md", "no notebook 07"),
    ("notebooks 02-05", ROOT / "README.md", "no notebook 05"),
    ("graded by exercise 999", ROOT / "README.md", "no exercise 999"),
    ("exercises 122 and 128", ROOT / "README.md", "no exercise 128"),
    ("python practice/judge.py 133", ROOT / "README.md", "no exercise 133"),
    ("the shift of section 3", NOTEBOOK, "has no section 3"),
    ("as in §7", NOTEBOOK, "has no section 7"),
    ("section 9 of notebook 02", ROOT / "README.md", "notebook 02 has no section 9"),
    ("see section 2", ROOT / "pagedkv_lib" / "x.py", "names no notebook"),
    ("[engines](no_such_file.md)", ROOT / "docs" / "x.md", "leads nowhere"),
    ('the bugs (docs/engines.md, "No such heading")', ROOT / "pagedkv_lib" / "x.py", "has no heading"),
])
def test_the_checker_finds_a_planted_bad_reference(text, where, expected):
    found = problems(HEADINGS + text, where, SAMPLE_CTX)
    assert len(found) == 1 and expected in found[0], found


@pytest.mark.parametrize("text, where", [
    ("`pagedkv_lib/core/block_pool.py`, `docs/conventions.md`, `practice/<id>_<slug>.py`", ROOT / "x.md"),
    ("`flashinfer-ai/flashinfer:docs/tutorials/kv_layout.rst`, `vllm/v1/core/block_pool.py`", ROOT / "x.md"),
    ("notebooks 02 and 03; notebook-3; exercise 127; judge(122, globals()); show_reference(127)", NOTEBOOK),
    ("the shift of section 2; §1; section 1 of notebook 02", NOTEBOOK),
    ("the PagedAttention paper (Kwon et al., SOSP 2023, section 4.5); the paper's section 7", NOTEBOOK),
    ("all blocks have the same size (§1, p. 2)", ROOT / "pagedkv_lib" / "x.py"),
    ("[conventions](conventions.md), [vLLM](https://github.com/vllm-project/vllm)", ROOT / "docs" / "x.md"),
    ('the bugs (docs/engines.md, "Known pitfalls"); `practice/.judge_status.json`', ROOT / "README.md"),
])
def test_the_checker_accepts_references_that_resolve(text, where):
    assert problems(HEADINGS + text, where, SAMPLE_CTX) == []


# ------------------------------------------------------------------------------------------------------------
# the repository

def checked_files() -> list[Path]:
    files = [*NOTEBOOK_SOURCES, *sorted((ROOT / "pagedkv_lib").rglob("*.py")),
             *sorted((ROOT / "solutions").glob("*.py")), ROOT / "README.md",
             *sorted((ROOT / "docs").rglob("*.md"))]
    return [f for f in files if "__pycache__" not in f.parts]


def text_files() -> list[Path]:
    """Every text file of the repository (not the virtual environment, caches or build outputs)."""
    skip = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", "build", "artifacts"}
    suffixes = {".py", ".md", ".ipynb", ".toml", ".yml", ".yaml", ".cfg", ".txt", ".json", ".log", ""}
    return sorted(p for p in ROOT.rglob("*") if p.is_file() and p.suffix in suffixes and p != THIS
                  and not skip & set(p.relative_to(ROOT).parts) and ".egg-info" not in str(p)
                  and not p.name.startswith(".judge_status"))


@pytest.mark.parametrize("path", checked_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_reference_resolves(path):
    found = problems(path.read_text(), path)
    assert not found, f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(found)


def test_no_file_names_the_design_notes_outside_the_repository():
    offenders = []
    for path in text_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        offenders += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in OUTSIDE_NOTES.finditer(text)]
    assert not offenders, "\n".join(offenders)
