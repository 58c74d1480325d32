"""Progress bars: one rich implementation on one stderr console (shared with logging,
so log lines print above the bars instead of through them).

    with progress_bar("eval", total=len(todo), enabled=cfg.progress) as bar:
        bar.advance(status=f"passed {n}")

Bars nest: a bar opened while another is showing (a sweep cell's training inside the
sweep's bar) is one more line of the same live display, removed when it closes; the
outermost bar stays on screen when it finishes. `enabled=False` gives a bar that does
nothing, which is how every stage's `progress` key switches them off. Thread-safe.

When stderr is not a terminal (a log file, CI), a live display would print nothing until
it closes; each bar there prints a line instead (description, done/total, percent,
elapsed, status) when it opens, at least every LINE_INTERVAL_S seconds while it is open
(a clock thread prints even when nothing advanced: one generation batch can take minutes)
and when it closes.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Iterable, Iterator, TypeVar

from rich.console import Console

console = Console(stderr=True, soft_wrap=True)  # long error lines stay whole (grep-able)

T = TypeVar("T")

_lock = threading.Lock()
_live = None  # the rich Progress showing now
_open = 0     # bars open on it

LINE_INTERVAL_S = 30.0    # a non-terminal bar prints at least this often (issue 63: once a minute at most apart)
clock = time.monotonic    # what line bars measure elapsed time with (tests replace it)


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


class LineBar(Bar):
    """A bar for output that is not a terminal: progress as printed lines, at most `interval` seconds apart
    while a clock thread runs (`ticking`), and on every advance that comes `interval` after the last line."""

    def __init__(self, description: str, total: float | None, completed: float = 0, *,
                 interval: float | None = None, ticking: bool = True):
        self.description, self.total, self.completed, self.status = description, total, completed, ""
        self.interval = LINE_INTERVAL_S if interval is None else interval
        self._lock = threading.Lock()
        self._start = self._last = clock()
        self._stop = threading.Event()
        self._print()
        self._thread = threading.Thread(target=self._tick, daemon=True, name=f"progress {description}")
        if ticking:
            self._thread.start()

    def line(self) -> str:
        elapsed = int(clock() - self._start)
        done = f"{self.completed:g}" if self.total is None else f"{self.completed:g}/{self.total:g}"
        share = f" ({100 * self.completed / self.total:.0f}%)" if self.total else ""
        status = f", {self.status}" if self.status else ""
        return f"{self.description}: {done}{share}, elapsed {elapsed // 60}:{elapsed % 60:02d}{status}"

    def _print(self) -> None:
        self._last = clock()
        console.print(self.line(), markup=False, highlight=False)

    def _due(self) -> None:
        if clock() - self._last >= self.interval:
            self._print()

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                self._due()

    def advance(self, n: float = 1, status: str | None = None) -> None:
        with self._lock:
            self.completed += n
            self.status = self.status if status is None else status
            self._due()

    def update(self, completed: float | None = None, status: str | None = None) -> None:
        with self._lock:
            self.completed = self.completed if completed is None else completed
            self.status = self.status if status is None else status
            self._due()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        with self._lock:
            self._print()


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
    if not console.is_terminal:
        bar = LineBar(description, total, completed)
        try:
            yield bar
        finally:
            bar.close()
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
