"""docs/tools/perf_table.py: docs/performance.md is what the records in bench/results give, the
pages quote its rows as written, and the README quotes no stale row as current."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def table():
    spec = importlib.util.spec_from_file_location("perf_table", ROOT / "docs" / "tools" / "perf_table.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["perf_table"] = module          # dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules["perf_table"]


@pytest.fixture(scope="module")
def rows(table):
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: staleness is computed from the history")
    try:
        return {r.anchor: r for r in table.table_rows(ROOT)}
    except table.HistoryMissing as e:
        pytest.skip(f"shallow clone, staleness cannot be computed: {e}")


def test_the_committed_page_and_the_quoting_pages_agree_with_the_records(table, rows):
    assert table.check(ROOT) == []


def test_numbers_are_read_as_a_reader_reads_them(table):
    text = "1,975 tests in 12.5 min, 1.43x cold, 60/60 pass, 4096x1024 at 8744c0c, 4.6% of 7,125 MiB"
    assert table.numbers(text) == {"1975", "12.5", "1.43", "60", "4.6", "7125"}
    # a ratio written before its number is a number too (it once let a page keep a stale x1.024)
    assert table.numbers("x1.024 on average, x2.57 cached, 0x1F and 64x64 are not") == {"1.024", "2.57"}


def test_a_quoted_number_the_row_does_not_have_fails(table, rows):
    ok = "All of them pass ([60/60 pass](docs/performance.md#cpu_suite))."
    assert table.problems_in_page(ok, "page.md", rows, current_only=False) == []
    planted = "All of them pass ([61/60 pass](docs/performance.md#cpu_suite))."
    problems = table.problems_in_page(planted, "page.md", rows, current_only=False)
    assert len(problems) == 1 and "quotes 61, which the row #cpu_suite does not have" in problems[0]


def test_the_readme_may_not_quote_a_stale_row_as_current(table):
    # a row whose record names a path the tree lost (built here: the real rows' states change with each re-measure)
    rows = {"robust_suite": table.TableRow("robust_suite", "| 60/60 pass |", table.Freshness(
        "stale", "names `benchmarks/cuset-bench-cpu.jsonl`, no longer in the tree"))}
    planted = "every reference passes ([60/60](docs/performance.md#robust_suite))"
    problems = table.problems_in_page(planted, "README.md", rows, current_only=True)
    assert len(problems) == 1 and "quotes row #robust_suite as current, but it is stale" in problems[0]
    assert "benchmarks/cuset-bench-cpu.jsonl" in problems[0]
    # linking the row without a number is how a page points at a stale measurement
    assert table.problems_in_page("([measured](docs/performance.md#robust_suite))", "README.md", rows,
                                  current_only=True) == []
    # the same number from a current row is fine
    fresh = table.TableRow("x", "| 60/60 pass |", table.Freshness("current", "current"))
    assert table.problems_in_page("([60/60](docs/performance.md#x))", "README.md", {"x": fresh},
                                  current_only=True) == []


def test_unknown_rows_and_direct_links_to_records_fail(table, rows):
    text = "[12 s](performance.md#no_such_row); see [suite_time.json](../bench/results/suite_time.json)"
    problems = table.problems_in_page(text, "docs/x.md", rows, current_only=False)
    assert len(problems) == 2
    assert "no row has" in problems[0]
    assert "link its row, performance.md#suite_time" in problems[1]


def test_verdicts_are_the_records_own_words(table):
    results = {"pairs": [{"compile_judge": "g++", "verdict": "MISSED"}, {"compile_judge": "nvcc", "verdict": "ok"}],
               "verdict_wall_clock": "FAIL", "meets_target": True,
               "table_md": "| a |\n- lora cuset: speed 0.63x -> MISSES target\n"}
    assert table.verdicts(results) == ["g++: MISSED", "nvcc: ok", "wall clock: FAIL", "met",
                                       "lora cuset: speed 0.63x: MISSES target"]
    assert table.verdicts({"seconds": 3.0, "rows": [{"task": "a"}]}) == []


# -- staleness in a repository of our own ------------------------------------------------

def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def _commit(repo: Path, message: str, files: dict[str, str | None]) -> str:
    for name, text in files.items():
        path = repo / name
        if text is None:
            _git(repo, "rm", "-q", "-r", name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        _git(repo, "add", name)
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    return repo


def _record(commit: str, **results) -> dict:
    return {"script": "bench/speed.py", "commit": commit, "argv": [], "results": results}


def test_a_record_goes_stale_when_a_later_commit_touches_what_its_script_measures(table, repo):
    first = _commit(repo, "Add", {"bench/speed.py": 'MEASURES = ("pkg",)\n', "pkg/a.py": "x = 1\n",
                                  "other/b.py": "y = 1\n", "suites/old.jsonl": "{}\n"})
    record = _record(first, suite="suites/old.jsonl")
    assert table.freshness(repo, record) == table.Freshness("current", "current")
    _commit(repo, "Touch other", {"other/b.py": "y = 2\n"})
    assert table.freshness(repo, record).state == "current"
    _commit(repo, "Document pkg", {"pkg/README.md": "what pkg does\n", "pkg/sub/NOTES.md": "why\n"})
    assert table.freshness(repo, record).state == "current"      # prose beside the code measures nothing
    touching = _commit(repo, "Touch pkg", {"pkg/a.py": "x = 2\n"})
    _commit(repo, "Touch pkg again", {"pkg/a.py": "x = 3\n"})
    # the note names the first commit since the record's: it stays the same as commits pile up
    assert table.freshness(repo, record) == table.Freshness("stale", f"stale since {touching[:7]} (`pkg`)")
    # a record measured now is current again
    assert table.freshness(repo, _record(_git(repo, "rev-parse", "HEAD"))).state == "current"


def test_a_record_naming_a_path_the_tree_lost_is_flagged(table, repo):
    first = _commit(repo, "Add", {"bench/speed.py": 'MEASURES = ("pkg",)\n', "pkg/a.py": "x = 1\n",
                                  "benchmarks/suite.jsonl": "{}\n"})
    _commit(repo, "Move the suite", {"benchmarks/suite.jsonl": None, "suites/suite.jsonl": "{}\n"})
    got = table.freshness(repo, _record(first, suite="benchmarks/suite.jsonl", out="runs/not-in-git/x"))
    assert got == table.Freshness("stale", "names `benchmarks/suite.jsonl`, no longer in the tree")


def test_a_script_must_declare_existing_paths_it_measures(table, repo):
    first = _commit(repo, "Add", {"bench/speed.py": "import os\n", "pkg/a.py": "x = 1\n"})
    with pytest.raises(ValueError, match=r"bench/speed.py declares no MEASURES: add `MEASURES = "):
        table.freshness(repo, _record(first))
    _commit(repo, "Declare", {"bench/speed.py": 'MEASURES = ("pkg", "gone")\n'})
    with pytest.raises(ValueError, match=r"MEASURES names \['gone'\], not in the tree"):
        table.freshness(repo, _record(first))
    _commit(repo, "Declare what exists", {"bench/speed.py": 'MEASURES = ("pkg",)\n'})
    with pytest.raises(ValueError, match="names commit 0000000000, which is not in HEAD's history"):
        table.freshness(repo, _record("0" * 40))


def test_a_record_measured_on_a_branch_that_was_rebased_away_fails(table, repo):
    """The commit is still in this clone's objects, but a clean clone of main would not have it."""
    _commit(repo, "Add", {"bench/speed.py": 'MEASURES = ("pkg",)\n', "pkg/a.py": "x = 1\n"})
    main = _git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip()
    _git(repo, "checkout", "-q", "-b", "side")
    side = _commit(repo, "Measure on the side", {"pkg/a.py": "x = 2\n"})
    _git(repo, "checkout", "-q", main)
    assert _git(repo, "cat-file", "-t", side) == "commit"   # the object is here, off HEAD's history
    with pytest.raises(ValueError, match=r"not in HEAD's history \(measured on a branch that was rebased\?\)"):
        table.freshness(repo, _record(side))


def test_a_shallow_clone_says_what_to_fetch(table, repo, tmp_path):
    first = _commit(repo, "Add", {"bench/speed.py": 'MEASURES = ("pkg",)\n', "pkg/a.py": "x = 1\n"})
    _commit(repo, "Touch", {"pkg/a.py": "x = 2\n"})
    shallow = tmp_path / "shallow"
    _git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow))
    with pytest.raises(table.HistoryMissing, match="not in this shallow clone: `git fetch --unshallow`"):
        table.freshness(shallow, _record(first))


def test_every_bench_script_declares_what_it_measures(table):
    scripts = sorted((ROOT / "bench").glob("[!_]*.py"))
    assert scripts
    for script in scripts:
        assert table.measures(ROOT, str(script.relative_to(ROOT))) is not None


def test_every_record_has_a_row(table):
    """A record no row lists would be a number no page can link."""
    listed = {row.record for row in table.ROWS}
    records = {p.name for p in (ROOT / "bench" / "results").glob("*.json")}
    assert records <= listed, sorted(records - listed)
