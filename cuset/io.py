"""Writing files so that a reader never sees half of one.

Every whole-file write in cuset goes through here: the data is written to a
temporary file next to the target (unique per process and thread, so concurrent
writers of one path never share it) and renamed over the target, which is atomic
on POSIX file systems. A crash leaves the old file or the new one, never a mix.
(Append-only logs, whose readers drop a torn last line, are written where they
are kept: records.py of evaluate and generate.)
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Iterable


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
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
    lines = [json.dumps(row, ensure_ascii=False) + "\n" for row in rows]
    atomic_write_text(path, "".join(lines))
    return len(lines)
