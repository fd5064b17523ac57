"""practice/ is the learner's: nothing the course ships overwrites a file there without --force and a backup.

Each test works in a scratch copy of the repository (tests/scratch_repo.py), acting as a learner who
solved an exercise and then followed our own advice.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from scratch_repo import make_scratch_repo, sh

from pagedkv_lib.judge.registry import get
from pagedkv_lib.judge.stubs import make_stub

pytestmark = pytest.mark.slow          # scratch copies of the repository, the judge run as a learner runs it

EX = get(127)


@pytest.fixture(scope="module")
def solved(tmp_path_factory) -> Path:
    """A scratch repository where practice/127 holds the learner's (correct) work."""
    repo = make_scratch_repo(tmp_path_factory.mktemp("repo"))
    (repo / "practice" / EX.filename).write_text(EX.solution_path.read_text())
    return repo


def test_stub_writer_leaves_a_solved_file_untouched_and_says_so(solved):
    target = solved / "practice" / EX.filename
    before = target.read_text()
    done = sh("python -m pagedkv_lib.judge.stubs", solved)
    assert done.returncode == 0, done.stderr
    assert target.read_text() == before
    assert f"kept {target.relative_to(solved)}" in done.stdout or f"kept {target}" in done.stdout
    assert "--force" in done.stdout
    assert not list(target.parent.glob(f"{EX.filename}.bak-*"))


def test_stub_writer_with_force_backs_the_file_up_first(tmp_path):
    repo = make_scratch_repo(tmp_path / "repo")
    target = repo / "practice" / EX.filename
    target.write_text("# my work\n" + EX.solution_path.read_text())
    done = sh(f"python -m pagedkv_lib.judge.stubs {EX.id} --force", repo)
    assert done.returncode == 0, done.stderr
    (backup,) = target.parent.glob(f"{EX.filename}.bak-*")
    assert backup.read_text().startswith("# my work") and str(backup.name) in done.stdout
    assert target.read_text() == make_stub(EX.solution_path.read_text(), EX.id)


def test_stub_writer_regenerates_an_untouched_stub_after_a_maintainer_edits_the_solution(tmp_path):
    repo = make_scratch_repo(tmp_path / "repo")
    solution = repo / "solutions" / EX.filename
    solution.write_text(solution.read_text().replace("class BlockPool:", "class BlockPool:  # edited", 1))
    assert sh("python -m pagedkv_lib.judge.stubs", repo).returncode == 0
    assert "# edited" in (repo / "practice" / EX.filename).read_text()
    drifted = ("from pagedkv_lib.judge.registry import get; from pagedkv_lib.judge.stubs import committed, "
               f"stub_of; ex = get({EX.id}); print(committed(ex.practice_path) != stub_of(ex))")
    assert sh(f'python -c "{drifted}"', repo).stdout.strip() == "True"   # not committed: the drift test fails


def test_judge_reset_restores_one_stub_with_a_backup_and_keeps_its_verdict(tmp_path):
    repo = make_scratch_repo(tmp_path / "repo")
    target = repo / "practice" / EX.filename
    target.write_text(EX.solution_path.read_text())
    assert sh(f"python practice/judge.py {EX.id}", repo).returncode == 0
    assert "passed (" in sh("python practice/judge.py --list", repo).stdout
    target.write_text("# half done\n")
    done = sh(f"python practice/judge.py --reset {EX.id}", repo)
    assert done.returncode == 0, done.stderr
    (backup,) = target.parent.glob(f"{EX.filename}.bak-*")
    assert backup.read_text() == "# half done\n" and backup.name in done.stdout
    assert "your verdict stays recorded: passed" in done.stdout         # earned: its reference stays open
    listed = next(line for line in sh("python practice/judge.py --list", repo).stdout.splitlines()
                  if line.lstrip().startswith(str(EX.id)))
    assert "passed (" in listed, listed
    status = sh("git status --porcelain practice/", repo).stdout
    assert ".bak-" not in status, status                     # git-ignored: the learner's, not the course's
    assert target.read_text() == make_stub(EX.solution_path.read_text(), EX.id)
    again = sh(f"python practice/judge.py --reset {EX.id}", repo)
    assert again.returncode == 0 and "already" in again.stdout
    assert len(list(target.parent.glob(f"{EX.filename}.bak-*"))) == 1


def test_the_scratch_repository_ships_stubs_whatever_the_learner_did(tmp_path):
    """The learner-path tests start from a fresh course (CI runs them again with every exercise solved in
    practice/, and a learner may run them with backups there): practice/ in the copy is the shipped stubs."""
    from pagedkv_lib.judge.registry import EXERCISES

    repo = make_scratch_repo(tmp_path / "repo")
    for ex in EXERCISES.values():
        assert (repo / "practice" / ex.filename).read_text() == make_stub(ex.solution_path.read_text(), ex.id)
    assert not list((repo / "practice").glob("*.bak-*"))
    assert not (repo / "practice" / ".judge_status.json").exists()
