"""docs/tools/rebased_records.py on a constructed repository: a record whose commit was reworded
points at the twin with the same tree, and nothing else is changed or guessed."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("rebased_records", ROOT / "docs" / "tools" / "rebased_records.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                          cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    """Commit `measured`, reword it (same tree, new hash), and keep a commit whose tree HEAD's
    history lacks; bench/results holds one record for each case, as a bench would write it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "code.py").write_text("x = 1\n")
    git(repo, "add", "code.py")
    git(repo, "commit", "-q", "-m", "Measure a thing, with a subject that was too long to keep")
    measured = git(repo, "rev-parse", "HEAD")
    git(repo, "commit", "-q", "--amend", "-m", "Measure a thing")
    reworded = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "side")
    (repo / "code.py").write_text("x = 2\n")
    git(repo, "commit", "-q", "-am", "Change the code")
    changed = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    git(repo, "branch", "-q", "-D", "side")
    results = repo / "bench" / "results"
    results.mkdir(parents=True)
    records = {"rebased": {"bench": "a", "commit": measured, "value": 1.5},
               "current": {"bench": "b", "commit": reworded, "value": 2.0},
               "other_tree": {"bench": "c", "commit": changed, "value": 3.0},
               "unknown": {"bench": "d", "commit": "0" * 40, "value": 4.0}}
    for name, record in records.items():
        (results / f"{name}.json").write_text(json.dumps(record, indent=1))
    return repo, measured, reworded


def read(repo: Path, name: str) -> dict:
    return json.loads((repo / "bench" / "results" / f"{name}.json").read_text())


def test_a_reworded_commit_s_record_points_at_its_twin(tool, repo, capsys):
    repo, measured, reworded = repo
    before = {n: read(repo, n) for n in ("current", "other_tree", "unknown")}
    assert tool.main(["--root", str(repo)]) == 1          # two records must be re-measured
    record = read(repo, "rebased")
    assert record == {"bench": "a", "commit": reworded, "rebased_from": measured, "value": 1.5}
    assert list(record) == ["bench", "commit", "rebased_from", "value"]   # in place, order kept
    assert {n: read(repo, n) for n in before} == before  # nothing guessed for the others
    err = capsys.readouterr().err
    assert "other_tree.json: commit" in err and "unknown.json: commit 0000000000" in err
    assert err.count("re-measure it") == 2


def test_check_changes_nothing_and_fails_while_a_record_needs_it(tool, repo, capsys):
    repo, measured, _ = repo
    for name in ("other_tree", "unknown"):
        (repo / "bench" / "results" / f"{name}.json").unlink()
    assert tool.main(["--root", str(repo), "--check"]) == 1
    assert read(repo, "rebased")["commit"] == measured
    assert "records naming rewritten commits: bench/results/rebased.json" in capsys.readouterr().err
    assert tool.main(["--root", str(repo)]) == 0
    assert tool.main(["--root", str(repo), "--check"]) == 0   # fixed once, nothing left to do
