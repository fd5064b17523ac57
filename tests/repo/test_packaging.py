"""pyproject.toml, environment.yml, the Makefile and .ci/run stay in step with each other and the README."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
tomllib = pytest.importorskip("tomllib") if sys.version_info >= (3, 11) else pytest.importorskip("tomli")


def pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_environment_yml_installs_this_package_with_dev_and_a_supported_python():
    env = (ROOT / "environment.yml").read_text()
    assert re.search(r"^\s*- -e \.\[dev\]\s*$", env, re.M), "environment.yml must pip-install `-e .[dev]`"
    py = re.search(r"^\s*- python=(\d+)\.(\d+)", env, re.M)
    low = re.search(r">=(\d+)\.(\d+)", pyproject()["project"]["requires-python"])
    assert py and tuple(map(int, py.groups())) >= tuple(map(int, low.groups()))


def test_dependencies_are_ranges_and_dev_has_the_test_tools():
    deps = pyproject()["project"]["dependencies"]
    assert not [d for d in deps if "==" in d.split(";")[0]], "runtime dependencies must be ranges, not pins"
    names = {re.split(r"[<>=;\[ ]", d)[0].lower() for d in deps}
    assert {"torch", "numpy", "matplotlib", "ipywidgets", "xxhash", "jupyterlab", "triton"} <= names
    extras = pyproject()["project"]["optional-dependencies"]
    dev = {re.split(r"[<>=;\[ ]", d)[0].lower() for d in extras["dev"]}
    assert {"pytest", "nbval", "nbclient", "ruff"} <= dev


def test_readme_commands_exist_in_the_makefile_and_ci_runs_the_test_command():
    readme = (ROOT / "README.md").read_text()
    make = (ROOT / "Makefile").read_text()
    for target in ("lab", "test"):
        assert f"make {target}" in readme and re.search(rf"^{target}:", make, re.M)
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_ruff_is_clean_over_the_repo():
    """The lint `make lint` runs, kept in the test command so a lint regression fails CI."""
    import shutil

    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (it comes with the [dev] extra)")
    done = subprocess.run([ruff, "check", "--quiet", "."], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-1000:]


def test_triton_code_keeps_real_annotations_for_the_oldest_declared_triton():
    """`from __future__ import annotations` turns `tl.constexpr` annotations into strings, which the
    interpreter of triton < 3.4 does not recognise (every kernel fails with "arange's arguments must be of
    type tl.constexpr"): no file of the repository with a Triton kernel (library, solutions, notebook
    sources, tests) may use it, nor may a stub generated from a Triton exercise's solution. (practice/ is
    the learner's and is not read.)"""
    from pagedkv_lib.judge.registry import EXERCISES
    from pagedkv_lib.judge.stubs import make_stub

    future = re.compile(r"^from __future__ import annotations", re.M)
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True).stdout
    texts = {name: (ROOT / name).read_text() for name in tracked.split()
             if not name.startswith("practice/") and (ROOT / name).is_file()}
    for ex in EXERCISES.values():
        if ex.triton:
            texts[f"stub of {ex.id}"] = make_stub(ex.solution_path.read_text(), ex.id)
    kernel = re.compile(r"^\s*@triton\.jit|:\s*tl\.constexpr", re.M)            # a decorated kernel
    kernels = {name for name, text in texts.items() if kernel.search(text)}
    assert len(kernels) >= 8, sorted(kernels)
    offenders = [name for name in sorted(kernels) if future.search(texts[name])]
    assert not offenders, offenders


def test_ci_proves_the_declared_floors():
    """.ci/run runs .ci/floors, which pins pyproject's own `>=` floors of triton and numpy."""
    assert "bash .ci/floors" in (ROOT / ".ci" / "run").read_text()
    floors = (ROOT / ".ci" / "floors").read_text()
    assert '"pyproject.toml"' in floors and "triton" in floors and "numpy" in floors


def test_every_test_that_reads_practice_runs_again_with_practice_solved():
    """.ci/run's last step runs `solved_tests` in a clone whose practice/ holds every solution: a test file
    outside them that names practice/ would never be run against a learner's solved files."""
    run = (ROOT / ".ci" / "run").read_text()
    scope = re.search(r"^solved_tests=\(([^)]*)\)$", run, re.M)
    assert scope, "no solved_tests=(...) line in .ci/run"
    dirs = [ROOT / d for d in scope.group(1).split()]
    assert all(d.is_dir() for d in dirs), dirs
    readers = [p for p in (ROOT / "tests").rglob("test_*.py") if "practice" in p.read_text()]
    assert readers, "no test reads practice/: the pattern is wrong"
    outside = [str(p.relative_to(ROOT)) for p in readers if not any(d in p.parents for d in dirs)]
    assert not outside, f"these tests read practice/ but .ci/run's solved pass leaves them out: {outside}"
