"""The data build's run store follows cuset.io's JSONL policy: the item whose line an
interruption tore is redone, a corrupt line before the end is an error naming file and line."""

import pytest

from cuset.curation.runstore import StageStore
from cuset.io import JsonlError


def test_a_torn_line_is_redone_and_a_corrupt_one_is_an_error(tmp_path):
    store = StageStore(tmp_path, "3_validation", {"cases": [0]})
    store.put({"key": "a", "status": "passed"})
    store.put({"key": "b", "status": "wrong"})
    store.close()
    with open(store.path, "a", encoding="utf-8") as fh:
        fh.write('{"key": "c", "sta')  # killed mid-write
    again = StageStore(tmp_path, "3_validation", {"cases": [0]})
    assert sorted(again.records) == ["a", "b"] and again.get("c") is None
    again.put({"key": "c", "status": "passed"})  # the appender cuts the torn tail first
    assert [r["key"] for r in again.finish(["a", "b", "c"])] == ["a", "b", "c"]
    store.path.write_text('{"key": "a"}\n{"key": oops}\n{"key": "c"}\n', encoding="utf-8")
    with pytest.raises(JsonlError, match=r"3_validation.jsonl:2: invalid JSON"):
        StageStore(tmp_path, "3_validation", {"cases": [0]})
