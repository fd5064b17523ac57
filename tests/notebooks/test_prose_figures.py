"""A figure quoted in a notebook's markdown is one its outputs (or the results it reads) contain.

A number in prose that comes from a measurement or a computation must be printed by a cell from the result the
notebook shows, so that text and table cannot disagree. This test catches prose that quotes a figure nothing
in the notebook prints: a stale figure from an earlier run, a typo, a number computed by hand.

What counts as a figure in the markdown (inline code, fenced blocks and link targets left out): a number with
a decimal point, a percentage, or a number with a unit (us, ms, s, GB, GiB, MB, MiB, KB, KiB, GB/s, TB/s,
TFLOP/s, FLOPs, "x" as in 1.28x, "times"). Integers without a unit (block size 16, 4096 tokens, 28 layers)
are the course's ordinary numbers, not figures. Not figures either: section, figure, table and page numbers
(§6.1, Fig. 12, p. 11), versions (PyTorch 2.12), and numbers inside names (Qwen2.5-7B, A100-40GB).

A figure is found when some number printed by the notebook's cells, written in its code (an input such as a
55 GiB budget), or stored in a results file the notebook names (`benchmarks/results/*.json`) rounds to it:
"47.9" matches 47.86, "25" does not match 22.9. A percentage is matched against printed percentages (and a
result's fractions). After "about" or "nearly", trailing zeros are not significant ("about 680" matches 679).
After "under", "below", "at most" a printed number at or below it is enough, after "over", "above", "at
least" one at or above it. Figures that quote another source (the paper, a data sheet) are listed in QUOTED
with that source. The checker is tested on planted prose first, so that a checker that finds nothing cannot
pass.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import jupytext
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "notebooks" / "src").glob("*.py"))
RESULTS = ROOT / "benchmarks" / "results"

UNITS = ("%", "x", "us", "µs", "ms", "s", "GB/s", "TB/s", "GB", "GiB", "MB", "MiB", "KB", "KiB", "TFLOP/s",
         "FLOPs", "FLOP", "times")
UNIT = r"(?:%|x(?![\w])|\s?(?:µs|us|ms|GB/s|TB/s|GiB|GB|MiB|MB|KiB|KB|TFLOP/s|FLOPs|FLOP)(?![\w/])" \
       r"|\s(?:s|times)(?![\w/]))"
FIGURE = re.compile(r"(?<![\w.#§/^$])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?!\d|[eE][-+]?\d|\.\d)(" + UNIT + r")?")
NUMBER = re.compile(r"(?<![\w.])-?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?:e([-+]?\d+))?(" + UNIT + ")?")
# a number right after one of these is a reference or a version, not a figure
NOT_A_FIGURE_AFTER = re.compile(r"(?:§|\bsections?|\bFig\.|\bFigure|\bTable|\bp\.|\bpp\.|\bPR|#|\bissue"
                                r"|\bversion|\barXiv:|\bv|PR #\d+ \()\s*$", re.IGNORECASE)
# a number without a unit after one of these in its sentence is a version ("up to Triton 3.4, from 3.5 on")
SOFTWARE = re.compile(r"\b(?:PyTorch|torch|Triton|CUDA|Python|glibc)\b", re.IGNORECASE)
ABOUT = re.compile(r"\b(?:about|around|roughly|nearly|near|almost|close to|some|~)\s*$", re.IGNORECASE)
AT_MOST = re.compile(r"\b(?:under|below|less than|at most|up to|within)\s*$", re.IGNORECASE)
AT_LEAST = re.compile(r"\b(?:over|above|more than|at least)\s*$", re.IGNORECASE)

# figures that quote another source, not the notebook: (notebook number, figure as written) -> the source
QUOTED = {
    ("01", "8.9%"): "the PagedAttention paper, Fig. 2 (Orca (Max)'s external fragmentation)",
    ("01", "3.7%"): "the PagedAttention paper, Fig. 2 (vLLM's memory other than token states)",
    ("01", "20.4"): "the PagedAttention paper, Fig. 2 (token states under Orca (Max))",
    ("01", "38.2%"): "the PagedAttention paper, Fig. 2 (token states under Orca (Oracle))",
    ("01", "96.3%"): "the PagedAttention paper, Fig. 2 (token states under vLLM)",
    ("01", "96%"): "the PagedAttention paper, Fig. 2, rounded",
    ("04", "100%"): "FlashInfer's blog: bandwidth utilization 'close to 100% for long sequences'",
    ("14", "0.02"): "Hugging Face's initializer_range default for Qwen3",
}


@dataclass
class Printed:
    """What a notebook's figures may be found in."""
    numbers: set = field(default_factory=set)        # every number printed, written in code, or stored
    percents: set = field(default_factory=set)       # the numbers printed as percentages (or fractions x 100)
    by_unit: dict = field(default_factory=dict)      # unit -> the numbers printed with it ("us" -> {248.3})

    def add_text(self, text: str) -> None:
        for m in NUMBER.finditer(text):
            value = _value(m)
            self.numbers.add(value)
            unit = (m.group(4) or "").strip()
            if unit == "%":
                self.percents.add(value)
            elif unit:
                self.by_unit.setdefault(unit, set()).add(value)

    def add_json(self, obj) -> None:
        if isinstance(obj, dict):
            for v in obj.values():
                self.add_json(v)
        elif isinstance(obj, list):
            for v in obj:
                self.add_json(v)
        elif isinstance(obj, (int, float)) and not isinstance(obj, bool) and math.isfinite(obj):
            self.numbers.add(float(obj))
            self.percents.add(100.0 * obj)
        elif isinstance(obj, str):
            self.add_text(obj)


