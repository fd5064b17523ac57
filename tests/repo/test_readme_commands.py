"""Every command the README gives a learner works as written, in the shell the README says to use.

The learner's commands (`python practice/judge.py ...`) are read from the README's code blocks and run in a
scratch copy of the repository, in a shell where the course's .venv is active, after the learner solved
exercise 127 (and wrote the files the commands name). Each must exit as the README documents: 0 when every
graded file passes, 1 when one fails, 2 on a usage error. `make lab` is started for real: it must serve the
repository root, and a terminal opened in it must run the course's Python.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import torch
from scratch_repo import ROOT, learner_env, make_scratch_repo, sh

from pagedkv_lib.judge.registry import get
from pagedkv_lib.judge.stubs import make_stub

pytestmark = pytest.mark.slow          # the README's commands run in scratch copies of the repository

README = (ROOT / "README.md").read_text()
EX = get(127)


def learner_commands() -> list[str]:
    """The judge commands of the README's code blocks (indented 4 spaces), comments cut."""
    found = []
    for line in README.splitlines():
        m = re.match(r"^    (python practice/judge\.py .*?)(\s+#.*)?$", line)
        if m and m.group(1).strip() not in found:
            found.append(m.group(1).strip())
    return found


def expected_status(argv: list[str], passing: set[str], repo: Path) -> int:
    """What the README says the command exits with, given which files pass (globs expanded as bash would)."""
    if "--device" in argv and argv[argv.index("--device") + 1] == "cuda" and not torch.cuda.is_available():
        return 2
    if "--list" in argv or "--reset" in argv:
        return 0
    words = [w for i, w in enumerate(argv) if not w.startswith("-") and (i == 0 or argv[i - 1] not in
                                                                          ("--jobs", "--csv", "--seed"))]
    files = [str(p.relative_to(repo)) for w in words[1:] for p in sorted(repo.glob(w))] if words[1:] else \
        [f"practice/{get(int(words[0])).filename}"]
    return 0 if all(f in passing for f in files) else 1


def test_readme_gives_the_learner_commands_the_issue_names():
    commands = learner_commands()
    assert any(c == "python practice/judge.py 127" for c in commands)
    assert any("--list" in c for c in commands) and any("--json" in c for c in commands)
    assert any("--jobs" in c and "--csv" in c for c in commands) and any("--reset" in c for c in commands)


def test_readme_learner_commands_exit_as_documented(tmp_path):
    repo = make_scratch_repo(tmp_path / "repo")
    solution, stub = EX.solution_path.read_text(), make_stub(EX.solution_path.read_text(), EX.id)
    (repo / "practice" / EX.filename).write_text(solution)                  # the learner solved 127
    (repo / "submissions").mkdir()
    for name, text in (("my.py", solution), ("a.py", solution), ("b.py", stub),
                       ("submissions/alice.py", solution), ("submissions/bob.py", stub)):
        (repo / name).write_text(text)
    passing = {f"practice/{EX.filename}", "my.py", "a.py", "submissions/alice.py"}
    status_file = repo / "practice" / ".judge_status.json"
    for command in learner_commands():
        argv = shlex.split(command)[2:]
        before = status_file.read_bytes() if status_file.exists() else None
        done = sh(command, repo)
        want = expected_status(argv, passing, repo)
        assert done.returncode == want, f"{command}: exit {done.returncode}, README says {want}\n" \
                                        f"{done.stdout[-1500:]}\n{done.stderr[-1500:]}"
        if want == 2:
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr        # one clear line
            assert (status_file.read_bytes() if status_file.exists() else None) == before
        if "--json" in argv:
            assert json.loads(done.stdout)["verdict"] == "passed"
        if "--csv" in argv:
            rows = (repo / argv[argv.index("--csv") + 1]).read_text().splitlines()
            assert len(rows) == 3 and ",passed," in rows[1] and ",not implemented," in rows[2], rows
        if "--list" in argv:
            row = next(line for line in done.stdout.splitlines() if line.startswith(f"{EX.id} "))
            assert "passed" in row, row
        if "--reset" in argv:
            assert (repo / "practice" / EX.filename).read_text() == stub
            assert list((repo / "practice").glob(f"{EX.filename}.bak-*"))


def test_judge_list_does_not_import_torch():
    """--list prints names and statuses: it must answer at once, without torch's import time."""
    code = ("import sys; sys.argv = ['judge.py', '--list']; import runpy; "
            "runpy.run_path('practice/judge.py', run_name='not_main'); "
            "from pagedkv_lib.judge.cli import main; main(['--list']); "
            "assert 'torch' not in sys.modules, 'torch was imported'")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "121" in done.stdout and "132" in done.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _terminal_output(port: int, token: str, command: str, marker: str, timeout: float = 30) -> str:
    """Open a terminal in the running Lab, type `command`, return what it printed up to `marker`."""
    from tornado.ioloop import IOLoop
    from tornado.websocket import websocket_connect

    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/terminals?token={token}", method="POST",
                                 data=b"")
    name = json.loads(urllib.request.urlopen(req, timeout=10).read())["name"]

    async def talk() -> str:
        ws = await websocket_connect(f"ws://127.0.0.1:{port}/terminals/websocket/{name}?token={token}")
        ws.write_message(json.dumps(["stdin", command + "\r"]))
        seen, end = "", time.monotonic() + timeout                  # the echo of `command` lacks `marker`
        while marker not in seen and time.monotonic() < end:
            msg = await ws.read_message()
            if msg is None:
                break
            kind, *data = json.loads(msg)
            if kind == "stdout":
                seen += data[0]
        ws.close()
        return seen

    return IOLoop.current().run_sync(talk, timeout=timeout + 5)


def test_make_lab_serves_the_repository_root_and_its_terminal_runs_the_course_python():
    port, token = _free_port(), "readme-test"
    args = f"--no-browser --port={port} --ServerApp.token={token} --ServerApp.port_retries=0"
    lab = subprocess.Popen(["make", "lab", f"LAB_ARGS={args}"], cwd=ROOT, env=learner_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}/api/contents?token={token}"
        deadline = time.monotonic() + 90
        while True:
            try:
                listing = json.loads(urllib.request.urlopen(url, timeout=5).read())
                break
            except OSError:
                if lab.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"make lab did not serve: {lab.stdout.read().decode()[-2000:]}")
                time.sleep(0.5)
        names = {c["name"] for c in listing["content"]}
        assert {"practice", "notebooks", "README.md"} <= names, names
        out = _terminal_output(port, token, "python -c 'import sys; print(\"PRE\" + \"FIX=\" + sys.prefix)'",
                               "PREFIX=/")
        found = re.search(r"PREFIX=(/\S+)", out)
        assert found and Path(found.group(1)).resolve() == (ROOT / ".venv").resolve(), out[-500:]   # make's
    finally:
        os.killpg(lab.pid, signal.SIGTERM)
        try:
            lab.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(lab.pid, signal.SIGKILL)
