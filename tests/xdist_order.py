"""The order in which `make test` hands test files to its pytest-xdist workers (used by
tests/conftest.py's collection hook; tests/test_xdist_order.py runs it on a small suite)."""

from __future__ import annotations


def slow_files_first(config, items: list) -> None:
    """Under pytest-xdist, the files with a slow test go first: with `--dist loadfile
    --no-loadscope-reorder` each file is one unit handed out in this order, so the few
    minute-long files start at once on both workers and the many fast files fill in
    behind them, instead of one of them starting last and running alone. A serial run
    keeps the collection order (fast failures first under -x)."""
    if not hasattr(config, "workerinput"):
        return
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: each file's order stays
