"""The judge against hostile submissions: nothing outlives a verdict, nothing is written behind its back.

Every test works in a scratch copy of the repository (tests/scratch_repo.py), so a submission that got through
would damage only the copy. The layers, tested together and one at a time:
- the in-process guard (judge/guards.py): each hostile behaviour of plants/hostile.py is refused and the
  refusal is the verdict, in the sandbox and in a plain fork;
- the operating system (judge/isolation.py), with the guard off: bubblewrap keeps every file as it was and
  its PID namespace ends every process the submission started;
- without the sandbox, the parent's digest of what a verdict rests on (the status file, the judge's own
  files): a write that got through is tampering, the batch stops, exits 3, and records nothing.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import socket
import threading
import time
from pathlib import Path

import pytest
from plants.hostile import HOSTILE
from scratch_repo import make_scratch_repo, sh

from pagedkv_lib.judge import isolation

pytestmark = pytest.mark.slow          # hostile submissions in scratch copies of the repository
NEEDS_BWRAP = pytest.mark.skipif(isolation.bwrap_path() is None,
                                 reason="bwrap is missing or cannot sandbox here (.ci/run installs it)")
DRIVER = """
import json, sys
from pagedkv_lib.judge.grading import grade
from pagedkv_lib.judge.grading import Limits
limits = Limits(time_limit_s=1.0, import_limit_s=10.0, total_limit_s=3.0, max_restarts=0, guards=False)
results = grade(122, sys.argv[2:], limits=limits, jobs=2, isolation=sys.argv[1])
print(json.dumps([[r.label, r.verdict, r.isolation, r.tampered] for r in results]))
"""


CLI_DRIVER = """
import dataclasses, sys
import pagedkv_lib.judge.grading as grading
made = grading.Limits.for_exercise.__func__
grading.Limits.for_exercise = classmethod(lambda cls, ex, **o: dataclasses.replace(made(cls, ex, **o),
                                                                                   guards=False))
from pagedkv_lib.judge import cli
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def pristine_repo(tmp_path_factory) -> Path:
    return make_scratch_repo(tmp_path_factory.mktemp("repo"))


def fresh_repo(pristine: Path, tmp_path: Path) -> Path:
    """A copy of the scratch repository (copying is faster than building one)."""
    import shutil

    target = tmp_path / "repo"
    shutil.copytree(pristine, target, symlinks=True)
    return target


TEST_FILES = {"hostile", "driver.py", "cli_driver.py", "fine.py"}     # what the tests themselves write


