"""The one progress helper: nesting, status text, switched off, threads."""

import io
import threading

from rich.console import Console

import cuset.progress as progress


def _capture(monkeypatch) -> io.StringIO:
    buf = io.StringIO()
    monkeypatch.setattr(progress, "console", Console(file=buf, force_terminal=False, width=120))
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
