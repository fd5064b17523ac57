"""The course in Google Colab: what the first cell of every notebook does there.

That cell (`FIRST_CELL`, the same in every notebooks/src/*.py; tests/test_colab_bootstrap.py checks that and
runs it against a stand-in `google.colab`) must work before the course is installed, so it clones the
repository itself: from $PAGEDKV_COURSE_REPO (default `environment.REPO_URL`) into $PAGEDKV_COURSE_DIR
(default /content/course), unless that folder exists. If the clone fails it prints one line naming the
address and stops the notebook; else it puts the clone first on sys.path and calls `install_course`.
Outside Colab the cell only prints `describe_environment()`.
"""
from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from .environment import REPO_URL

ENV_REPO = "PAGEDKV_COURSE_REPO"        # another address for the clone (a fork, a mirror, a local path)
ENV_DIR = "PAGEDKV_COURSE_DIR"          # where the clone goes
DEFAULT_DIR = "/content/course"
DISTRIBUTION = "pagedkv-course"         # the name in pyproject.toml
__all__ = ["FIRST_CELL", "CourseSetupError", "install_course"]

FIRST_CELL = f"""\
import sys

if "google.colab" in sys.modules:  # Colab: clone the course and install it (pagedkv_lib/colab.py)
    import os
    import subprocess

    url = os.environ.get("{ENV_REPO}", "{REPO_URL}")
    home = os.environ.get("{ENV_DIR}", "{DEFAULT_DIR}")
    if not os.path.isdir(home) and subprocess.run(["git", "clone", "-q", url, home],
                                                  capture_output=True).returncode:

        class CourseSetupError(Exception):
            def _render_traceback_(self):  # a notebook shows this one line, not a traceback
                return [str(self)]

        raise CourseSetupError(f"Could not clone the course from {{url}}; check the address and the network.")
    sys.path.insert(0, home)
    from pagedkv_lib.colab import install_course

    install_course(home)
from pagedkv_lib.environment import describe_environment

print(describe_environment())"""


class CourseSetupError(Exception):
    """Setting the course up failed. In a notebook it shows as its one-line message, with no traceback."""

    def _render_traceback_(self) -> list[str]:       # IPython's hook for how an exception is displayed
        return [str(self)]


def installed_from(home: Path) -> bool:
    """Whether this Python already has the course installed in editable mode from `home`."""
    for dist in metadata.distributions(name=DISTRIBUTION):      # a clone's own *.egg-info has no direct_url
        url = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
        if url.removeprefix("file://") == str(home.resolve()):
            return True
    return False


def install_course(home: str | Path) -> None:
    """`pip install -e home` (its dependencies included) unless it was installed from there already.

    The clone is already first on sys.path, so this kernel imports `pagedkv_lib` from it; the install adds
    the dependencies and makes `python practice/judge.py` work in `!` shell commands.
    """
    home = Path(home)
    if installed_from(home):
        return
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", str(home)],
                          capture_output=True, text=True)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise CourseSetupError(f"Could not install the course from {home} (pip: {last}); "
                               f"run `!pip install -e {home}` to see why.")
