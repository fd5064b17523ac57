"""What this machine offers the course: torch, Triton, a CUDA GPU or Triton's CPU interpreter; and, in Google
Colab, how the course gets there.

notebooks/build.py puts `FIRST_CELL` first among the code cells of every notebook (the sources do not carry
it). It must work before the course is installed, so in Colab it carries its own copy of `course_source`,
which picks where the course comes from, in this order:

1. the GitHub repository and ref the notebook was opened from, when Colab says it (a notebook opened at
   https://colab.research.google.com/github/OWNER/REPO/blob/REF/notebooks/NN.ipynb);
2. the address in $PAGEDKV_COURSE_REPO (a fork, a mirror, a local path);
3. a course folder (one holding pagedkv_lib/) already in /content or in Drive (/content/drive/MyDrive);
4. else one line saying what to do, and the notebook stops.

A repository is cloned into $PAGEDKV_COURSE_DIR (default /content/course) unless that folder exists already
(an earlier run of the cell); a clone that fails is one line naming the address. The course folder then goes
first on sys.path and `install_course` installs it. Everywhere, the cell then prints `describe_environment()`.
Its first line is a Colab form title: Colab shows the cell folded to it (elsewhere it is a comment).
tests/notebooks/test_colab_bootstrap.py covers `course_source` case by case and plays the cell against a
stand-in `google.colab`.
"""
from __future__ import annotations

import importlib.util
import inspect
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
FOLDER_ROOTS = ("/content", "/content/drive/MyDrive")   # where a course folder already there is looked for
DISTRIBUTION = "pagedkv-course"         # the name in pyproject.toml


def course_source(opened_from: str | None, env_repo: str | None, folders: list[str]) -> tuple[str, str, str]:
    """Where the course comes from in Colab: (how, where, ref), how one of "clone", "folder", "none".

    `opened_from`: what Colab says the notebook was opened from. Its Jupyter server lists the session
    with the path `fileId=<the notebook's address, URL-quoted>`; opened from GitHub, that address is
    https://github.com/OWNER/REPO/blob/REF/notebooks/NN.ipynb (its Colab form, with /github/, is read
    too) and gives ("clone", the repository, REF). Else `env_repo` gives ("clone", env_repo, ""), else
    the first of `folders` (course folders present) ("folder", it, ""), else ("none", what to do, "").
    The first cell carries a copy of this source: it uses its arguments and the standard library only.
    """
    from urllib.parse import unquote, urlsplit

    if opened_from:
        address = urlsplit(unquote(opened_from).split("fileId=", 1)[-1])
        path = address.path
        if address.netloc == "colab.research.google.com" and path.startswith("/github/"):
            path = path[len("/github"):]
        parts = path.strip("/").split("/", 3)               # OWNER, REPO, "blob", REF/notebooks/NN.ipynb
        on_github = address.netloc in ("github.com", "colab.research.google.com")
        if on_github and len(parts) == 4 and parts[2] == "blob" and "/notebooks/" in f"/{parts[3]}":
            ref = f"/{parts[3]}".rpartition("/notebooks/")[0].strip("/")
            if ref:
                return "clone", f"https://github.com/{parts[0]}/{parts[1]}.git", ref
    if env_repo:
        return "clone", env_repo, ""
    if folders:
        return "folder", folders[0], ""
    return ("none", "Could not find the course: open this notebook from the course's GitHub repository "
            "(File > Open notebook > GitHub), or set PAGEDKV_COURSE_REPO to its address, or put the "
            "course folder (the one holding pagedkv_lib/) in /content or in Drive.", "")


FIRST_CELL_TEMPLATE = """\
# @title Set up the course (Colab shows this cell folded) {{ display-mode: "form" }}
import sys


{course_source}


if "google.colab" in sys.modules:  # Colab: find the course, clone it if needed, install it
    import glob
    import json
    import os
    import subprocess
    import urllib.request

    class CourseSetupError(Exception):
        def _render_traceback_(self):  # a notebook shows this one line, not a traceback
            return [str(self)]

    def colab_opened_from():
        \"\"\"What Colab's Jupyter server says this notebook was opened from, or None.\"\"\"
        host = os.environ.get("COLAB_JUPYTER_IP", "")
        port = os.environ.get("KMP_TARGET_PORT", "9000")
        try:
            with urllib.request.urlopen(f"http://{{host}}:{{port}}/api/sessions", timeout=5) as answer:
                return json.load(answer)[0]["path"]
        except (OSError, ValueError, LookupError, TypeError):  # not said: the next source is tried
            return None

    folders = [os.path.dirname(os.path.normpath(found)) for root in {roots}
               for found in sorted(glob.glob(os.path.join(root, "*", "pagedkv_lib", "")))]
    how, where, ref = course_source(colab_opened_from(), os.environ.get("{env_repo}"), folders)
    if how == "none":
        raise CourseSetupError(where)
    home = where
    if how == "clone":
        home = os.environ.get("{env_dir}", "{default_dir}")
        if not os.path.isdir(home):
            if subprocess.run(["git", "clone", "-q", where, home], capture_output=True).returncode:
                raise CourseSetupError(f"Could not clone the course from {{where}}; check the address and "
                                       "the network.")
            checkout = ["git", "-C", home, "checkout", "-q", ref]
            if ref and subprocess.run(checkout, capture_output=True).returncode:
                raise CourseSetupError(f"Could not check out {{ref}} of {{where}} in {{home}}.")
    origin = f"{{where}} at {{ref}}" if ref else where
    print(f"The course: {{home}}, from {{origin}}")
    sys.path.insert(0, home)
    from pagedkv_lib.environment import install_course

    install_course(home)
from pagedkv_lib.environment import describe_environment

print(describe_environment())"""
FIRST_CELL = FIRST_CELL_TEMPLATE.format(course_source=inspect.getsource(course_source).rstrip(),
                                        roots=repr(FOLDER_ROOTS), env_repo=ENV_REPO, env_dir=ENV_DIR,
                                        default_dir=DEFAULT_DIR)


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
