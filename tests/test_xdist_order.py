"""`make test` hands the files with a slow test to its two workers first (tests/xdist_order.py
with the Makefile's xdist options), so a minute-long file never starts last and runs alone.
Checked on a small suite whose slow files hold the fewest tests, the files xdist >= 3.5
would otherwise send last."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = {"test_a.py": 6, "test_b.py": 5, "test_slow_c.py": 1, "test_slow_d.py": 1}   # name: tests


def makefile_xdist_options() -> list[str]:
    """The `make test` command's distribution options (-n, --dist, reordering)."""
    line = next(ln for ln in (ROOT / "Makefile").read_text().splitlines() if "-m pytest" in ln and "--dist" in ln)
    args = shlex.split(line.split("-m pytest", 1)[1])
    keep = []
    for i, arg in enumerate(args):
        if arg == "--dist":
            keep += args[i:i + 2]
        elif arg.endswith("loadscope-reorder"):
            keep.append(arg)
    return ["-n", "2", *keep]


def first_files_per_worker(suite: Path, options: list[str]) -> dict[str, list[str]]:
    """worker -> the files of the tests it ran, in order (-v lines `[gw0] ... PASSED file::test`)."""
    # xdist alone of the installed plugins: each of the three processes starts in a second
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "xdist.plugin", "-p", "no:cacheprovider", *options],
                          cwd=suite, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ran: dict[str, list[str]] = {}
    for worker, file in re.findall(r"^\[(gw\d)\][^\n]*PASSED (\S+?)::", proc.stdout, re.M):
        ran.setdefault(worker, []).append(file)
    assert sum(map(len, ran.values())) == sum(FILES.values()), proc.stdout[-3000:]
    return ran


def test_slow_files_start_first_on_each_worker_and_only_with_the_hook(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: long-running\n")
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\nfrom xdist_order import slow_files_first\n\n"
        "def pytest_collection_modifyitems(config, items):\n    slow_files_first(config, items)\n")
    for name, n in FILES.items():
        mark = "import pytest\n\npytestmark = pytest.mark.slow\n\n" if "slow" in name else ""
        (tmp_path / name).write_text(mark + "".join(f"def test_{i}():\n    pass\n\n" for i in range(n)))

    options = makefile_xdist_options()
    assert "--no-loadscope-reorder" in options and options[options.index("--dist") + 1] == "loadfile"
    ran = first_files_per_worker(tmp_path, options)
    assert sorted(files[0] for files in ran.values()) == ["test_slow_c.py", "test_slow_d.py"], ran

    # without the hook, xdist's own order (collection, then fewest tests last) sends them last
    (tmp_path / "conftest.py").write_text("")
    ran = first_files_per_worker(tmp_path, options)
    assert not {files[0] for files in ran.values()} & {"test_slow_c.py", "test_slow_d.py"}, ran
