"""The sandbox holds no answer and its limits are the kernel's (judge/harness.py, judge/isolation.py).

- The harness of every exercise: the import closure of what its child runs holds no closed module, except
  the ones served cut down, which then define and name none of the closed objects; the file tree lists no
  solutions/, no .git, no closed module. (That every exercise grades in this sandbox as in a fork is
  test_judge_exercises.py's test_every_exercise_grades_as_the_cli_grades_it_in_the_sandbox_and_in_a_fork.)
- The seccomp program, run on a small classic-BPF interpreter: memfd_create and the x32 range refused.
- The cheats of plants/cheats.py, graded in the sandbox with the in-process guard off (the OS layer alone):
  none passes, the grader's environment and files do not reach the report, every hog ends in a verdict in
  time, and nothing is left (no process, no file changed).
- A judge killed by SIGTERM or SIGKILL mid-grading leaves no scratch directory and no process, both modes.
- A course installed NON-editably (`pip install .`: the whole library in site-packages) shows no copy of the
  library in the sandbox: a file that imports the oracle from site-packages does not pass.
- The judge's own failures before the submission is imported (cases that cannot be sent or received, a
  harness module that does not import) are a judge error, exit status 4, nothing recorded; a submission that
  exits while it is imported is still a runtime error.
"""
from __future__ import annotations

import ast
import json
import os
import random
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from plants.cheats import CHEATS
from scratch_repo import learner_env, make_scratch_repo, sh
from test_judge_isolation import CLI_DRIVER, fresh_repo, tree_digest

from pagedkv_lib.judge import harness, isolation, registry

NEEDS_BWRAP = pytest.mark.skipif(isolation.bwrap_path() is None,
                                 reason="bwrap is missing or cannot sandbox here (.ci/run installs it)")


@pytest.mark.parametrize("exercise_id", sorted(registry.EXERCISES))
def test_no_closed_module_is_in_an_exercises_closure_but_cut_down(exercise_id):
    ex = registry.get(exercise_id)
    needed, closed = harness.needed_modules(ex), harness.closed_modules(ex)
    objects = harness.closed_objects(ex)
    assert not needed & harness.PARENT_MODULES
    assert not needed & set(ex.closed), sorted(needed & set(ex.closed))
    files = harness.harness_files(exercise_id)
    for rel, source, text in files:
        assert rel.startswith("pagedkv_lib/") and "solutions" not in source, rel
        name = rel[:-3].replace("/", ".").removesuffix(".__init__")
        if name in closed:                            # beside what the exercise may use: without the answer
            assert text is not None, name
            tree = ast.parse(text)
            names = {getattr(n, "id", None) for n in ast.walk(tree)}
            defined = {n.name for n in tree.body if hasattr(n, "name")}
            assert not (names | defined) & objects[name], (name, sorted((names | defined) & objects[name]))
        else:
            assert text is None, name
    assert {f"{harness.CASES}.ex{exercise_id}", f"{harness.PACKAGE}.judge.child"} <= needed


def test_parent_modules_are_the_case_modules_imported_only_inside_functions():
    """harness.PARENT_MODULES is written out: a walk over every case module's imports finds the same set (a
    new case module that only functions import is missing from the list; a listed one imported at a module's
    top level would be in a child's closure)."""
    at_top = set()
    in_functions = set()
    for path in sorted((harness.PACKAGE_DIR / "judge" / "cases").glob("*.py")):
        name = harness.CASES if path.stem == "__init__" else f"{harness.CASES}.{path.stem}"
        body, package = harness.parsed(name)
        for node in body:
            found = harness.imports_in([node], package)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                in_functions |= found
            else:
                at_top |= found
    derived = {n for n in in_functions - at_top if n.startswith(harness.CASES + ".")}
    assert harness.PARENT_MODULES == derived, sorted(harness.PARENT_MODULES ^ derived)