def _value(m: re.Match) -> float:
    value = float(m.group(1).replace(",", "") + (m.group(2) or ""))
    return value * 10 ** int(m.group(3)) if m.group(3) else value


def prose(markdown: str) -> str:
    """The markdown a reader reads as prose: fenced blocks, inline code and link targets blanked out."""
    text = re.sub(r"```.*?```", lambda m: " " * len(m.group(0)), markdown, flags=re.DOTALL)
    text = re.sub(r"`[^`\n]*`", lambda m: " " * len(m.group(0)), text)
    return re.sub(r"\]\([^)]*\)", lambda m: " " * len(m.group(0)), text)


def figures(markdown: str) -> list[tuple[str, str]]:
    """(figure as written, the words before it) for every figure of a markdown text."""
    text, found = prose(markdown), []
    for m in FIGURE.finditer(text):
        if not (m.group(2) or m.group(3)):
            continue                                                    # a plain integer
        before = text[max(0, m.start() - 30):m.start()]
        sentence = re.split(r"\.\s", text[max(0, m.start() - 200):m.start()])[-1]
        if NOT_A_FIGURE_AFTER.search(before) or (not m.group(3) and SOFTWARE.search(sentence)):
            continue
        name = re.search(r"([\w.]+)-$", before)
        if name and re.search(r"[A-Za-z]", name.group(1)):              # Qwen2.5-7B, A100-40GB, Llama-3.1
            continue
        found.append((m.group(0), before))
    return found


def is_found(figure: str, before: str, printed: Printed) -> bool:
    m = re.match(r"([\d,]+)(\.\d+)?(.*)$", figure)
    whole, decimals, unit = m.group(1).replace(",", ""), m.group(2) or "", m.group(3).strip()
    value = float(whole + decimals)
    step = 10.0 ** -(len(decimals) - 1) if decimals else 1.0
    if not decimals and ABOUT.search(before) and value >= 10:
        step = 10.0 ** (len(whole) - len(whole.rstrip("0")))         # about 680: the 8 is the last digit
    pool = printed.percents if unit == "%" else printed.numbers
    if unit == "TB/s":
        value, step, unit = value * 1000.0, step * 1000.0, "GB/s"
    if AT_MOST.search(before) or AT_LEAST.search(before):               # a bound needs its own unit printed
        bounded = printed.percents if unit == "%" else printed.by_unit.get(unit, set()) if unit else pool
        if AT_MOST.search(before):
            return any(x <= value + step / 2 for x in bounded)
        return any(x >= value - step / 2 for x in bounded)
    return any(abs(x - value) <= step / 2 * (1 + 1e-9) for x in pool)