def tree_digest(repo: Path) -> dict:
    return {str(p.relative_to(repo)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(repo.rglob("*")) if p.is_file() and ".git" not in p.parts
            and "__pycache__" not in p.parts and p.parts[len(repo.parts)] not in TEST_FILES}


def processes_with(marker: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmd and "pytest" not in cmd:
            found.append(f"{pid}: {cmd}")
    return found


class Listener:
    """A TCP server on 127.0.0.1 that remembers whether anything connected."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port, self.connections, self.running = self.sock.getsockname()[1], 0, True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while self.running:
            try:
                conn, _ = self.sock.accept()
                self.connections += 1
                conn.close()
            except OSError:
                pass

    def close(self):
        self.running = False
        self.thread.join(2)
        self.sock.close()


def write_hostile(repo: Path, names, marker: str, port: int) -> list[str]:
    folder = repo / "hostile"
    folder.mkdir(exist_ok=True)
    paths = []
    for name in names:
        path = folder / f"{name}.py"
        path.write_text(HOSTILE[name][0].replace("{marker}", marker).replace("{port}", str(port)))
        paths.append(f"hostile/{name}.py")
    return paths


def wait_for_no_process(marker: str, seconds: float = 3.0) -> list[str]:
    """The processes left with `marker` (after a moment for SIGKILL'd ones to vanish)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = processes_with(marker)
        if not left:
            return []
        time.sleep(0.1)
    return processes_with(marker)


@pytest.mark.parametrize("mode", [pytest.param("bwrap", marks=NEEDS_BWRAP), "fork"])
def test_guards_refuse_every_hostile_behaviour_and_the_refusal_is_the_verdict(mode, pristine_repo, tmp_path):
    """Through the command line an instructor uses, a batch of every hostile submission: each gets a
    non-passing verdict that says what was attempted, in time; no process is left, no file changed, nobody
    connected; the batch exits 1 (wrong answers), not 3 (nothing got through)."""
    repo = fresh_repo(pristine_repo, tmp_path)
    marker = f"97.{random.randrange(10**6, 10**7)}"
    listener = Listener()
    try:
        files = write_hostile(repo, HOSTILE, marker, listener.port)
        before = tree_digest(repo)
        unsandboxed = "" if mode == "bwrap" else " --no-sandbox"
        t0 = time.monotonic()
        done = sh(f"python practice/judge.py 122 {' '.join(files)} --jobs 2 --json --time-limit 1"
                  f"{unsandboxed}", repo, timeout=300)
        elapsed = time.monotonic() - t0
    finally:
        listener.close()
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    results = {Path(r["file"]).stem: r for r in json.loads(done.stdout)}
    for name, r in results.items():
        first = r["load_error"] or next(c for c in r["cases"] if c["verdict"] != "passed")
        assert r["verdict"] != "passed", name
        if name == "daemon_thread":                   # a thread is the child's own: it ends with the child
            assert r["verdict"] == "time limit", (name, first)
        else:
            assert r["verdict"] == "runtime error", (name, first)
            assert "refused by the judge" in first["message"], (name, first)
        assert r["isolation"].startswith("bwrap" if mode == "bwrap" else "forked"), r["isolation"]
    assert elapsed < 120, f"the batch took {elapsed:.0f} s"
    assert tree_digest(repo) == before
    assert not wait_for_no_process(marker)
    assert listener.connections == 0


def run_driver(repo: Path, mode: str, names, marker: str, **env) -> list:
    files = write_hostile(repo, names, marker, 9)
    (repo / "driver.py").write_text(DRIVER)
    done = sh(f"python driver.py {mode} {' '.join(files)}", repo, timeout=300, **env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


PROCESS_KINDS = [n for n, (_, target) in HOSTILE.items() if target == "process"]


@NEEDS_BWRAP
def test_without_guards_every_process_a_submission_starts_ends_with_its_verdict(pristine_repo, tmp_path):
    """The OS layer alone (guard off), in the sandbox: double fork, setsid, subprocess, a shell in the
    background, a fork loop; afterwards no process with the marker is alive (the PID namespace ended them)."""
    repo = fresh_repo(pristine_repo, tmp_path)
    marker = f"97.{random.randrange(10**6, 10**7)}"
    results = run_driver(repo, "bwrap", PROCESS_KINDS, marker)
    for label, verdict, how, _ in results:
        assert verdict != "passed", (label, verdict)
        assert how.startswith("bwrap"), how
    assert not wait_for_no_process(marker), "processes outlived the verdict"


@NEEDS_BWRAP
def test_without_guards_the_sandbox_keeps_every_file(pristine_repo, tmp_path):
    """The OS layer alone: inside bubblewrap the file system is read-only, so the writes fail."""
    repo = fresh_repo(pristine_repo, tmp_path)
    before = tree_digest(repo)
    names = [n for n, (_, target) in HOSTILE.items() if target == "file"]
    results = run_driver(repo, "bwrap", names, "0")
    assert all(not tampered for *_, tampered in results), results
    assert tree_digest(repo) == before


def test_without_sandbox_or_guards_a_status_write_is_tampering_and_stops_the_batch(pristine_repo, tmp_path):
    """Unsandboxed, guard off: a forked child rewrites the status file; the parent's digest sees it, the
    submission gets the verdict "tampering", the next one is not graded, and the CLI exits 3."""
    repo = fresh_repo(pristine_repo, tmp_path)
    writer = write_hostile(repo, ["writes_the_status_file"], "0", 9)[0]
    (repo / "fine.py").write_text((repo / "solutions" / "122_slot_mapping.py").read_text())
    (repo / "driver.py").write_text(DRIVER.replace("jobs=2", "jobs=1"))
    done = sh(f"python driver.py fork {writer} fine.py", repo, timeout=120)
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results[0][1] == "tampering" and "status file" in " ".join(results[0][3])
    assert results[1][1] == "skipped"
    (repo / "practice" / ".judge_status.json").unlink()
    (repo / "cli_driver.py").write_text(CLI_DRIVER)
    done = sh(f"python cli_driver.py 122 {writer} fine.py --jobs 1 --no-sandbox", repo, timeout=120)
    assert done.returncode == 3, done.stdout[-1500:] + done.stderr[-1500:]
    assert "TAMPERING" in done.stderr and "nothing was recorded" in done.stderr
    assert json.loads((repo / "practice" / ".judge_status.json").read_text())["121"]["file"] == "x"  # its own


ESCAPED = """
import json, os, sys, time
marker, judged, root = sys.argv[1], int(sys.argv[2]), sys.argv[3]
while os.path.exists(f"/proc/{judged}"):                  # until the graded child is gone: the verdict
    time.sleep(0.01)
time.sleep(0.3)
status = os.path.join(root, "practice", ".judge_status.json")
entry = {"verdict": "passed", "passed": 1, "total": 1, "file": "forged", "seed": 0, "when": "now"}
with open(status, "w") as f:
    json.dump({"121": entry}, f)
for name in os.listdir(os.path.join(root, "practice")):
    if name.startswith("121_"):
        with open(os.path.join(root, "practice", name), "a") as f:
            f.write("# owned")
with open(os.path.join(root, "README.md"), "a") as f:
    f.write("owned")
time.sleep(60)
"""
ESCAPES = ("import os, sys\n"
           "import pagedkv_lib\n"
           "_root = os.path.dirname(os.path.dirname(os.path.abspath(pagedkv_lib.__file__)))\n"
           "_judged = os.getpid()\n"
           "if os.fork() == 0:\n"
           "    os.setsid()\n"
           "    if os.fork() == 0:\n"
           "        _argv = [sys.executable, '-c', ESCAPED, '{marker}', str(_judged), _root]\n"
           "        os.execv(sys.executable, _argv)\n"
           "    os._exit(0)\n")


def test_without_sandbox_a_process_that_escapes_its_group_ends_before_the_verdict(pristine_repo, tmp_path):
    """Unsandboxed, guard off: the submission double-forks into a session of its own, and what it left waits
    for the verdict, then forges a 121 status entry and edits practice/121_*.py and README.md. The judge,
    a child subreaper, ends it before the verdict: nothing changed, nothing is left running."""
    repo = fresh_repo(pristine_repo, tmp_path)
    marker = f"98.{random.randrange(10**6, 10**7)}"
    folder = repo / "hostile"
    folder.mkdir()
    source = (repo / "solutions" / "122_slot_mapping.py").read_text()
    escapes = f"ESCAPED = {ESCAPED!r}\n" + ESCAPES.replace("{marker}", marker)
    (folder / "escapes.py").write_text(source + "\n" + escapes)       # after its `from __future__`
    before = tree_digest(repo)
    (repo / "cli_driver.py").write_text(CLI_DRIVER)
    done = sh("python cli_driver.py 122 hostile/escapes.py --no-sandbox", repo, timeout=120)
    time.sleep(1.0)                                        # what it left would have written by now
    left = wait_for_no_process(marker)
    for pid in (line.split(":")[0] for line in left):      # the old judge left it: end it here
        os.kill(int(pid), 9)
    assert done.returncode in (0, 3), done.stdout[-1500:] + done.stderr[-1500:]
    assert not left, "a process outlived the verdict"
    assert tree_digest(repo) == before, "files changed after the verdict"
    assert done.returncode == 0 and "122" in done.stdout


def test_status_entries_that_do_not_validate_show_as_unknown(tmp_path, monkeypatch):
    from pagedkv_lib.judge import cli, status

    path = tmp_path / "status.json"
    monkeypatch.setenv("PAGEDKV_JUDGE_STATUS", str(path))
    forged = {"verdict": "passed", "passed": 1, "total": 2, "file": "x", "seed": 0, "when": "now"}
    good = {"verdict": "wrong answer", "passed": 3, "total": 20, "file": "x", "seed": 0, "when": "now"}
    path.write_text(json.dumps({"121": forged, "122": good, "123": {"verdict": "passed"}, "124": "passed"}))
    assert status.describe(121).startswith("unknown") and status.describe(123).startswith("unknown")
    assert status.describe(124).startswith("unknown") and status.describe(122) == "wrong answer (3/20)"
    listing = cli.list_text()
    assert "passed (" not in listing
