"""The first cell of every notebook: notebooks/build.py puts the same one in every notebook; in (a stand-in
for) Colab it takes the course from where the notebook was opened, else $PAGEDKV_COURSE_REPO, else a course
folder already there (`course_source`, covered here case by case), clones and installs it, or says in one
line what went wrong, and stops.

The Colab runs happen in a subprocess that plays a notebook: an IPython shell with a stand-in `google.colab`
module, the repository address pointed at a local git repository made from this working tree (directly, or
through git's `insteadOf` for a GitHub address), the clone going to a temporary folder, and pip installing
into a temporary prefix (never into this test's environment, which is checked before and after). Colab's
Jupyter server, which says where the notebook was opened from, is a stand-in HTTP server.
"""
from __future__ import annotations

import contextlib
import http.server
import importlib.util
import inspect
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from importlib import metadata
from pathlib import Path
from urllib.parse import quote

import nbformat
import pytest

from pagedkv_lib import environment
from pagedkv_lib.environment import course_source, describe_environment

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "notebooks" / "src").glob("*.py"))
_spec = importlib.util.spec_from_file_location("nb_build", ROOT / "notebooks" / "build.py")
nb_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nb_build)
FORK = "https://github.com/someone/pagedkv-fork"

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


def first_code_cell(nb: nbformat.NotebookNode) -> str:
    return next(c.source for c in nb.cells if c.cell_type == "code")


@pytest.mark.parametrize("src", SOURCES, ids=[s.stem for s in SOURCES])
def test_every_notebook_opens_with_the_same_first_cell(src):
    built = nb_build.source_notebook(src)
    stored = nbformat.read(ROOT / "notebooks" / f"{src.stem}.ipynb", as_version=4)
    assert built.cells[0].cell_type == "markdown" and built.cells[1].source == environment.FIRST_CELL
    assert first_code_cell(stored) == environment.FIRST_CELL, \
        f"{src.stem}.ipynb: its first code cell must be FIRST_CELL: python notebooks/build.py --first-cell"


def test_a_source_that_carries_its_own_bootstrap_is_refused(tmp_path):
    src = tmp_path / "99_copy.py"
    src.write_text(f"# %% [markdown]\n# # 99 · A copy\n\n# %%\n{environment.FIRST_CELL}\n")
    with pytest.raises(ValueError, match="delete it from the source"):
        nb_build.source_notebook(src)


def test_first_cell_only_replaces_the_cell_and_keeps_the_outputs(tmp_path, monkeypatch):
    """`build.py --first-cell` writes the new cell into a stored notebook without running it, and refuses a
    notebook whose other cells are stale (which the source test then still reports)."""
    src = tmp_path / "src" / "99_small.py"
    src.parent.mkdir()
    src.write_text("# %% [markdown]\n# # 99 · Small\n\n# %%\nprint(6 * 7)\n")
    monkeypatch.setattr(nb_build, "HERE", tmp_path)
    stored = nb_build.source_notebook(src)
    stored.cells[1].source = "print('an older first cell')"
    stored.cells[2].outputs = [nbformat.v4.new_output("stream", name="stdout", text="42\n")]
    nbformat.write(stored, tmp_path / "99_small.ipynb")
    assert nb_build.replace_first_cell(src)
    again = nbformat.read(tmp_path / "99_small.ipynb", as_version=4)
    assert [c.source for c in again.cells] == [c.source for c in nb_build.source_notebook(src).cells]
    assert again.cells[2].outputs[0]["text"] == "42\n"
    src.write_text(src.read_text().replace("6 * 7", "6 * 9"))
    assert not nb_build.replace_first_cell(src)


def test_the_first_cell_carries_course_source_and_the_environment_names():
    assert inspect.getsource(course_source).rstrip() in environment.FIRST_CELL, \
        "the first cell must run exactly the course_source that the tests below check"
    for constant in (environment.ENV_REPO, environment.ENV_DIR, environment.DEFAULT_DIR):
        assert f'"{constant}"' in environment.FIRST_CELL
    assert repr(environment.FOLDER_ROOTS) in environment.FIRST_CELL


# ---- course_source, case by case: what Colab said, the variable, the folders present ----------------------

