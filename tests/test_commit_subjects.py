""".ci/check_subjects: subjects of at most 72 characters from the commit that added the check on;
the history before it stays as it is."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECK = ROOT / ".ci" / "check_subjects"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                   capture_output=True)


def _commit(repo: Path, message: str, name: str = "f.txt") -> None:
    path = repo / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(path.read_text() + "x" if path.exists() else "x")
    _git(repo, "add", name)
    _git(repo, "commit", "-q", "-m", message)


def _check(repo: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(repo / ".ci" / "check_subjects"), str(repo)],
                          capture_output=True, text=True)


@pytest.fixture
def repo(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _commit(repo, "an old commit whose subject runs on and on, as the history before the rule did, " * 3)
    (repo / ".ci").mkdir()
    shutil.copy(CHECK, repo / ".ci" / "check_subjects")
    return repo


def test_before_the_check_is_committed_nothing_is_checked(repo):
    got = _check(repo)
    assert got.returncode == 0 and "not committed yet" in got.stdout


def test_the_history_before_the_check_stays_as_it_is(repo):
    _commit(repo, "Check commit subjects", ".ci/check_subjects")
    _commit(repo, "s" * 72 + "\n\n" + "a body line may be as long as it needs to be " * 5)
    got = _check(repo)
    assert got.returncode == 0, got.stderr
    assert "every subject since" in got.stdout


def test_a_long_subject_after_the_check_fails(repo):
    _commit(repo, "Check commit subjects", ".ci/check_subjects")
    _commit(repo, "Keep this one short")
    _commit(repo, "L" * 73)
    got = _check(repo)
    assert got.returncode == 1
    assert "subject of 73 characters (at most 72)" in got.stderr
    assert "1 commit subject(s) over 72 characters" in got.stderr


def test_the_commit_that_adds_the_check_is_checked_too(repo):
    _commit(repo, "Add the subject check, and say so in a subject far longer than the rule allows",
            ".ci/check_subjects")
    got = _check(repo)
    assert got.returncode == 1 and "subject of 78 characters" in got.stderr
