"""What this machine offers the course: torch, Triton, a CUDA GPU or Triton's CPU interpreter; and, in Google
Colab, how the course gets there.

The first cell of every notebook (`FIRST_CELL`, the same in every notebooks/src/*.py;
tests/notebooks/test_colab_bootstrap.py checks that and runs it against a stand-in `google.colab`) must work
before the course is installed, so in Colab it clones the repository itself: from $PAGEDKV_COURSE_REPO
(default `REPO_URL`) into $PAGEDKV_COURSE_DIR (default /content/course), unless that folder exists. If the
clone fails it prints one line naming the address and stops the notebook; else it puts the clone first on
sys.path and calls `install_course`. Everywhere, it then prints `describe_environment()`.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

REPO_URL = "https://github.com/pagedkv-course/pagedkv-course"


def has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def has_triton() -> bool:
    return importlib.util.find_spec("triton") is not None


def kernel_mode() -> str:
    """'cuda' when Triton kernels run natively, 'interpreter' on CPU, 'unavailable' without Triton."""
    if not has_triton():
        return "unavailable"
    if has_cuda() and os.environ.get("TRITON_INTERPRET", "0") != "1":
        return "cuda"
    return "interpreter"


def describe_environment() -> str:
    """One line a learner can read: where tensors live and how the Triton kernels will run."""
    mode = kernel_mode()
    if mode == "cuda":
        import torch

        return f"GPU: {torch.cuda.get_device_name()} - Triton kernels run natively"
    if mode == "interpreter":
        return "CPU only - Triton kernels run in Triton's interpreter (TRITON_INTERPRET=1), small shapes"
    return "CPU only, no Triton - the Triton notebooks show stored GPU figures only"


def versions() -> dict[str, str]:
    import torch

    out = {"torch": torch.__version__}
    if has_triton():
        import triton

        out["triton"] = triton.__version__
    return out


# ----------------------------------------------------------------------------------------------------------
# Colab

ENV_REPO = "PAGEDKV_COURSE_REPO"        # another address for the clone (a fork, a mirror, a local path)
ENV_DIR = "PAGEDKV_COURSE_DIR"          # where the clone goes
DEFAULT_DIR = "/content/course"
DISTRIBUTION = "pagedkv-course"         # the name in pyproject.toml
FIRST_CELL = f"""\
import sys

if "google.colab" in sys.modules:  # Colab: clone the course and install it (pagedkv_lib/environment.py)
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
    from pagedkv_lib.environment import install_course

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
