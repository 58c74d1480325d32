"""Per-stage JSONL files in the run directory that make a build resumable.

Each stage keeps one record per item, keyed by the item's key, appended (and
flushed, through cuset.io's `JsonlAppender`) as soon as the item is done: an
interrupted build loses at most the items in flight, and an item whose line was
torn by the interruption is redone (cuset.io's JSONL policy; a bad line anywhere
else is an error naming the file and line). A stage's records are reused only while its settings
fingerprint (kept in `state.json`) is unchanged; changing, say, the LLM model
or the validation backend starts that stage afresh.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from cuset.io import JsonlAppender, atomic_write_json, atomic_write_jsonl, iter_jsonl


class StageStore:
    def __init__(self, run_dir: str | os.PathLike, name: str, settings: dict):
        self.run_dir = Path(run_dir)
        self.name = name
        self.path = self.run_dir / f"{name}.jsonl"
        self.fingerprint = json.dumps(settings, sort_keys=True, default=str)
        self._lock = threading.Lock()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.records: dict[str, dict] = {}
        state = _read_state(self.run_dir)
        if state.get(name) == self.fingerprint:
            self.records = _read_records(self.path)
        elif self.path.exists():
            self.path.unlink()  # settings changed: nothing in it is valid any more
        state[name] = self.fingerprint
        _write_state(self.run_dir, state)
        self._out: JsonlAppender | None = None

    def get(self, key: str) -> dict | None:
        return self.records.get(key)

    def put(self, record: dict) -> None:
        """Record one finished item (must carry "key") durably."""
        with self._lock:
            self.records[record["key"]] = record
            if self._out is None:
                self._out = JsonlAppender(self.path)
            self._out.append(record)

    def close(self) -> None:
        """Stop appending (the file keeps every record); a later put opens it again."""
        with self._lock:
            if self._out is not None:
                self._out.close()
                self._out = None

    def finish(self, keys_in_order: list[str]) -> list[dict]:
        """Rewrite the file with exactly the records of `keys_in_order` (stale ones dropped,
        order made deterministic) and return them; keys without a record are left out."""
        self.close()
        with self._lock:
            rows = [self.records[k] for k in keys_in_order if k in self.records]
            atomic_write_jsonl(self.path, rows)
            return rows


def _read_records(path: Path) -> dict[str, dict]:
    return {rec.get("key", lineno): rec for lineno, rec in iter_jsonl(path)} if path.exists() else {}


def _read_state(run_dir: Path) -> dict:
    try:
        return json.loads((run_dir / "state.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def _write_state(run_dir: Path, state: dict) -> None:
    atomic_write_json(run_dir / "state.json", state, indent=1, sort_keys=True)
