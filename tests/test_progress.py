"""The one progress helper: nesting, status text, switched off, threads."""

import io
import threading

from rich.console import Console

import cuset.progress as progress


def _capture(monkeypatch, terminal: bool = True) -> io.StringIO:
    buf = io.StringIO()
    monkeypatch.setattr(progress, "console", Console(file=buf, force_terminal=terminal, width=120))
    return buf


def test_nested_bars_share_one_display_and_the_outer_one_stays(monkeypatch):
    buf = _capture(monkeypatch)
    with progress.progress_bar("outer", 2) as outer:
        assert progress._open == 1
        with progress.progress_bar("inner", 3) as inner:
            assert progress._open == 2 and len(progress._live.tasks) == 2
            for _ in range(3):
                inner.advance(status="passed 1")
        assert progress._open == 1 and [t.description for t in progress._live.tasks] == ["outer"]
        outer.advance(2, status="done")
    assert progress._live is None and progress._open == 0
    text = buf.getvalue()
    assert "outer" in text and "2/2" in text and "done" in text


def test_switched_off_prints_nothing(monkeypatch):
    buf = _capture(monkeypatch)
    with progress.progress_bar("quiet", 5, enabled=False) as bar:
        bar.advance()
        bar(2)
        bar.update(completed=3, status="x")
    assert list(progress.track(range(3), "quiet", enabled=False)) == [0, 1, 2]
    assert buf.getvalue() == "" and progress._live is None


def test_threads_advance_one_bar_exactly(monkeypatch):
    _capture(monkeypatch)
    with progress.progress_bar("threads", 4000) as bar:
        workers = [threading.Thread(target=lambda: [bar.advance() for _ in range(1000)]) for _ in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert progress._live.tasks[0].completed == 4000


def test_a_bar_closed_by_an_error_leaves_no_display_behind(monkeypatch):
    _capture(monkeypatch)
    try:
        with progress.progress_bar("fails", 1):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert progress._live is None and progress._open == 0


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_off_a_terminal_a_bar_prints_lines_at_most_an_interval_apart(monkeypatch):
    """A log gets progress as lines (issue 63: 22 minutes of silence in a log): one when the bar opens,
    one on the first advance LINE_INTERVAL_S after the last line, one when it closes."""
    buf = _capture(monkeypatch, terminal=False)
    clock = FakeClock()
    monkeypatch.setattr(progress, "clock", clock)
    monkeypatch.setattr(progress, "LINE_INTERVAL_S", 30.0)
    with progress.progress_bar("pretrain base", 1400) as bar:
        assert progress._live is None  # no live display off a terminal
        clock.now += 10
        bar.advance(status="loss 5.1")      # 10 s after the opening line: nothing
        clock.now += 25
        bar.advance(status="loss 4.0")      # 35 s: a line
        clock.now += 5
        bar.update(completed=700)           # 5 s after it: nothing
        clock.now += 90
    lines = buf.getvalue().splitlines()
    assert lines == ["pretrain base: 0/1400 (0%), elapsed 0:00",
                     "pretrain base: 2/1400 (0%), elapsed 0:35, loss 4.0",
                     "pretrain base: 700/1400 (50%), elapsed 2:10, loss 4.0"]


def test_off_a_terminal_a_bar_that_does_not_advance_still_prints(monkeypatch):
    """One generation batch can take minutes: the bar's clock thread prints while nothing advances."""
    import time

    buf = _capture(monkeypatch, terminal=False)
    monkeypatch.setattr(progress, "LINE_INTERVAL_S", 0.05)
    with progress.progress_bar("generate", None):
        time.sleep(0.4)
    lines = buf.getvalue().splitlines()
    assert len(lines) >= 4 and all(line.startswith("generate: 0, elapsed 0:00") for line in lines)


def test_a_line_bar_switched_off_prints_nothing(monkeypatch):
    buf = _capture(monkeypatch, terminal=False)
    with progress.progress_bar("quiet", 5, enabled=False) as bar:
        bar.advance()
    assert buf.getvalue() == ""
