"""The learner's status per exercise, in a git-ignored JSON file: practice/.judge_status.json, or
$PAGEDKV_JUDGE_STATUS. Only the judge's parent writes it, after its children ended, and only for the learner's
own file of an exercise or code graded in a notebook; an entry the judge could not have written is "unknown".
Several judges may finish at once (a class graded in parallel, a notebook beside a terminal): each update
reads, changes and replaces the file under an exclusive lock on a sibling lock file (`fcntl.flock`), through
a temporary file of its own, so that no update is lost and no reader sees half a file. The lock is waited
for LOCK_S at most (a process that holds it forever cannot hang the judge: that verdict is then not kept).

    {"127": {"verdict": "passed", "passed": 19, "total": 19, "file": "practice/127_....py", "seed": 0,
             "when": "2026-11-30 20:15:00", "source": "file" | "notebook",
             "speed": {"verdict": "fast enough", "yours": 0.62, "library": 0.97, "bar": "..."}}, ...}
"speed" (speed.py) is there only for a run that measured it (--device cuda --bench, an exercise with a
speed bar); a file written before it existed reads the same.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import tempfile
import time
from pathlib import Path

from . import speed
from .outcome import JUDGE_ERROR, NOT_IMPLEMENTED, PASSED, SKIPPED, TAMPERING, VERDICTS
from .registry import PRACTICE_DIR

UNKNOWN = "unknown"
LOCK_S = 30.0                       # how long an update waits for the lock before it gives up
_FIELDS = {"verdict": str, "passed": int, "total": int, "file": str, "seed": int, "when": str}


def path() -> Path:
    return Path(os.environ.get("PAGEDKV_JUDGE_STATUS", PRACTICE_DIR / ".judge_status.json"))


def read() -> dict:
    """{exercise id (str): entry} as stored, not validated."""
    try:
        data = json.loads(path().read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def valid(entry) -> bool:
    """The fields and types of the schema, a verdict the judge records, counts that agree with it."""
    return (isinstance(entry, dict) and all(type(entry.get(k)) is t for k, t in _FIELDS.items())
            and entry["verdict"] in VERDICTS and entry["verdict"] not in (TAMPERING, SKIPPED, JUDGE_ERROR)
            and 0 <= entry["passed"] <= entry["total"]
            and (entry["verdict"] == PASSED) == (entry["passed"] == entry["total"] > 0))


def entry(exercise_id: int) -> dict | None:
    """The entry of one exercise; {"verdict": "unknown"} if it does not validate; None if there is none."""
    found = read().get(str(exercise_id))
    return found if found is None or valid(found) else {"verdict": UNKNOWN}


def record(result, source: str = "file") -> None:
    """Remember the verdict of `result` (a grading.Result); never fails the grading (a read-only checkout
    keeps nothing). A notebook run records only what the learner wrote there (not an empty stub) and never
    replaces a stored pass with a worse verdict."""
    if result.tampered or result.verdict == JUDGE_ERROR:      # nothing the learner did
        return
    with contextlib.suppress(OSError), _locked():
        data = {k: v for k, v in read().items() if valid(v)}
        key = str(result.exercise_id)
        old = data.get(key, {})
        if source == "notebook" and (result.verdict == NOT_IMPLEMENTED or
                                     (old.get("verdict") == PASSED and not result.ok)):
            return
        kept = {"verdict": result.verdict, "passed": result.passed, "total": result.total,
                "file": result.label, "seed": result.seed, "when": time.strftime("%Y-%m-%d %H:%M:%S"),
                "source": source}
        measured = speed.status_entry((getattr(result, "bench", None) or {}).get("speed"), result.ok)
        if measured is not None and result.device == "cuda":            # beside the verdict it goes with
            kept["speed"] = measured
        data[key] = kept
        _write(data)


@contextlib.contextmanager
def _locked():
    """An exclusive lock on `<status file>.lock` for one read-modify-write (released when it is closed);
    OSError when another process held it for LOCK_S."""
    target = path()
    deadline = time.monotonic() + LOCK_S
    with open(target.with_name(target.name + ".lock"), "a") as lock:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise OSError(errno.EWOULDBLOCK, "the status file's lock: held for more than "
                                  f"{LOCK_S:g} s by another process") from None
                time.sleep(0.02)
        yield


def _write(data: dict) -> None:
    """Replace the status file with `data` through a temporary file of this writer's own (under the lock)."""
    target = path()
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(data, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def describe(exercise_id: int) -> str:
    found = entry(exercise_id) or {"verdict": "not graded yet"}
    counts = f" ({found['passed']}/{found['total']})" if "passed" in found else ""
    unknown = " (the status entry does not validate)" if found["verdict"] == UNKNOWN else ""
    kept = found.get("speed")
    fast = f"; speed {kept['verdict']}" if speed.valid_entry(kept) else ""
    return found["verdict"] + (unknown or counts) + fast