def unfound(markdown: str, printed: Printed, quoted=()) -> list[str]:
    """The figures of `markdown` that nothing in `printed` contains (nor `quoted` lists)."""
    return [f for f, before in figures(markdown) if f not in quoted and not is_found(f, before, printed)]


def notebook_printed(src: Path) -> Printed:
    """Every output of the stored notebook, every number in its code, every results file its code names."""
    printed = Printed()
    stored = nbformat.read(src.parent.parent / f"{src.stem}.ipynb", as_version=4)
    for cell in stored.cells:
        if cell.cell_type != "code":
            continue
        printed.add_text(cell.source)
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            printed.add_text(out.get("text", "") + "".join(data.get("text/plain", ""))
                             + "".join(data.get("text/markdown", "")))
    for name in set(re.findall(r"[\w/.-]+\.json", src.read_text())):
        if (RESULTS / name).is_file():
            printed.add_json(json.loads((RESULTS / name).read_text()))
    return printed


# ------------------------------------------------------------------------------------------------------------
# the checker, on planted prose

SAMPLE = Printed()
SAMPLE.add_text("v3 248.3 us, FLASH varlen 540.0 us; 22.9 us against 47.9\nspeedup 1.28x\n"
                "used 46.2% of the slots; waste 0.4%; index 18.0%\nmatmul 679 TFLOP/s, copy 4273 GB/s\n"
                "budget = 55 * GiB")
SAMPLE.add_json({"frac_copy": 0.549})


@pytest.mark.parametrize("text, figure", [
    ("v3 takes 248.3 us against 533 us for the varlen kernel.", "533 us"),
    ("8 sequences: v3 25 us against 47.", "25 us"),                  # 47 alone is not a figure
    ("FLASH varlen took 540.4 us.", "540.4 us"),
    ("it reaches 60% of copy", "60%"),
    ("a speedup of 1.4x", "1.4x"),
    ("the kernel is 2.5 times faster", "2.5 times"),
    ("about 750 TFLOP/s", "750 TFLOP/s"),
    ("it wastes under 0.3% of the memory", "0.3%"),
    ("a copy rate of 4.5 TB/s", "4.5 TB/s"),
    ("it runs in under 2 s", "2 s"),                                 # nothing is printed in seconds
    ("Orca (Max)'s 8.9% external", "8.9%"),
])
def test_the_checker_finds_a_planted_figure_that_nothing_prints(text, figure):
    assert unfound(text, SAMPLE) == [figure]


@pytest.mark.parametrize("text", [
    "v3 248.3 us against 540.0; 8 sequences: 22.9 against 47.9 us; 1.28x",
    "46.2% of the slots used; paging wastes under 1%; about 680 TFLOP/s; 4.27 TB/s; 55 GiB of cache; 1.3x",
    "54.9% of copy",                                                  # a result's fraction
    "block size 16, 4096 tokens, 28 layers, 64 sequences, 2,048 slots",
    "the paper (§6.1, p. 10; Fig. 12; section 4.4); PyTorch 2.12 and Triton 3.9; PR #178817; v0.10.2",
    "Qwen2.5-7B, Llama-3.1-8B and an A100-40GB",
    "`x = 2.5 * y` and a picture:\n```\nstep 0.125 = 12.5%\n```\n[a link](https://e.org/v1.2)",
    "2^-9 and 1e-38; at least 268e6 / 4.27e12 s",                   # arithmetic, not a figure
    "refused up to Triton 3.4; from 3.5 it pads (8 in 3.9); PR #178817 (2.12)",  # versions
    "it tops out near 20%",                                            # 18.0% printed: about 20
])
def test_the_checker_accepts_figures_that_are_printed_and_numbers_that_are_not_figures(text):
    assert unfound(text, SAMPLE) == []


