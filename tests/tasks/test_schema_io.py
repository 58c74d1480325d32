import json

import pytest

from cuset.tasks import Task, TaskValidationError, load_tasks, parse_shape, save_tasks
from cuset.tasks.schema import FIELDS



def test_parse_shape_accepts_cudabench_forms():
    assert parse_shape("(1048576,)") == (1048576,)
    assert parse_shape("(16, 1024)") == (16, 1024)
    assert parse_shape(" (128, 128, 4) ") == (128, 128, 4)
    assert parse_shape("()") == ()
    assert parse_shape("7") == (7,)


@pytest.mark.parametrize("bad", ["(16, x)", "16 by 16", "(1.5,)", "(-1,)", "(True,)", "{1: 2}", ""])
def test_parse_shape_rejects(bad):
    with pytest.raises(ValueError):
        parse_shape(bad)


def test_round_trip_is_lossless(record, write_jsonl, tmp_path, make_record):
    path = write_jsonl([record, make_record(1, task_name="Other")])
    tasks, report = load_tasks(path)
    assert report.loaded == 2 and not report.problems
    assert tasks[0].inputs[0].nbytes == 4096
    assert tasks[0].data_bytes == 3 * 4096
    out = tmp_path / "out.jsonl"
    assert save_tasks(tasks, out) == 2
    lines = out.read_text().splitlines()
    assert json.loads(lines[0]) == record  # same fields, same values, same key order
    assert list(json.loads(lines[0])) == list(FIELDS)
    again, _ = load_tasks(out)
    assert again == tasks


def test_family_is_optional_and_round_trips(write_jsonl, tmp_path, make_record):
    path = write_jsonl([make_record(0, family="vector_add")])
    (task,), _ = load_tasks(path)
    assert task.family_name == "vector_add"
    save_tasks([task], tmp_path / "o.jsonl")
    assert json.loads((tmp_path / "o.jsonl").read_text())["family"] == "vector_add"
    (plain,), _ = load_tasks(write_jsonl([make_record(0)], "p.jsonl"))
    assert plain.family is None and plain.family_name == "Vector_Add"


def _problems(write_jsonl, records):
    with pytest.raises(TaskValidationError) as exc:
        load_tasks(write_jsonl(records))
    return exc.value.problems


def test_missing_field_names_line_and_field(write_jsonl, make_record):
    bad = make_record(1)
    del bad["compare.py"]
    (p,) = _problems(write_jsonl, [make_record(0), bad])
    assert (p.line, p.field, p.reason) == (2, "compare.py", "missing_field")
    assert str(p).endswith(":2: compare.py: missing (CUDABench records have all 12 fields)")


def test_bad_dtype(write_jsonl, make_record):
    rec = make_record(0, inputs=[{"name": "a", "dtype": "float33", "shape": "(4,)"}])
    (p,) = _problems(write_jsonl, [rec])
    assert p.field == "inputs[0].dtype" and p.reason == "bad_dtype" and "float32" in p.message


def test_unparsable_shape(write_jsonl, make_record):
    rec = make_record(0, outputs=[{"name": "c", "dtype": "float32", "shape": "(4, n)"}])
    (p,) = _problems(write_jsonl, [rec])
    assert (p.field, p.reason) == ("outputs[0].shape", "bad_shape")


def test_duplicate_id(write_jsonl, make_record):
    (p,) = _problems(write_jsonl, [make_record(3), make_record(4), make_record(3)])
    assert (p.line, p.field, p.reason) == (3, "id", "duplicate_id")
    assert "first seen on line 1" in p.message


def test_every_problem_listed_at_once(write_jsonl, make_record):
    bad1 = make_record(0, id="zero")
    bad2 = make_record(1, gpu=3, outputs=[])
    probs = _problems(write_jsonl, [bad1, b"{not json", bad2])
    got = {(p.line, p.field, p.reason) for p in probs}
    assert got == {(1, "id", "bad_type"), (2, "<line>", "bad_json"), (3, "gpu", "bad_type"), (3, "outputs", "no_outputs")}


def test_invalid_utf8_line_reported(write_jsonl):
    (p,) = _problems(write_jsonl, [b'{"id": 0, "task_name": "\xff"}'])
    assert p.reason == "bad_json" and "UTF-8" in p.message


def test_bad_tensor_name_and_duplicates(write_jsonl, make_record):
    rec = make_record(0, inputs=[{"name": "../etc/passwd", "dtype": "float32", "shape": "(4,)"},
                                 {"name": "b", "dtype": "float32", "shape": "(4,)"},
                                 {"name": "b", "dtype": "float32", "shape": "(4,)"}])
    reasons = [p.reason for p in _problems(write_jsonl, [rec])]
    assert reasons == ["bad_name", "duplicate_name"]


def test_lenient_mode_skips_and_counts(write_jsonl, make_record):
    bad = make_record(2)
    del bad["gen.py"]
    path = write_jsonl([make_record(0), make_record(0), bad, b"[1, 2", make_record(5)])
    tasks, report = load_tasks(path, strict=False)
    assert [t.id for t in tasks] == [0, 5]
    assert report.loaded == 2
    assert dict(report.skipped) == {"duplicate_id": 1, "missing_field": 1, "bad_json": 1}


def test_missing_source_is_a_clear_error(tmp_path, monkeypatch):
    import datasets

    asked = []

    def unreachable_hub(name, **kwargs):  # the hub's answer without the network (and its retries)
        asked.append(name)
        raise ConnectionError(f"Couldn't reach '{name}' on the Hub")

    monkeypatch.setattr(datasets, "load_dataset", unreachable_hub)
    # a name that can only be a local path: never tried on the hub
    with pytest.raises(FileNotFoundError, match="nope.jsonl: no such file or directory"):
        load_tasks(str(tmp_path / "nope.jsonl"))
    assert asked == []
    # a hub-shaped name: tried as a dataset, and the failure says both
    with pytest.raises(FileNotFoundError, match="neither a local file nor a loadable Hugging Face dataset"):
        load_tasks("nobody-here/no-such-dataset")
    assert asked == ["nobody-here/no-such-dataset"]


def test_hf_dataset_loading_path(tmp_path, monkeypatch, make_record):
    # `datasets.load_dataset` is the real loader; a local JSON dataset exercises it offline.
    import datasets

    src = tmp_path / "hf.jsonl"
    src.write_text(json.dumps(make_record(7)) + "\n")
    real = datasets.load_dataset
    monkeypatch.setattr(datasets, "load_dataset", lambda name, split: real("json", data_files=str(src), split=split))
    tasks, report = load_tasks("CUDABench/CUDABench-Set")
    assert [t.id for t in tasks] == [7] and report.loaded == 1


def test_prompt_level_bounds(record):
    task = Task.from_json(record)
    assert task.prompt(2) == "Elementwise sum of two vectors."
    with pytest.raises(ValueError, match="prompt level"):
        task.prompt(4)
