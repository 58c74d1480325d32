import json

import pytest

from cuset.generate.records import GenerationRecord, append_generations, load_generations, save_generations


def rec(task_id=1, sample=0, code="int main(){}"):
    return GenerationRecord(task_id, "Vector_Add", sample, "tiny", 1, "```cpp\nint main(){}\n```", code, 12, "stop", 0.5)


def test_round_trip_and_field_names(tmp_path):
    path = tmp_path / "g.jsonl"
    save_generations(path, [rec(), rec(sample=1, code=None)])
    line = json.loads(path.read_text().splitlines()[0])
    assert set(line) == {"task_id", "task_name", "sample", "model", "level", "response", "code", "n_tokens",
                         "finish_reason", "seconds", "reasoning", "reasoning_tokens"}
    older = {k: v for k, v in line.items() if k not in ("reasoning", "reasoning_tokens")}  # files of earlier versions
    (tmp_path / "old.jsonl").write_text(json.dumps(older) + "\n")
    (loaded,) = load_generations(tmp_path / "old.jsonl")
    assert loaded.reasoning is None and loaded.reasoning_tokens is None
    assert load_generations(path) == [rec(), rec(sample=1, code=None)]


def test_append_repairs_torn_last_line(tmp_path):
    path = tmp_path / "g.jsonl"
    save_generations(path, [rec()])
    with open(path, "a") as fh:
        fh.write('{"task_id": 1, "task_na')          # a writer killed mid-line
    assert load_generations(path) == [rec()]         # ignored when reading
    append_generations(path, [rec(sample=1)])
    assert load_generations(path) == [rec(), rec(sample=1)]


def test_bad_line_names_file_line_and_fields(tmp_path):
    path = tmp_path / "g.jsonl"
    path.write_text(json.dumps(rec().to_json()) + "\n" + json.dumps({"task_id": 1, "sample": 0}) + "\n")
    with pytest.raises(ValueError, match=r"g.jsonl:2: missing field\(s\) task_name"):
        load_generations(path)
    path.write_text("not json\n" + json.dumps(rec().to_json()) + "\n")
    with pytest.raises(ValueError, match="g.jsonl:1: invalid JSON"):
        load_generations(path)


def test_imported_answers_may_leave_out_generation_facts(tmp_path):
    """Issue 38: answers produced outside cuset carry no level, token count, finish reason or time."""
    path = tmp_path / "imported.jsonl"
    path.write_text(json.dumps({"task_id": "kb_relu", "task_name": "ReLU", "sample": 0, "model": "public-release",
                                "response": "", "code": "class ModelNew: ..."}) + "\n")
    (loaded,) = load_generations(path)
    assert (loaded.level, loaded.n_tokens, loaded.finish_reason, loaded.seconds) == (None, None, None, 0.0)
    assert loaded.code == "class ModelNew: ..."
    path.write_text(json.dumps({"task_id": "kb_relu", "sample": 0, "model": "m", "code": "x"}) + "\n")
    with pytest.raises(ValueError, match=r"imported.jsonl:1: missing field\(s\) task_name, response"):
        load_generations(path)