def test_a_quoted_figure_is_accepted_only_where_it_is_listed():
    assert unfound("Orca (Max)'s 8.9% external (Fig. 2)", SAMPLE, quoted={"8.9%"}) == []


# ------------------------------------------------------------------------------------------------------------
# the notebooks

@pytest.mark.parametrize("src", SOURCES, ids=[s.stem for s in SOURCES])
def test_every_figure_in_a_notebooks_prose_is_printed_by_the_notebook(src):
    if not (src.parent.parent / f"{src.stem}.ipynb").exists():
        pytest.skip("not built yet (tests/notebooks/test_notebook_sources.py says so)")
    printed = notebook_printed(src)
    number = src.stem[:2]
    quoted = {figure for (nb, figure) in QUOTED if nb == number}
    missing = []
    for i, cell in enumerate(jupytext.read(src, fmt="py:percent").cells):
        if cell.cell_type == "markdown":
            missing += [f"markdown cell {i}: {f!r}" for f in unfound(cell.source, printed, quoted)]
    assert not missing, (f"{src.name} quotes figures that none of its outputs or results files contains "
                         "(print the sentence from the result, or list a quote in QUOTED):\n  "
                         + "\n  ".join(missing))


COUNTS = {w: i for i, w in enumerate("two three four five six seven eight nine ten".split(), start=2)}


def announced_lists(markdown: str) -> list[tuple[int, int, str]]:
    """(count announced, items that follow, the line) for every line that announces a count ("Four things
    move with it:") and ends in a colon followed by a bulleted list."""
    lines, found = markdown.splitlines(), []
    for i, line in enumerate(lines):
        sentence = re.split(r"[.!?]\s", line)[-1]
        words = [COUNTS[w.lower()] for w in re.findall(r"[A-Za-z]+", sentence) if w.lower() in COUNTS]
        if not words or not line.rstrip().endswith(":"):
            continue
        items, j = 0, i + 1
        while j < len(lines) and (lines[j].startswith(("- ", "  ")) or not lines[j].strip()):
            items += lines[j].startswith("- ")
            if not lines[j].strip() and items:
                break
            j += 1
        if items:
            found.append((words[0], items, line.strip()))
    return found


def test_the_list_checker_counts_the_items_after_an_announced_count():
    assert announced_lists("Four things move with it:\n\n- a\n- b\n  more b\n- c\n- d\n- e\n\nAfter.") == [
        (4, 5, "Four things move with it:")]
    assert announced_lists("It names the three:\n- a\n- b\n- c\n") == [(3, 3, "It names the three:")]
    assert announced_lists("Two notes. Then this:\n- a\n") == []           # the count is another sentence's


@pytest.mark.parametrize("src", SOURCES, ids=[s.stem for s in SOURCES])
def test_a_list_has_as_many_items_as_its_sentence_announces(src):
    wrong = [f"{line!r}: {items} items" for cell in jupytext.read(src, fmt="py:percent").cells
             if cell.cell_type == "markdown" for n, items, line in announced_lists(cell.source) if n != items]
    assert not wrong, f"{src.name}: " + "; ".join(wrong)


@pytest.mark.parametrize("src", SOURCES, ids=[s.stem for s in SOURCES])
def test_each_notebook_title_carries_its_file_number(src):
    title = jupytext.read(src, fmt="py:percent").cells[0].source.splitlines()[0]
    assert title.startswith(f"# {src.stem[:2]} · "), f"{src.name}: title {title!r}"