SESSION = "fileId=" + quote(f"{FORK}/blob/feature/colab/notebooks/09_triton_primer.ipynb", safe="")


@pytest.mark.parametrize("opened_from, want", [
    (SESSION, ("clone", f"{FORK}.git", "feature/colab")),                 # Colab's session path, quoted
    (f"{FORK}/blob/main/notebooks/04_paged_decode.ipynb", ("clone", f"{FORK}.git", "main")),
    ("https://colab.research.google.com/github/someone/pagedkv-fork/blob/v1.2/notebooks/00_start_here.ipynb",
     ("clone", f"{FORK}.git", "v1.2")),                                   # the Colab address of it
    (f"{FORK}/blob/0123abc/notebooks/11_triton_paged_decode.ipynb", ("clone", f"{FORK}.git", "0123abc")),
])
def test_a_notebook_opened_from_github_clones_that_repository_at_that_ref(opened_from, want):
    assert course_source(opened_from, "https://example.org/mirror.git", ["/content/course"]) == want


@pytest.mark.parametrize("opened_from", [
    None, "", "fileId=1AbCdEfGhIjKlMnOp",                                 # Drive, an upload: no address
    f"{FORK}/blob/main/09_triton_primer.ipynb",                           # not under notebooks/
    f"{FORK}/tree/main/notebooks/09_triton_primer.ipynb",                 # not a file's address
    "https://gitlab.com/someone/pagedkv-fork/blob/main/notebooks/09.ipynb",
])
def test_else_the_environment_variable(opened_from):
    assert course_source(opened_from, "/content/my-mirror", ["/content/course"]) == \
        ("clone", "/content/my-mirror", "")


def test_else_a_course_folder_already_there():
    folders = ["/content/drive/MyDrive/pagedkv", "/content/other"]
    assert course_source("fileId=1AbC", None, folders) == ("folder", "/content/drive/MyDrive/pagedkv", "")
    assert course_source(None, "", folders)[0] == "folder"


def test_else_one_line_that_says_what_to_do():
    how, message, ref = course_source("fileId=1AbC", None, [])
    assert (how, ref) == ("none", "") and "\n" not in message
    for way in ("GitHub", environment.ENV_REPO, "/content", "Drive", "pagedkv_lib/"):
        assert way in message


# ---- the cell itself, played as Colab would ------------------------------------------------------------

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


