"""Progress bars: one rich implementation on one stderr console (shared with logging,
so log lines print above the bars instead of through them).

    with progress_bar("eval", total=len(todo), enabled=cfg.progress) as bar:
        bar.advance(status=f"passed {n}")

Bars nest: a bar opened while another is showing (a sweep cell's training inside the
sweep's bar) is one more line of the same live display, removed when it closes; the
outermost bar stays on screen when it finishes. `enabled=False` gives a bar that does
nothing, which is how every stage's `progress` key switches them off. Thread-safe.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterable, Iterator, TypeVar

from rich.console import Console

console = Console(stderr=True, soft_wrap=True)  # long error lines stay whole (grep-able)

T = TypeVar("T")

_lock = threading.Lock()
_live = None  # the rich Progress showing now
_open = 0     # bars open on it


class Bar:
    """One line of the live display."""

    def __init__(self, progress, task):
        self._progress, self._task = progress, task

    def advance(self, n: float = 1, status: str | None = None) -> None:
        fields = {} if status is None else {"status": status}
        self._progress.update(self._task, advance=n, **fields)

    def __call__(self, n: float = 1) -> None:
        self.advance(n)

    def update(self, completed: float | None = None, status: str | None = None) -> None:
        """Set the position (e.g. the trainer's global step) and/or the status text."""
        fields = {} if status is None else {"status": status}
        self._progress.update(self._task, completed=completed, **fields)


class _Off(Bar):
    def __init__(self):
        pass

    def advance(self, n: float = 1, status: str | None = None) -> None:
        pass

    def update(self, completed: float | None = None, status: str | None = None) -> None:
        pass


def _columns():
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    return (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(), TimeRemainingColumn())


@contextmanager
def progress_bar(description: str, total: float | None = None, *, enabled: bool = True,
                 completed: float = 0) -> Iterator[Bar]:
    """A bar of `total` steps (None: unknown), starting at `completed`; nothing when disabled."""
    global _live, _open
    if not enabled:
        yield _Off()
        return
    from rich.progress import Progress

    with _lock:
        if _live is None:
            _live = Progress(*_columns(), console=console, transient=False)
            _live.start()
        live = _live
        _open += 1
        task = live.add_task(description, total=total, completed=completed, status="")
    try:
        yield Bar(live, task)
    finally:
        with _lock:
            _open -= 1
            if _open == 0:
                live.stop()
                _live = None
            else:
                live.remove_task(task)


def track(items: Iterable[T], description: str, *, total: int | None = None, enabled: bool = True) -> Iterator[T]:
    """Iterate `items` with a bar."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with progress_bar(description, total, enabled=enabled) as bar:
        for item in items:
            yield item
            bar.advance()
