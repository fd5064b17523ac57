"""Verdicts, online-judge style, and the `Outcome` of one case: a verdict, a line, a hint, more lines.

`Outcome` is the judge's one error record. The child makes one from an exception the submission raised
(`Outcome.of_exception`), sends it as plain data, and the parent reads it back with `Outcome.from_child`,
which will not let a child claim a pass.
"""
from __future__ import annotations

import os
import platform
import traceback
from dataclasses import asdict, dataclass, field

PASSED = "passed"
WRONG_ANSWER = "wrong answer"
RUNTIME_ERROR = "runtime error"
TIME_LIMIT = "time limit"
MEMORY_LIMIT = "memory limit"
NOT_IMPLEMENTED = "not implemented"
TAMPERING = "tampering"       # unsandboxed grading only: a file the judge relies on changed while it ran
SKIPPED = "skipped"           # not run: an earlier case ended the process, or the batch stopped
JUDGE_ERROR = "judge error"   # the judge's own machinery failed before the submission was imported
CODES = {PASSED: "ok", WRONG_ANSWER: "WA", RUNTIME_ERROR: "RE", TIME_LIMIT: "TLE", MEMORY_LIMIT: "MLE",
         NOT_IMPLEMENTED: "NI", TAMPERING: "TAMP", SKIPPED: "--", JUDGE_ERROR: "JE"}   # each verdict's code
VERDICTS = tuple(CODES)
MEMORY_HINT = "the judge caps the memory a submission may allocate"
MAX_TEXT = 500                # characters of one text a child sent (a message, a hint, an action)
MAX_DETAILS = 20              # lines of details it sent
_OOM_WORDS = ("can't allocate memory", "out of memory", "cannot allocate memory")
_DOT16 = ("the dot rule: every dimension (M, N and K) of every tl.dot is at least 16, as every supported "
          "Triton (3.0 to 3.9) needs on a GPU: pad the tile to max(16, next power of two), mask the padding")
_EXCEPTION_HINTS = (  # words in an exception's text -> the hint (Triton's known refusals)
    (("Input shapes should have M >=",), _DOT16),
    (("must be >= 16", "input shape"), _DOT16),
    (("mask has unsupported dtype",), "Triton's interpreter rejects a mask that mixes a block with a scalar "
     "test, such as (offs < ROW) & (slot >= 0): return early for slot < 0"),
    (("view size is not compatible",), "a tensor here is not contiguous (a slice): use .reshape()"),
)


@dataclass
class Outcome:
    verdict: str = PASSED
    message: str = ""                                  # expected vs got, one line
    hint: str = ""                                     # the usual mistake behind this difference
    details: list = field(default_factory=list)        # more lines: the ops so far, a traceback, ...
    max_abs_err: float | None = None

    @property
    def passed(self) -> bool:
        return self.verdict == PASSED

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_child(cls, record) -> Outcome:
        """The Outcome a child (perhaps a hostile one) sent: it cannot claim a pass, a skip, tampering or a
        judge error, and what it says is text, clipped (MAX_TEXT characters, MAX_DETAILS lines)."""
        if type(record) is not dict:
            record = {}
        verdict = record.get("verdict")
        if verdict not in VERDICTS or verdict in (PASSED, TAMPERING, SKIPPED, JUDGE_ERROR):
            verdict = RUNTIME_ERROR
        details = record.get("details")
        if type(details) is not list:
            details = []
        lines = [clip(line) for line in details[:MAX_DETAILS] if type(line) is str]
        return cls(verdict, _said(record.get("message")), _said(record.get("hint")), lines)

    @classmethod
    def of_exception(cls, exc: BaseException, files=()) -> Outcome:
        """What an exception from submitted code means: its verdict, a line, a hint, the user's frames."""
        name = type(exc).__name__
        try:
            said = str(exc)
        except Exception:                              # an exception whose __str__ fails
            said = ""
        text = f"{name}: {said}" if said else name
        hint = ""
        if isinstance(exc, NotImplementedError):
            verdict, hint = NOT_IMPLEMENTED, "replace the `raise NotImplementedError` with your code"
        elif isinstance(exc, MemoryError) or any(w in said.lower() for w in _OOM_WORDS):
            verdict, hint = MEMORY_LIMIT, MEMORY_HINT
        elif isinstance(exc, SystemExit):
            verdict, hint = RUNTIME_ERROR, "do not call sys.exit() or exit() in a submission"
            text = f"called sys.exit({exc.code!r})"
        elif isinstance(exc, RecursionError):
            verdict, hint = RUNTIME_ERROR, "a recursion that never reaches its base case?"
        elif isinstance(exc, ForbiddenCall):
            verdict, hint = RUNTIME_ERROR, "write the graded code yourself; the library is the oracle"
        else:
            verdict = RUNTIME_ERROR
            hint = next((h for words, h in _EXCEPTION_HINTS if all(w in said for w in words)), "")
        return cls(verdict, clip(text), hint, user_trace(exc, files))


def judge_error(message: str, isolation: str, details=()) -> Outcome:
    """The judge's own failure (its child ended, or sent nonsense, before it imported the submission): not
    the learner's doing, so its hint asks for a report of what reproduces it, never for a change of code."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for package in ("torch", "triton"):
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            found.append(f"no {package}")
    versions = ", ".join([f"python {platform.python_version()}", *found, f"isolation {isolation}"])
    return Outcome(JUDGE_ERROR, f"{message}: a failure of the judge itself, not of your code",
                   f"please report it with the command you ran and: {versions}", list(details))


def not_graded(load: Outcome) -> str:
    """Why a submission whose loading failed (`load`) was not graded, in a few words."""
    if load.verdict == JUDGE_ERROR:
        return "the judge failed before it imported the submission"
    return "the submission could not be graded"


def clip(text: str, limit: int = MAX_TEXT) -> str:
    """`text` cut to `limit` characters, saying how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def _said(value) -> str:
    return clip(value) if type(value) is str else ""


class ForbiddenCall(RuntimeError):
    """Raised in the child when a submission calls a library object the exercise asks it to write."""


def wrong(message: str, hint: str = "", details=(), max_abs_err=None) -> Outcome:
    return Outcome(WRONG_ANSWER, message, hint, list(details), max_abs_err)


def user_trace(exc: BaseException, files=()) -> list:
    """The frames of the traceback in the submitted code (or, failing that, outside the judge), last 4."""
    judge_dir = os.path.dirname(os.path.abspath(__file__))
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if f.filename in files] if files else []
    if not mine:
        mine = [f for f in frames if not f.filename.startswith(judge_dir)]
    return [f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}: {(f.line or '').strip()}"[:200]
            for f in mine[-4:]]