def play_first_cell(tmp_path: Path, **env_vars: str) -> tuple[str, dict]:
    """Run the first cell as Colab would; returns (what the notebook shows, {"error", "lib"})."""
    cell = tmp_path / "first_cell.py"
    cell.write_text(environment.FIRST_CELL)
    inherited = ("PIP_", "GIT_CONFIG", "COLAB_", "KMP_TARGET_PORT", environment.ENV_REPO)
    env = {k: v for k, v in os.environ.items() if not k.startswith(inherited)}
    env.update({environment.ENV_DIR: str(tmp_path / "course"),
                "PIP_PREFIX": str(tmp_path / "prefix"),  # install there, not into this environment,
                "PIP_IGNORE_INSTALLED": "1",              # and never uninstall the course from it
                "PIP_NO_DEPS": "1", "PIP_NO_INDEX": "1",  # the dependencies are here already; no network
                "PIP_NO_BUILD_ISOLATION": "0",            # pip reads "0" as --no-build-isolation
                "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONPATH": "",
                "GIT_ALLOW_PROTOCOL": "file"})            # git reaches no network
    env.update(env_vars)
    done = subprocess.run([sys.executable, "-c", PLAY, str(cell)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    state = json.loads(done.stderr.strip().splitlines()[-1])
    return done.stdout, state


@contextlib.contextmanager
def colab_server(session_path: str):
    """A stand-in for Colab's Jupyter server: GET /api/sessions lists one session with `session_path`."""
    class Sessions(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps([{"name": "09_triton_primer.ipynb", "path": session_path}]).encode()
            self.send_response(200 if self.path == "/api/sessions" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Sessions)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield {"COLAB_JUPYTER_IP": "127.0.0.1", "KMP_TARGET_PORT": str(server.server_port)}
    finally:
        server.shutdown()
        server.server_close()


def assert_installed_from(tmp_path: Path, shown: str, state: dict) -> Path:
    course = tmp_path / "course"
    assert state["error"] is None, shown
    assert (course / ".git").is_dir() and (course / "pagedkv_lib" / "environment.py").is_file()
    assert Path(state["lib"]).resolve() == (course / "pagedkv_lib" / "__init__.py").resolve(), \
        "the notebook must import the course from its fresh clone"
    installed = list((tmp_path / "prefix").rglob("pagedkv_course-*.dist-info/direct_url.json"))
    assert len(installed) == 1 and json.loads(installed[0].read_text())["url"] == course.resolve().as_uri()
    return course


@pytest.mark.slow
def test_in_colab_the_first_cell_clones_and_installs_the_course(tmp_path):
    (tmp_path / "origin").mkdir()
    url = snapshot_repository(tmp_path / "origin")
    before = venv_state()
    shown, state = play_first_cell(tmp_path, **{environment.ENV_REPO: url})
    assert venv_state() == before, "the first cell installed into the test's own environment"
    course = assert_installed_from(tmp_path, shown, state)
    assert shown.strip().splitlines() == [f"The course: {course}, from {url}", describe_environment()]


@pytest.mark.slow
def test_in_colab_a_notebook_opened_from_github_gets_that_repository_at_that_ref(tmp_path):
    """Opened from a fork's branch: the cell clones the fork (here, through insteadOf, a local repository
    with that branch) and checks the branch out, though $PAGEDKV_COURSE_REPO names another repository."""
    origin = tmp_path / "origin"
    origin.mkdir()
    url = snapshot_repository(origin)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.com", "-C", str(origin)]
    subprocess.run([*git, "checkout", "-q", "-b", "feature/colab"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "on the branch"], check=True)
    branch = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout
    subprocess.run([*git, "checkout", "-q", "-"], check=True)
    github = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"url.{url}.insteadOf",
              "GIT_CONFIG_VALUE_0": f"{FORK}.git"}
    with colab_server(SESSION) as colab:
        shown, state = play_first_cell(tmp_path, **colab, **github,
                                       **{environment.ENV_REPO: (tmp_path / "elsewhere").as_uri()})
    course = assert_installed_from(tmp_path, shown, state)
    head = subprocess.run(["git", "-C", str(course), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert head.stdout == branch, "the cell must check out the ref the notebook was opened from"
    assert shown.strip().splitlines() == [f"The course: {course}, from {FORK}.git at feature/colab",
                                          describe_environment()]


def test_in_colab_where_the_notebook_was_opened_comes_before_the_variable(tmp_path):
    before = venv_state()
    with colab_server(SESSION) as colab:
        shown, state = play_first_cell(tmp_path, **colab, **{environment.ENV_REPO: (tmp_path / "x").as_uri()})
    assert venv_state() == before
    assert shown.strip().splitlines() == [f"Could not clone the course from {FORK}.git; check the address "
                                          "and the network."]
    assert state["error"] == "CourseSetupError"


def test_in_colab_an_unreachable_repository_is_one_clear_line_and_stops(tmp_path):
    url = (tmp_path / "no-such-repository").as_uri()
    before = venv_state()
    shown, state = play_first_cell(tmp_path, **{environment.ENV_REPO: url})
    assert venv_state() == before
    assert shown.strip().splitlines() == [f"Could not clone the course from {url}; check the address and the "
                                          "network."]
    assert state["error"] == "CourseSetupError", "the notebook must stop at the first cell"
    assert state["lib"] is None and not (tmp_path / "course").exists() and not (tmp_path / "prefix").exists()


@pytest.mark.skipif(any(Path(root).exists() for root in environment.FOLDER_ROOTS),
                    reason="this machine has a /content folder: a course folder could be found there")
def test_in_colab_without_any_source_the_cell_says_what_to_do_and_stops(tmp_path):
    shown, state = play_first_cell(tmp_path)
    assert shown.strip().splitlines() == [course_source(None, None, [])[1]]
    assert state["error"] == "CourseSetupError" and state["lib"] is None
