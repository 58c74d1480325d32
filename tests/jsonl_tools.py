"""The one JSONL writer of the tests: records as JSON lines, and str or bytes lines as given
(so a test can write a torn, invalid or non-UTF-8 line next to good ones)."""

from __future__ import annotations

import json
from pathlib import Path


def write_jsonl(path: Path, lines) -> Path:
    with open(path, "wb") as fh:
        for line in lines:
            if isinstance(line, bytes):
                fh.write(line + b"\n")
            elif isinstance(line, str):
                fh.write(line.encode() + b"\n")
            else:
                fh.write(json.dumps(line).encode() + b"\n")
    return path
