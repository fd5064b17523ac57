"""The first cell of every notebook: identical everywhere, and in (a stand-in for) Colab it clones the course
and installs it, or says in one line that it could not reach the repository, and stops.

The Colab runs happen in a subprocess that plays a notebook: an IPython shell with a stand-in `google.colab`
module, the repository address pointed at a local git repository made from this working tree, the clone going
to a temporary folder, and pip installing into a temporary prefix (never into this test's environment, which
is checked before and after).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import jupytext
import pytest

from pagedkv_lib import environment
from pagedkv_lib.environment import REPO_URL, describe_environment

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "notebooks" / "src").glob("*.py"))
# notebooks whose owners adopt environment.FIRST_CELL when their branches merge; strict: this list must shrink
ADOPTED_AT_MERGE: set[str] = set()

# what the notebook-playing subprocess runs: a stand-in google.colab, then the cell in an IPython shell
PLAY = textwrap.dedent("""
    import json, sys, types
    sys.modules["google.colab"] = types.ModuleType("google.colab")
    from IPython.core.interactiveshell import InteractiveShell
    result = InteractiveShell.instance().run_cell(open(sys.argv[1]).read())
    error = result.error_in_exec
    lib = sys.modules.get("pagedkv_lib")
    print(json.dumps({"error": type(error).__name__ if error else None,
                      "lib": getattr(lib, "__file__", None)}), file=sys.stderr)
""")


def first_code_cell(src: Path) -> str:
    return next(c.source for c in jupytext.read(src, fmt="py:percent").cells if c.cell_type == "code")


@pytest.mark.parametrize("src", SOURCES, ids=[s.stem for s in SOURCES])
def test_every_notebook_opens_with_the_same_first_cell(src, request):
    if src.stem in ADOPTED_AT_MERGE:
        request.applymarker(pytest.mark.xfail(strict=True, reason="its owner adopts FIRST_CELL at merge"))
    assert first_code_cell(src) == environment.FIRST_CELL, \
        f"{src.name}: its first code cell must be pagedkv_lib.environment.FIRST_CELL, character for character"


def test_the_first_cell_names_the_repository_of_environment_py():
    for constant in (REPO_URL, environment.ENV_REPO, environment.ENV_DIR, environment.DEFAULT_DIR):
        assert f'"{constant}"' in environment.FIRST_CELL


def venv_state() -> tuple:
    """What an install into this test's environment would change: site-packages, the course's records."""
    site = Path(metadata.distribution("pagedkv-course").locate_file(""))
    urls = sorted(d.read_text("direct_url.json") or "" for d in metadata.distributions(name="pagedkv-course"))
    return sorted(p.name for p in site.iterdir()), urls


def snapshot_repository(dst: Path) -> str:
    """A git repository holding this working tree's files (tracked and new, not ignored); its file:// URL."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (dst / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dst / name)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.com"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run([*git, *args], cwd=dst, check=True, capture_output=True)
    return dst.resolve().as_uri()


def play_first_cell(tmp_path: Path, url: str) -> tuple[str, dict]:
    """Run the first cell as Colab would; returns (what the notebook shows, {"error", "lib"})."""
    cell = tmp_path / "first_cell.py"
    cell.write_text(environment.FIRST_CELL)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update({environment.ENV_REPO: url, environment.ENV_DIR: str(tmp_path / "course"),
                "PIP_PREFIX": str(tmp_path / "prefix"),  # install there, not into this environment,
                "PIP_IGNORE_INSTALLED": "1",              # and never uninstall the course from it
                "PIP_NO_DEPS": "1", "PIP_NO_INDEX": "1",  # the dependencies are here already; no network
                "PIP_NO_BUILD_ISOLATION": "0",            # pip reads "0" as --no-build-isolation
                "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONPATH": ""})
    done = subprocess.run([sys.executable, "-c", PLAY, str(cell)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    state = json.loads(done.stderr.strip().splitlines()[-1])
    return done.stdout, state


@pytest.mark.slow
def test_in_colab_the_first_cell_clones_and_installs_the_course(tmp_path):
    (tmp_path / "origin").mkdir()
    url = snapshot_repository(tmp_path / "origin")
    before = venv_state()
    shown, state = play_first_cell(tmp_path, url)
    assert venv_state() == before, "the first cell installed into the test's own environment"
    course = tmp_path / "course"
    assert state["error"] is None, shown
    assert (course / ".git").is_dir() and (course / "pagedkv_lib" / "environment.py").is_file()
    assert Path(state["lib"]).resolve() == (course / "pagedkv_lib" / "__init__.py").resolve(), \
        "the notebook must import the course from its fresh clone"
    installed = list((tmp_path / "prefix").rglob("pagedkv_course-*.dist-info/direct_url.json"))
    assert len(installed) == 1 and json.loads(installed[0].read_text())["url"] == course.resolve().as_uri()
    assert shown.strip().splitlines() == [describe_environment()]


def test_in_colab_an_unreachable_repository_is_one_clear_line_and_stops(tmp_path):
    url = (tmp_path / "no-such-repository").as_uri()
    before = venv_state()
    shown, state = play_first_cell(tmp_path, url)
    assert venv_state() == before
    assert shown.strip().splitlines() == [f"Could not clone the course from {url}; check the address and the "
                                          "network."]
    assert state["error"] == "CourseSetupError", "the notebook must stop at the first cell"
    assert state["lib"] is None and not (tmp_path / "course").exists() and not (tmp_path / "prefix").exists()
