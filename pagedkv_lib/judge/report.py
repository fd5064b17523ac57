"""Reports of a grading run: text for people, JSON for machines, CSV for an instructor's batch.

JSON (`judge.py ID FILE --json`; a batch gives a list): {"schema": 2, "exercise": 127, "title", "file",
"seed", "device", "verdict": one of outcome.VERDICTS ("judge error": the judge's own failure before the
submission was imported; "load_error" says what to report), "passed", "total", "wall_s", "isolation" (in
words), "tampered" ([str], unsandboxed only), "load_error": null | OUTCOME, "cases": [{"name", "time_s",
**OUTCOME}], "output" (the first bytes printed), "output_bytes", "bench": null | {...}}; OUTCOME =
{"verdict", "message", "hint", "details": [str], "max_abs_err"}. It is strict JSON: a number that is not
finite (a max abs err of NaN) is null.

What a submission printed or sent, and a file's name, reach a terminal or a spreadsheet only through
`escaped`: control characters (ESC, CR, a newline inside a label, bidirectional overrides) are shown as
escapes, and every quoted line is clipped, so a report cannot move the cursor, rewrite a line, add a row
to the batch table or to the batch's progress lines (`progress_line`), or grow past a few kilobytes. A CSV
cell that a spreadsheet would run as a formula (one that starts with =, +, -, @, a tab or a CR: the name of
a submission's exception class, or a file named `=HYPERLINK(...).py`) starts with a single quote instead,
as OWASP's advice on CSV injection says (`cell`).
"""
from __future__ import annotations

import csv
import io
import math
import re

from . import registry, speed
from .cases import checked_elsewhere
from .cases.compare import show
from .outcome import CODES, PASSED, clip, not_graded

MAX_QUOTED_LINES = 40                # lines of a submission's output quoted in the text report
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")    # what makes a spreadsheet read a cell as a formula


def escaped(text: str, keep: str = "") -> str:
    """`text` with every control character but those in `keep` shown as an escape (\\x1b, \\r, \\n, ...),
    clipped to outcome.MAX_TEXT characters."""
    def one(match) -> str:
        char = match.group()
        if char in keep:
            return char
        return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")

    return clip(_CONTROL.sub(one, text))


def text(result, verbose: bool = False, timing: bool = True) -> str:
    """The report of one graded file; `timing=False` leaves out times (stable notebook output)."""
    lines = [f"Exercise {result.exercise_id}: {result.title}",
             f"  graded: {escaped(result.label)}   seed {result.seed}   device {result.device}",
             *(f"  {line}" for line in checked_elsewhere(result))]
    if timing:                                   # notebooks leave it out: it differs between machines
        lines.append(f"  isolation: {result.isolation}")
    if result.tampered:
        lines += ["", f"TAMPERING: {', '.join(result.tampered)} changed while this submission ran "
                      "unsandboxed, so its verdict cannot be trusted"]
    if result.load is not None:
        lines += _failure(f"{not_graded(result.load).capitalize()}: {result.load.verdict}", result.load)
    else:
        for c in result.cases:
            if verbose or c.verdict != PASSED or len(result.cases) <= 40:
                extra = f"{1000 * c.time_s:7.1f} ms" if c.time_s is not None and timing else ""
                if c.outcome.max_abs_err is not None and c.verdict == PASSED:
                    extra += f"   max abs err {c.outcome.max_abs_err:.2g}"
                lines.append(f"  {CODES[c.verdict]:<4} {c.name:<46}{extra}".rstrip())
        failure = result.first_failure
        if failure is not None:
            first = f"First failing case: {failure.name} ({failure.verdict})"
            lines += ["", *_failure(first, failure.outcome, failure.show)]
    lines += _printed(result, verbose)
    if result.bench:
        lines += ["", "Benchmark:"] + [f"  {k}: {show(v)}" for k, v in result.bench.items() if k != "speed"]
    lines += ["", summary(result, timing)]
    said = speed.line(registry.EXERCISES.get(result.exercise_id), result)   # beside the verdict
    return "\n".join(lines if said is None else [*lines, said])


