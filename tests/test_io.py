"""Atomic whole-file writes: the old file or the new one, never a mix, no temp files left."""

import json
import threading

import pytest

from cuset.io import atomic_write_json, atomic_write_jsonl, atomic_write_text


class Opaque:
    """Not JSON-serialisable: written through str() (default=str)."""

    def __str__(self):
        return "P"


def test_writes_create_parents_and_leave_no_temporary_files(tmp_path):
    target = tmp_path / "a" / "b" / "rows.jsonl"
    assert atomic_write_jsonl(target, [{"x": 1}, {"y": "é"}]) == 2
    assert target.read_text(encoding="utf-8") == '{"x": 1}\n{"y": "é"}\n'
    atomic_write_json(tmp_path / "s.json", {"b": 1, "a": Opaque()}, indent=1, sort_keys=True)
    assert json.loads((tmp_path / "s.json").read_text()) == {"a": "P", "b": 1}
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["rows.jsonl", "s.json"]


def test_a_failed_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "rows.jsonl"
    atomic_write_jsonl(target, [{"old": True}])

    def rows():
        yield {"new": 1}
        raise RuntimeError("the producer failed half way")

    with pytest.raises(RuntimeError):
        atomic_write_jsonl(target, rows())
    assert target.read_text() == '{"old": true}\n'
    with pytest.raises(TypeError):
        atomic_write_text(target, b"not text")  # type: ignore[arg-type]
    assert target.read_text() == '{"old": true}\n' and [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]


def test_concurrent_writers_of_one_path_never_interleave(tmp_path):
    target = tmp_path / "state.json"
    payloads = [{"writer": i, "blob": str(i) * 20000} for i in range(8)]

    def write(p):
        for _ in range(20):
            atomic_write_json(target, p)

    threads = [threading.Thread(target=write, args=(p,)) for p in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert json.loads(target.read_text()) in payloads
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]
