"""The parent's check that grading changed nothing that matters: a digest of the judge, its cases, the library
the judge uses as its oracle, the reference solutions, practice/ (the learner's files and status file) and
every file of the batch, taken before and after each child.

A difference is tampering: the submission that ran in between is not passed, and a batch stops trusting
itself. The sandbox (isolation.py) makes such writes fail in the first place; this check also covers the
machines where it is missing.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from .registry import LIBRARY_DIR, PRACTICE_DIR, ROOT, SOLUTIONS_DIR


def protected_files(extra=()) -> list[Path]:
    """The files a submission must not change: sorted, existing ones."""
    files = set()
    for folder, pattern in ((LIBRARY_DIR, "**/*.py"), (SOLUTIONS_DIR, "*.py"), (PRACTICE_DIR, "*")):
        files.update(p for p in folder.glob(pattern) if p.is_file() and "__pycache__" not in p.parts)
    for name in ("judge.py",):
        if (ROOT / name).is_file():
            files.add(ROOT / name)
    files.update(Path(p) for p in extra if Path(p).is_file())
    return sorted(files)


class Snapshot:
    """path -> sha256 of the protected files (and which ones exist) at one moment."""

    def __init__(self, extra=()):
        self.extra = tuple(extra)
        self.digests = {str(p): _digest(p) for p in protected_files(self.extra)}

    def changes(self, other: Snapshot | None = None) -> list[str]:
        """Paths created, deleted or changed between this snapshot and `other` (default: now)."""
        now = other.digests if other is not None else Snapshot(self.extra).digests
        return sorted(p for p in set(now) | set(self.digests) if now.get(p) != self.digests.get(p))

    def forget(self, path) -> None:
        """Take the judge's own write to `path` (the status file) into the snapshot."""
        path = Path(path)
        if path.is_file():
            self.digests[str(path)] = _digest(path)
        else:
            self.digests.pop(str(path), None)


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError as exc:
        return f"unreadable: {exc.errno}"
    return h.hexdigest()


def describe(paths, limit: int = 5) -> str:
    shown = [os.path.relpath(p, ROOT) if str(p).startswith(str(ROOT)) else str(p) for p in paths[:limit]]
    more = f" and {len(paths) - limit} more" if len(paths) > limit else ""
    return ", ".join(shown) + more
