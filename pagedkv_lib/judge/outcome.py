"""Verdicts, online-judge style, and the `Outcome` of one case: a verdict with what to show and a hint."""
from __future__ import annotations

import os
import traceback
from dataclasses import asdict, dataclass, field

PASSED = "passed"
WRONG_ANSWER = "wrong answer"
RUNTIME_ERROR = "runtime error"
TIME_LIMIT = "time limit"
MEMORY_LIMIT = "memory limit"
NOT_IMPLEMENTED = "not implemented"
TAMPERING = "tampering"           # a protected file (judge, library, status, another file) changed meanwhile
SKIPPED = "skipped"               # not run: an earlier case ended the process and the restarts ran out
VERDICTS = (PASSED, WRONG_ANSWER, RUNTIME_ERROR, TIME_LIMIT, MEMORY_LIMIT, NOT_IMPLEMENTED, TAMPERING,
            SKIPPED)
CODES = {PASSED: "ok", WRONG_ANSWER: "WA", RUNTIME_ERROR: "RE", TIME_LIMIT: "TLE", MEMORY_LIMIT: "MLE",
         NOT_IMPLEMENTED: "NI", TAMPERING: "TAMP", SKIPPED: "--"}
_OOM_WORDS = ("can't allocate memory", "out of memory", "cannot allocate memory")


@dataclass
class Outcome:
    verdict: str = PASSED
    message: str = ""                                  # expected vs got, one line
    hint: str = ""                                     # the usual mistake behind this difference
    details: list = field(default_factory=list)        # more lines: ops so far, a traceback, ...
    max_abs_err: float | None = None

    @property
    def passed(self) -> bool:
        return self.verdict == PASSED

    def to_dict(self) -> dict:
        return asdict(self)


class ForbiddenCall(RuntimeError):
    """Raised in the child when a submission calls a library object the exercise asks it to write."""


def wrong(message: str, hint: str = "", details=(), max_abs_err=None) -> Outcome:
    return Outcome(WRONG_ANSWER, message, hint, list(details), max_abs_err)


def describe_exception(exc: BaseException, files=()) -> dict:
    """A picklable record of an exception raised by submitted code: its verdict, a line, a short trace."""
    name = type(exc).__name__
    try:
        said = str(exc)
    except Exception:                                  # an exception whose __str__ fails
        said = ""
    text = f"{name}: {said}" if said else name
    if isinstance(exc, NotImplementedError):
        verdict, hint = NOT_IMPLEMENTED, "replace the `raise NotImplementedError` with your code"
    elif isinstance(exc, MemoryError) or any(w in said.lower() for w in _OOM_WORDS):
        verdict, hint = MEMORY_LIMIT, "the judge caps the memory a submission may allocate"
    elif isinstance(exc, SystemExit):
        verdict, hint = RUNTIME_ERROR, "do not call sys.exit() or exit() in a submission"
        text = f"called sys.exit({exc.code!r})"
    elif isinstance(exc, RecursionError):
        verdict, hint = RUNTIME_ERROR, "a recursion that never reaches its base case?"
    elif isinstance(exc, ForbiddenCall):
        verdict, hint = RUNTIME_ERROR, "write the graded code yourself; the library is the oracle"
    elif "Input shapes should have M >=" in said or ("must be >= 16" in said and "input shape" in said):
        verdict, hint = RUNTIME_ERROR, ("on a GPU (and in triton < 3.4's interpreter) every dimension of a "
                                        "tl.dot is at least 16: pad the "
                                        "tile (e.g. BLOCK_G = max(16, next power of two >= G)) and mask the "
                                        "extra rows")
    elif "mask has unsupported dtype" in said:
        verdict, hint = RUNTIME_ERROR, ("Triton's interpreter rejects a mask that mixes a block with a "
                                        "scalar test, such as (offs < ROW) & (slot >= 0): return early for "
                                        "slot < 0")
    elif "view size is not compatible" in said:
        verdict, hint = RUNTIME_ERROR, "a tensor here is not contiguous (a slice of another): use .reshape()"
    else:
        verdict, hint = RUNTIME_ERROR, ""
    return {"verdict": verdict, "message": text[:500], "hint": hint, "trace": user_trace(exc, files)}


def user_trace(exc: BaseException, files=()) -> list:
    """The frames of the traceback that are in the submitted code (or not in the judge), last 4."""
    judge_dir = os.path.dirname(os.path.abspath(__file__))
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if f.filename in files] if files else []
    if not mine:
        mine = [f for f in frames if not f.filename.startswith(judge_dir)]
    return [f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}: {(f.line or '').strip()}"[:200]
            for f in mine[-4:]]


def from_record(record) -> Outcome:
    """The Outcome of an exception record (protocol.ErrorRecord, or a dict of `describe_exception`) made in
    a child, possibly a hostile one: a child cannot claim a pass or tampering."""
    if not isinstance(record, dict):
        record = {"verdict": record.verdict, "message": record.message, "hint": record.hint,
                  "trace": list(record.trace)}
    verdict = record.get("verdict") if record.get("verdict") in VERDICTS else RUNTIME_ERROR
    if verdict in (PASSED, TAMPERING, SKIPPED):
        verdict = RUNTIME_ERROR
    details = [str(line) for line in record.get("trace", []) if isinstance(line, str)]
    return Outcome(verdict, str(record.get("message", ""))[:500], str(record.get("hint", "")), details)