def test_the_tree_of_127_lists_no_answer_and_the_harness_it_needs():
    """`python -m pagedkv_lib.judge.isolation 127` prints the binds: the case module and the child are there,
    BlockPool's and append_slot's modules, solutions/ and .git are not, and the root ends read-only."""
    done = subprocess.run([sys.executable, "-m", "pagedkv_lib.judge.isolation", "127"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    text = done.stdout
    assert "/judge/lib/pagedkv_lib/judge/cases/ex127.py" in text and "judge/child.py" in text
    for absent in ("block_pool.py", "copy_on_write.py", "ex127_data.py", "solutions/", ".git"):
        assert absent not in text, absent
    assert not any(line.startswith("ro-bind / ") for line in lines)
    assert lines.index("remount-ro /") > max(i for i, line in enumerate(lines) if "bind" in line)
    assert "--tmpfs /scratch" in text and "PYTHONPATH=/judge/lib" in text


def run_bpf(program: bytes, nr: int, arch: int) -> int:
    """What the kernel's classic-BPF interpreter returns for seccomp_data (nr, arch): the 4 ops used."""
    code = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    data, acc, pc = struct.pack("=II", nr, arch), 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == 0x20:
            acc, pc = struct.unpack("=I", data[k:k + 4])[0], pc + 1
        elif op in (0x15, 0x35):
            hit = acc == k if op == 0x15 else acc >= k
            pc += 1 + (jt if hit else jf)
        else:
            assert op == 0x06, op
            return k


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_seccomp_program_refuses_memfd_create_and_nothing_else(machine, monkeypatch):
    monkeypatch.setattr(isolation.platform, "machine", lambda: machine)
    program = isolation.seccomp_filter()
    allow, eperm = 0x7FFF0000, 0x00050001
    native, compat = isolation._AUDIT_ARCH[machine]
    assert run_bpf(program, native[1], native[0]) == eperm
    assert run_bpf(program, compat[1], compat[0]) == eperm
    for nr in (0, 1, 9, 56, 57, 231):                 # read, write, mmap, clone, fork, exit_group (x86_64)
        assert run_bpf(program, nr, native[0]) == allow
    assert run_bpf(program, native[1], 0x1234) == allow
    if machine == "x86_64":
        assert run_bpf(program, 0x40000000 + 319, native[0]) == eperm          # memfd_create through x32
    monkeypatch.setattr(isolation.platform, "machine", lambda: "riscv64")
    assert isolation.seccomp_filter() is None


@pytest.fixture(scope="module")
def pristine_repo(tmp_path_factory) -> Path:
    return make_scratch_repo(tmp_path_factory.mktemp("repo"))


def write_cheats(repo: Path, names, secret_file: Path) -> list:
    folder = repo / "hostile"
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / f"{name}.py").write_text(CHEATS[name][0].replace("{secret_file}", str(secret_file)))
    return [f"hostile/{n}.py" for n in names]


@pytest.mark.slow
@NEEDS_BWRAP
def test_no_cheat_passes_leaks_or_outlives_its_verdict_in_the_sandbox(pristine_repo, tmp_path):
    """A batch of every cheat of exercise 122 beside a correct peer (the one a cheat reads), guard off,
    through the command line: no cheat passes; the secret in the judge's environment and in a file of its
    home appears nowhere in what the judge prints; every hog is a runtime error (a kernel limit, well before
    the generous time limit), the batch ends in time, no process is left and no file of the repository
    changed."""
    repo = fresh_repo(pristine_repo, tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    secret_file, secret_env = home / "secret.txt", f"env-secret-{random.randrange(10**9)}"
    secret_file.write_text(f"file-secret-{random.randrange(10**9)}")
    names = [n for n in CHEATS if n != "subclasses_find_the_originals"]
    files = write_cheats(repo, names, secret_file)
    (repo / "hostile" / "peer.py").write_text((repo / "solutions" / "122_slot_mapping.py").read_text())
    (repo / "cli_driver.py").write_text(CLI_DRIVER)
    before = tree_digest(repo)
    t0 = time.monotonic()
    done = sh(f"python cli_driver.py 122 {' '.join(files)} hostile/peer.py --jobs 2 --json --time-limit 30",
              repo, timeout=600, HOME=str(home), PAGEDKV_SECRET=secret_env)
    elapsed = time.monotonic() - t0
    out = done.stdout + done.stderr
    assert secret_env not in out and secret_file.read_text() not in out
    results = {Path(r["file"]).stem: r for r in json.loads(done.stdout)}
    assert results.pop("peer")["verdict"] == "passed"
    for name, r in results.items():
        kind = CHEATS[name][1]
        assert r["isolation"].startswith("bwrap"), r["isolation"]
        if kind == "leak":                            # a correct solution that printed what it could see
            assert r["verdict"] == "passed", name
            continue
        assert r["verdict"] != "passed", name
        if kind == "hog":
            first = r["load_error"] or next(c for c in r["cases"] if c["verdict"] != "passed")
            assert r["verdict"] == "runtime error", (name, first)
    assert elapsed < 300, f"the batch took {elapsed:.0f} s"
    assert tree_digest(repo) == before
    assert not alive_with(str(repo), seconds=5)


@pytest.mark.slow
@NEEDS_BWRAP
def test_the_originals_are_not_found_through_object_subclasses(pristine_repo, tmp_path):
    """Exercise 127 (classes): BlockPool through object.__subclasses__(), append_slot through gc."""
    repo = fresh_repo(pristine_repo, tmp_path)
    (repo / "cli_driver.py").write_text(CLI_DRIVER)
    files = write_cheats(repo, ["subclasses_find_the_originals"], tmp_path / "none")
    done = sh(f"python cli_driver.py 127 {files[0]} --json", repo, timeout=300)
    result = json.loads(done.stdout)                 # one file: one object
    assert result["verdict"] == "not implemented", result["load_error"] or result["cases"][0]


def alive_with(marker: str, seconds: float = 0.0) -> list:
    """The processes whose command line holds `marker` (the test's own excepted), after up to `seconds` for
    them to go (unlike test_judge_isolation's processes_with, those under pytest's temporary folder count)."""
    deadline = time.monotonic() + seconds
    while True:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmd and int(pid) != os.getpid():
                found.append(f"{pid}: {cmd[:200]}")
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.1)


SLEEPER = "import time\n\n\ndef slot_mapping_for(block_table, positions, block_size):\n" \
          "    open('inflight', 'w').write('x' * 4096)\n    while True:\n        time.sleep(0.01)\n"


@pytest.mark.slow
@pytest.mark.parametrize("mode", [pytest.param("bwrap", marks=NEEDS_BWRAP), "fork"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_judge_leaves_no_scratch_and_no_process(mode, sig, pristine_repo, tmp_path):
    """The judge killed while its child runs a case that wrote into its scratch: afterwards no process of
    the grading is alive and the temporary folder the judge used holds nothing of it."""
    repo = fresh_repo(pristine_repo, tmp_path)
    marker = f"sleeper_{random.randrange(10**6, 10**7)}"
    (repo / f"{marker}.py").write_text(SLEEPER)
    temp = tmp_path / "temp"
    temp.mkdir()
    flags = [] if mode == "bwrap" else ["--no-sandbox"]
    argv = [sys.executable, "practice/judge.py", "122", f"{marker}.py", "--time-limit", "60", *flags]
    log = open(tmp_path / "judge.log", "w")
    judge = subprocess.Popen(argv, cwd=repo, env=learner_env(TMPDIR=str(temp)), stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(alive_with(marker)) < 2:   # the judge and its child
            time.sleep(0.2)
        assert judge.poll() is None, (tmp_path / "judge.log").read_text()[-3000:]
        time.sleep(3.0)                               # torch imported, the submission in its endless case
        if mode == "fork":
            assert any(temp.glob("pagedkv-judge-*/inflight")), list(temp.iterdir())
        judge.send_signal(sig)
        judge.wait(30)
    finally:
        if judge.poll() is None:
            judge.kill()
            judge.wait()
        log.close()
    assert not alive_with(marker, seconds=10)
    deadline = time.monotonic() + 10
    while any(temp.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(temp.iterdir()), list(temp.iterdir())
    assert not [p for p in Path("/tmp").glob(f"pagedkv-judge-{judge.pid}-*")]
    assert os.path.exists(repo / f"{marker}.py")


def test_python_dirs_bind_python_and_a_venv_but_never_the_repository(tmp_path, monkeypatch):
    repo, base = tmp_path / "repo", tmp_path / "python"
    paths = [repo / ".venv" / "lib" / "site-packages", repo / "vendor" / "site-packages", base / "lib",
             tmp_path / "user" / "site-packages"]
    for path in paths:
        path.mkdir(parents=True)
    monkeypatch.setattr(sys, "base_prefix", str(base))
    monkeypatch.setattr(sys, "prefix", str(repo / ".venv"))
    monkeypatch.setattr(sys, "path", [str(repo), "", *map(str, paths)])
    assert isolation.python_dirs(str(repo)) == [str(base), str(repo / ".venv"), str(paths[3])]
    monkeypatch.setattr(sys, "prefix", str(tmp_path))                  # a venv that holds the repository
    assert str(tmp_path) not in isolation.python_dirs(str(repo))


@pytest.mark.parametrize("exc, words", [(OSError(27, "File too large"), "64 MiB"),
                                        (OSError(28, "No space left on device"), "scratch directory"),
                                        (OSError(11, "Resource temporarily unavailable"), "threads"),
                                        (RuntimeError("can't start new thread"), "threads")])
def test_a_kernel_limit_is_named_in_the_hint(exc, words):
    from pagedkv_lib.judge.outcome import Outcome

    assert words in isolation.with_limit_hint(Outcome.of_exception(exc), exc).hint
    assert isolation.with_limit_hint(Outcome.of_exception(ValueError("x")), ValueError("x")).hint == ""


@pytest.mark.parametrize("euid", [0, 1000])
def test_a_root_judge_has_no_user_namespace_and_a_user_judge_has_one(euid, monkeypatch):
    """As root the child must drop to a uid of its own (RLIMIT_NPROC binds only a non-root uid), so bwrap
    keeps only the capabilities that does; as a user, bwrap's user namespace counts the sandbox alone."""
    monkeypatch.setattr(isolation.os, "geteuid", lambda: euid)
    start = isolation._start()
    assert ("--unshare-user" in start) == (euid != 0)
    assert ("--cap-drop" in start) == (euid == 0)
    if euid == 0:
        kept = {start[i + 1] for i, arg in enumerate(start) if arg == "--cap-add"}
        assert kept == {"CAP_SETUID", "CAP_SETGID", "CAP_CHOWN"}
    assert isolation.sandbox_uid() != isolation.sandbox_uid()          # two children, two uids


def test_the_import_walk_skips_what_only_type_checkers_read():
    """A module's `if TYPE_CHECKING:` imports never run (core/sequence.py names the engine's
    SamplingParams that way): following them would put the engine, and the answers it holds, into the
    closure of exercises that only need a Sequence."""
    source = ("import typing\nfrom typing import TYPE_CHECKING\n"
              "if TYPE_CHECKING:\n    from pagedkv_lib.engine import sampler\n"
              "else:\n    from pagedkv_lib.core import sequence\n"
              "if typing.TYPE_CHECKING:\n    from pagedkv_lib.engine import llm_engine\n")
    found = harness.imports_in(ast.parse(source).body, "pagedkv_lib")
    assert "pagedkv_lib.core.sequence" in found
    assert not {"pagedkv_lib.engine.sampler", "pagedkv_lib.engine.llm_engine"} & found, found


class _OnlyTheJudgeKnows:
    """A case value whose class lives in this test module: the sandboxed child cannot unpickle it."""


def _break_cases(monkeypatch, exercise_id: int, value) -> None:
    module = registry.get(exercise_id).cases()
    build = module.build

    def broken(seed, device="cpu"):
        cases = build(seed, device)
        cases[0].args["extra"] = value
        return cases

    monkeypatch.setattr(module, "build", broken)


def _judge_error_report(capsys, monkeypatch, tmp_path) -> str:
    """practice/122's file graded through the command line (bwrap): exit status 4, nothing recorded."""
    from pagedkv_lib.judge import cli

    status = tmp_path / "status.json"
    monkeypatch.setenv("PAGEDKV_JUDGE_STATUS", str(status))
    assert cli.main(["122"]) == 4
    assert not status.exists()
    out = capsys.readouterr().out
    assert "JUDGE ERROR" in out and "not of your code" in out and "bwrap" in out
    assert "please report it with the command you ran and: python " in out and "torch 2." in out
    assert "hint: do not" not in out and "submission" not in out.split("hint:")[1].split("\n")[0]
    return out


@NEEDS_BWRAP
@pytest.mark.parametrize("value", [lambda: 0, _OnlyTheJudgeKnows()], ids=["unpicklable", "not_in_the_child"])
def test_cases_that_do_not_reach_the_child_are_a_judge_error(value, capsys, monkeypatch, tmp_path):
    _break_cases(monkeypatch, 122, value)
    out = _judge_error_report(capsys, monkeypatch, tmp_path)
    if callable(value):
        assert "sending the cases: PicklingError" in out or "sending the cases: AttributeError" in out
    else:
        assert "No module named 'test_judge_sandbox'" in out


@NEEDS_BWRAP
def test_a_harness_module_that_does_not_import_is_a_judge_error(capsys, monkeypatch, tmp_path):
    files = harness.harness_files

    def broken(exercise_id):
        return [(rel, src, "import pagedkv_lib.no_such_module\n" if rel.endswith("cases/ex122.py") else text)
                for rel, src, text in files(exercise_id)]

    monkeypatch.setattr(harness, "harness_files", broken)
    assert "no_such_module" in _judge_error_report(capsys, monkeypatch, tmp_path)


@NEEDS_BWRAP
def test_a_submission_that_exits_while_it_is_imported_is_still_a_runtime_error(tmp_path):
    from plants.adversarial import ADVERSARIAL

    from pagedkv_lib.judge.grading import grade

    files = []
    for name in ("sys_exit_at_import", "os_exit_at_import"):
        files.append(tmp_path / f"{name}.py")
        files[-1].write_text(ADVERSARIAL[name][1])
    results = grade(122, files, jobs=2, isolation="bwrap")
    assert [r.verdict for r in results] == ["runtime error", "runtime error"]


STEPS_AROUND_THE_HARNESS = """
import glob, importlib.util, os, sys

sys.path[:] = [p for p in sys.path if not p.startswith("/judge")]        # the harness gone from the path
for name in [n for n in sys.modules if n.startswith("pagedkv_lib")]:
    del sys.modules[name]
found = [p for p in sys.path if glob.glob(os.path.join(p, "pagedkv_lib", "core", "copy_on_write.py"))]
if found:                                                                # ... or the package, by its path
    init = os.path.join(found[0], "pagedkv_lib", "__init__.py")
    spec = importlib.util.spec_from_file_location("pagedkv_lib", init,
                                                  submodule_search_locations=[os.path.dirname(init)])
    sys.modules["pagedkv_lib"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules["pagedkv_lib"])
from pagedkv_lib.core.block_pool import BlockPool
from pagedkv_lib.core.copy_on_write import append_slot
"""


@pytest.mark.slow
@NEEDS_BWRAP
def test_a_course_installed_non_editably_shows_no_library_in_the_sandbox(tmp_path):
    """`pip install --no-deps --no-build-isolation .` from a copy of the course into a scratch venv (a .pth
    gives it this venv's packages: torch, setuptools, pip); the copy's judge, run with that venv's python,
    grades a file that imports BlockPool and append_slot from site-packages: it must not pass."""
    repo = make_scratch_repo(tmp_path / "repo")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    torch_site = next(p for p in sys.path if os.path.isdir(os.path.join(p, "torch")))
    Path(site, "course_deps.pth").write_text(torch_site + "\n")
    done = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "."],
                          cwd=repo, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert Path(site, "pagedkv_lib", "core", "block_pool.py").is_file()
    cheat = repo / "cheat.py"
    cheat.write_text(STEPS_AROUND_THE_HARNESS)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PAGEDKV_JUDGE_STATUS")}
    run = subprocess.run([python, "practice/judge.py", "127", "cheat.py", "--json"], cwd=repo, env=env,
                         capture_output=True, text=True, timeout=300)
    result = json.loads(run.stdout)
    assert result["isolation"].startswith("bwrap"), result["isolation"]
    assert result["verdict"] == "runtime error", result["load_error"] or result["cases"][0]
    assert "No module named 'pagedkv_lib" in json.dumps(result["load_error"]), result["load_error"]
