"""A scratch copy of this repository for tests that act as a learner would: run the README's commands, edit
practice/, grade. The copy holds the working tree's files (tracked, and untracked but not ignored), except
that practice/ holds what the course ships, whatever the learner has done to theirs: each exercise's stub as
its solution generates it, no backups, no status. It is committed in a fresh git repository, so `git show
HEAD:...` there sees what a clone of a fresh course would."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


def tree_files() -> list[str]:
    """The working tree's files, less practice/'s untracked ones (a learner's backups and notes)."""
    def listed(*flags) -> set[str]:
        done = subprocess.run(["git", "ls-files", "-z", *flags], cwd=ROOT, capture_output=True, check=True)
        return {f for f in done.stdout.decode().split("\0") if f and (ROOT / f).is_file()}

    untracked = listed("--others", "--exclude-standard")
    return sorted(listed("--cached") | {f for f in untracked if not f.startswith("practice/")})


def make_scratch_repo(dest: Path) -> Path:
    """Copy the working tree to `dest`, practice/ as shipped, and commit it there; returns `dest`."""
    from pagedkv_lib.judge.registry import EXERCISES
    from pagedkv_lib.judge.stubs import stub_of

    stubs = {f"practice/{ex.filename}": stub_of(ex) for ex in EXERCISES.values()}
    for rel in tree_files():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target)
    for rel, text in stubs.items():                     # over the learner's files, or where they deleted one
        (dest / rel).write_text(text)
    git = ["git", "-c", "user.name=learner", "-c", "user.email=learner@example.com"]
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "scratch copy"], cwd=dest, check=True)
    return dest


def learner_env(**extra) -> dict:
    """The environment of a shell where the course's .venv is activated (its bin first on PATH); the status
    file is the scratch course's own, practice/.judge_status.json."""
    drop = ("PYTHONPATH", "PYTHONHOME", "PAGEDKV_JUDGE_STATUS")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(VENV_BIN.parent)
    env.update(extra)
    return env


def sh(command: str, cwd: Path, timeout: float = 300, **env) -> subprocess.CompletedProcess:
    """Run `command` in bash as a learner would type it, in the activated environment."""
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=learner_env(**env), capture_output=True,
                          text=True, timeout=timeout)
