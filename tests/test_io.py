"""Atomic whole-file writes (the old file or the new one, never a mix, no temp files left) and the
one JSONL policy (torn tail dropped, any other bad line an error naming path:line) of readers and appenders."""

import json
import threading

import pytest

from cuset.errors import CusetError
from cuset.io import (
    JsonlAppender, JsonlError, atomic_write_json, atomic_write_jsonl, atomic_write_text, iter_jsonl, read_jsonl,
)


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


def test_jsonl_reader_drops_a_torn_tail_and_skips_blank_lines(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"a": 1}\n\n   \n[2]\n{"a": 3, "cut')
    assert list(iter_jsonl(path)) == [(1, {"a": 1}), (4, [2])]
    path.write_bytes(b'{"a": 1}\n{"a": 2}')  # a last line without its newline that parses is kept
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]
    path.write_bytes(b'{"a": 1}\n{"s": "\xc3')  # cut inside a multi-byte character
    assert read_jsonl(path) == [{"a": 1}]
    assert read_jsonl(tmp_path / "absent.jsonl") == []


def test_a_bad_line_before_the_end_names_path_and_line(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": oops}\n{"a": 3}\n')
    with pytest.raises(JsonlError) as e:
        read_jsonl(path)
    assert str(e.value).startswith(f"{path}:2: invalid JSON: Expecting value") and "fix or delete that line" in str(e.value)
    assert isinstance(e.value, CusetError) and isinstance(e.value, ValueError) and e.value.lineno == 2
    path.write_bytes(b'{"a": 1}\n{"a": oops}\n')  # a bad last line WITH its newline is not torn
    with pytest.raises(JsonlError, match=r"log.jsonl:2: invalid JSON"):
        read_jsonl(path)
    path.write_bytes(b'{"a": "\xff"}\n{"a": 2}\n')
    with pytest.raises(JsonlError, match=r"log.jsonl:1: invalid UTF-8 at byte 7"):
        read_jsonl(path)


def test_yielded_errors_let_a_reader_report_every_bad_line(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{not json\n{"a": 1}\n"' + b"x" * 50 + b'"\n\xff\n{"torn')
    got = [(n, v.kind if isinstance(v, JsonlError) else v) for n, v in iter_jsonl(path, errors="yield", max_line_bytes=40)]
    # a user's file was not written by an interrupted run of ours: its cut last line is reported too
    assert got == [(1, "json"), (2, {"a": 1}), (3, "oversized"), (4, "utf8"), (5, "json")]


def test_appender_from_two_threads_writes_whole_lines(tmp_path):
    path = tmp_path / "out" / "log.jsonl"
    with JsonlAppender(path) as out:
        def write(who):
            for i in range(300):
                out.append({"who": who, "i": i, "pad": "x" * 500})

        threads = [threading.Thread(target=write, args=(w,)) for w in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    rows = read_jsonl(path)
    assert len(rows) == 600 and path.read_bytes().endswith(b"\n")
    for who in "ab":
        assert [r["i"] for r in rows if r["who"] == who] == list(range(300))


def test_appender_after_a_torn_tail(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"i": 0}\n{"i": 1, "cu')
    with JsonlAppender(path) as out:
        out.append({"i": 1})
    assert path.read_bytes() == b'{"i": 0}\n{"i": 1}\n'
    path.write_bytes(b'{"i": 0}')  # a complete last line without its newline is kept, not cut
    with JsonlAppender(path) as out:
        out.append({"i": "é"})
    assert path.read_text(encoding="utf-8") == '{"i": 0}\n{"i": "é"}\n'
