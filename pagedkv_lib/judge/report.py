"""Reports of a grading run: text for people, JSON for machines, CSV for an instructor's batch.

JSON (`judge.py ID FILE --json`; a batch gives a list): {"schema": 2, "exercise": 127, "title", "file",
"seed", "device", "verdict": one of outcome.VERDICTS, "passed", "total", "wall_s", "isolation" (in words),
"tampered" ([str], unsandboxed only), "load_error": null | OUTCOME, "cases": [{"name", "time_s", **OUTCOME}],
"output" (the first bytes printed), "output_bytes", "bench": null | {...}}; OUTCOME = {"verdict", "message",
"hint", "details": [str], "max_abs_err"}.
"""
from __future__ import annotations

import csv
import io

from .cases import gpu_only
from .cases.compare import show
from .outcome import CODES, PASSED


def text(result, verbose: bool = False, timing: bool = True) -> str:
    """The report of one graded file; `timing=False` leaves out times (stable notebook output)."""
    lines = [f"Exercise {result.exercise_id}: {result.title}",
             f"  graded: {result.label}   seed {result.seed}   device {result.device}",
             *(f"  checked only with --device cuda: {clause}" for clause in gpu_only(result))]
    if timing:                                   # notebooks leave it out: it differs between machines
        lines.append(f"  isolation: {result.isolation}")
    if result.tampered:
        lines += ["", f"TAMPERING: {', '.join(result.tampered)} changed while this submission ran "
                      "unsandboxed, so its verdict cannot be trusted"]
    if result.load is not None:
        lines += _failure(f"The submission could not be graded: {result.load.verdict}", result.load)
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
    if result.output_total:
        shown = len(result.output.encode())
        lines += ["", f"It printed {result.output_total} bytes" + (f" (the first {shown}):" if shown <
                                                                     result.output_total else ":")]
        lines += [f"  | {line}" for line in result.output.splitlines()[:40]]
    if result.bench:
        lines += ["", "Benchmark:"] + [f"  {k}: {show(v)}" for k, v in result.bench.items()]
    lines += ["", summary(result, timing)]
    return "\n".join(lines)


def _failure(title: str, outcome, show=()) -> list:
    hint = [f"  hint: {outcome.hint}"] if outcome.hint else []
    return [title, *(f"  {line}" for line in [*show, outcome.message, *outcome.details]), *hint]


def summary(result, timing: bool = True) -> str:
    verdict = result.verdict
    head = f"{result.passed}/{result.total} passed: {verdict.upper()}"
    if result.load is not None:
        return f"{head} (the submission could not be graded)"
    failure = result.first_failure
    where = f" on {failure.name}" if failure else ""
    return head + where + (f"  [{result.wall_s:.1f} s]" if timing else "")


def to_dict(result) -> dict:
    return {"schema": 2, "exercise": result.exercise_id, "title": result.title, "file": result.label,
            "seed": result.seed, "device": result.device, "verdict": result.verdict,
            "passed": result.passed, "total": result.total, "wall_s": round(result.wall_s, 3),
            "isolation": result.isolation, "tampered": list(result.tampered),
            "load_error": result.load.to_dict() if result.load else None,
            "cases": [{"name": c.name, "time_s": c.time_s, **c.outcome.to_dict()} for c in result.cases],
            "output": result.output, "output_bytes": result.output_total, "bench": result.bench}


def batch_table(results) -> str:
    width = max([len(r.label) for r in results] + [4])
    lines = [f"{'file':<{width}}  {'passed':>9}  verdict"]
    for r in results:
        failure = r.first_failure
        where = f" on {failure.name}" if failure and r.load is None else ""
        lines.append(f"{r.label:<{width}}  {r.passed:>4}/{r.total:<4}  {r.verdict}{where}")
    ok = sum(r.ok for r in results)
    lines.append(f"{ok}/{len(results)} submissions passed every case")
    return "\n".join(lines)


def to_csv(results) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["file", "exercise", "seed", "verdict", "passed", "total", "first_failure", "message"])
    for r in results:
        failure = r.first_failure
        message = r.load.message if r.load else (failure.outcome.message if failure else "")
        writer.writerow([r.label, r.exercise_id, r.seed, r.verdict, r.passed, r.total,
                         failure.name if failure and not r.load else "", message])
    return out.getvalue()