def _printed(result, verbose: bool) -> list:
    """What the submission printed: quoted (escaped, clipped) when a case failed or with -v; on a pass, one
    line that says how much (a library's warning is printed too, and a pass needs no debugging)."""
    if not result.output_total:
        return []
    if result.ok and not verbose:
        return ["", f"It printed {result.output_total} bytes (shown when a case fails, or with -v)."]
    shown = len(result.output.encode())
    head = f"It printed {result.output_total} bytes"
    if shown < result.output_total:
        head += f" (the first {shown})"
    quoted = result.output.rstrip("\n").split("\n")[:MAX_QUOTED_LINES]      # a CR is shown, not obeyed
    return ["", head + ":", *(f"  | {escaped(line, keep=chr(9))}" for line in quoted)]


def _failure(title: str, outcome, show=()) -> list:
    hint = [f"  hint: {escaped(outcome.hint)}"] if outcome.hint else []
    said = [*show, outcome.message, *outcome.details]
    return [title, *(f"  {escaped(line, keep=chr(9))}" for line in said), *hint]


def summary(result, timing: bool = True) -> str:
    verdict = result.verdict
    head = f"{result.passed}/{result.total} passed: {verdict.upper()}"
    if result.load is not None:
        return f"{head} ({not_graded(result.load)})"
    failure = result.first_failure
    where = f" on {failure.name}" if failure else ""
    if timing:
        where += f"  [{result.wall_s:.1f} s]"
    return head + where


def to_dict(result) -> dict:
    """The JSON report of one graded file (the schema above); every number in it is finite or null."""
    return _finite({"schema": 2, "exercise": result.exercise_id, "title": result.title, "file": result.label,
            "seed": result.seed, "device": result.device, "verdict": result.verdict,
            "passed": result.passed, "total": result.total, "wall_s": round(result.wall_s, 3),
            "isolation": result.isolation, "tampered": list(result.tampered),
            "load_error": result.load.to_dict() if result.load else None,
            "cases": [{"name": c.name, "time_s": c.time_s, **c.outcome.to_dict()} for c in result.cases],
            "output": result.output, "output_bytes": result.output_total, "bench": result.bench})


def _finite(value):
    """`value` with each float that is not finite made None: JSON has no NaN or Infinity."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


def batch_table(results) -> str:
    labels = [escaped(r.label) for r in results]
    width = max([len(label) for label in labels] + [4])
    lines = [f"{'file':<{width}}  {'passed':>9}  verdict"]
    for r, label in zip(results, labels):
        failure = r.first_failure
        where = f" on {failure.name}" if failure and r.load is None else ""
        lines.append(f"{label:<{width}}  {r.passed:>4}/{r.total:<4}  {r.verdict}{where}")
    ok = sum(r.ok for r in results)
    lines.append(f"{ok}/{len(results)} submissions passed every case")
    return "\n".join(lines)


def progress_line(done: int, total: int, label: str) -> str:
    """The line a batch prints on stderr as the grading of file `label` ends."""
    return f"{done}/{total} graded: {escaped(label)}"


def cell(value) -> str:
    """A CSV cell: escaped, and quoted with a leading ' where a spreadsheet would run it as a formula."""
    text = escaped(str(value))
    if text.startswith(_FORMULA_START):
        return "'" + text
    return text


def to_csv(results) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["file", "exercise", "seed", "verdict", "passed", "total", "first_failure", "message"])
    for r in results:
        failure = r.first_failure
        message = r.load.message if r.load else (failure.outcome.message if failure else "")
        first = failure.name if failure and not r.load else ""
        writer.writerow([cell(r.label), r.exercise_id, r.seed, cell(r.verdict), r.passed, r.total,
                         cell(first), cell(message)])
    return out.getvalue()
