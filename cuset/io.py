"""Reading and writing files so that a reader never sees half of one.

Whole files: every whole-file write in cuset goes through `atomic_write_text` (or
its JSON/JSONL forms): the data is written to a temporary file next to the target
(unique per process and thread, so concurrent writers of one path never share it)
and renamed over the target, which is atomic on POSIX file systems. A crash leaves
the old file or the new one, never a mix.

JSONL, one policy for every reader (`iter_jsonl`, `read_jsonl`) and appender
(`JsonlAppender`):

- blank lines are skipped;
- a final line that has no trailing newline and does not parse is the torn tail of
  an interrupted writer: a reader of cuset's own records drops it (logged at debug),
  so a resumed run redoes that one item; a reader of a user's file (`errors="yield"`)
  reports it like any other bad line, since no run of ours wrote it;
- any other line that does not parse (bad JSON or bad UTF-8) is a `JsonlError`
  naming `path:line`; readers that report every bad record of a user's file at
  once (task files, training records, curation sources) ask for such errors to be
  yielded in place (`errors="yield"`) instead of raised, and list them with their
  other problems.

Append-only logs (evaluation results, generations, the data build's stage files,
the training log) are written through `JsonlAppender`: it cuts a torn tail when it
opens, then appends one flushed line per record under a lock, so an interrupted run
loses at most the line being written and threads never interleave lines.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal

from cuset.errors import CusetError

log = logging.getLogger(__name__)


# Lone UTF-16 surrogates: a Python str can hold them (json.loads of "\\udc80", a file name
# decoded with surrogateescape) but UTF-8 cannot; one in a record written from untrusted
# text would make the writer raise and stop a whole run. They become U+FFFD.
_SURROGATES = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD, so it always encodes as UTF-8."""
    return _SURROGATES.sub("\ufffd", text)


def json_line(record: Any) -> str:
    """One JSONL line (newline included) that always encodes as UTF-8: control characters
    are escaped by JSON itself, lone surrogates replaced (see `encodable`)."""
    return encodable(json.dumps(record, ensure_ascii=False)) + "\n"


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    text = encodable(text)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # only there if the write or the rename failed


def atomic_write_json(path: str | os.PathLike, data: Any, *, indent: int | None = None,
                      sort_keys: bool = False) -> None:
    atomic_write_text(path, json.dumps(data, ensure_ascii=False, indent=indent, sort_keys=sort_keys, default=str))


def atomic_write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> int:
    """Write dicts as JSON lines; returns how many."""
    lines = [json_line(row) for row in rows]
    atomic_write_text(path, "".join(lines))
    return len(lines)


class JsonlError(CusetError, ValueError):
    """A line of a JSONL file that does not parse: `path:line: <detail>; fix or delete that line`.

    `kind` is "json" (not JSON), "utf8" (not UTF-8) or "oversized" (longer than the
    reader's `max_line_bytes`); `detail` is the message without the place and hint."""

    def __init__(self, path: str | os.PathLike, lineno: int, detail: str, kind: str = "json"):
        self.path, self.lineno, self.detail, self.kind = str(path), lineno, detail, kind
        super().__init__(f"{path}:{lineno}: {detail}; fix or delete that line")


def iter_jsonl(path: str | os.PathLike, *, errors: Literal["raise", "yield"] = "raise",
               max_line_bytes: int | None = None) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for each non-blank line of a JSONL file (see the module
    docstring for the policy). errors="yield" yields (line number, JsonlError) for a bad
    line and reads on; a line over `max_line_bytes` is such an error without being parsed.
    A path ending in `.gz` is read through gzip (committed generations are stored compressed,
    see `atomic_write_jsonl_gz`)."""
    path = Path(path)
    with _open_binary(path) as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            if max_line_bytes is not None and len(raw) > max_line_bytes:
                error = JsonlError(path, lineno, f"line of {len(raw)} bytes > {max_line_bytes}", "oversized")
            else:
                try:
                    yield lineno, json.loads(raw.decode("utf-8"))
                    continue
                except UnicodeDecodeError as e:
                    error = JsonlError(path, lineno, f"invalid UTF-8 at byte {e.start}", "utf8")
                except json.JSONDecodeError as e:
                    error = JsonlError(path, lineno, f"invalid JSON: {e.msg} (column {e.colno})")
                if errors == "raise" and not raw.endswith(b"\n"):  # only the last line can lack its newline
                    log.debug("%s:%d: dropped the torn last line of an interrupted write (%s)", path, lineno, error.detail)
                    return
            if errors == "raise":
                raise error
            yield lineno, error


def _open_binary(path: Path):
    if path.suffix == ".gz":
        import gzip

        return gzip.open(path, "rb")
    return open(path, "rb")


def atomic_write_jsonl_gz(path: str | os.PathLike, rows: Iterable[Any]) -> int:
    """Dicts as gzip-compressed JSON lines, written atomically; returns how many. The gzip header
    holds no time stamp or file name, so the same rows give the same bytes (a committed file
    changes only when its records do)."""
    import gzip

    lines = [json_line(row) for row in rows]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as fh:
            fh.write("".join(lines).encode("utf-8"))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return len(lines)


def read_jsonl(path: str | os.PathLike) -> list[Any]:
    """Every value of a JSONL file ([] if there is no file); a bad line raises JsonlError."""
    path = Path(path)
    return [value for _, value in iter_jsonl(path)] if path.exists() else []


def drop_torn_tail(path: str | os.PathLike) -> None:
    """Make a JSONL file end in a newline before appending to it: a final line without its
    newline that does not parse (left by a killed writer) is cut; one that parses (a file
    written without a final newline) is kept and given its newline."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return
        fh.seek(0)
        data = fh.read()
        start = data.rfind(b"\n") + 1
        try:
            json.loads(data[start:].decode("utf-8"))
        except ValueError:  # JSONDecodeError and UnicodeDecodeError alike
            log.debug("%s: cut the torn last line of an interrupted write", path)
            fh.truncate(start)
        else:
            fh.write(b"\n")


class JsonlAppender:
    """Appends one flushed JSON line per record to a JSONL file; safe to share between threads.

    Opening creates the parent directory and cuts a torn tail left by an interrupted
    writer (the readers drop it anyway; appending after it would glue two records)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        drop_torn_tail(self.path)
        self._fh = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()

    def append(self, record: Any) -> None:
        line = json_line(record)
        with self._lock:
            self._fh.write(line)
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            self._fh.close()

    def __enter__(self) -> "JsonlAppender":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
