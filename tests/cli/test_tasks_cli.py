import re

import pytest
from typer.testing import CliRunner

from jsonl_tools import write_jsonl

from cuset.cli.main import app

runner = CliRunner()


def test_help_lists_every_stage_in_data_flow_order():
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0
    listed = re.findall(r"^\W*([a-z]+) {2,}\S", res.output.split("Commands")[1], flags=re.M)
    assert listed == ["tasks", "data", "inspect", "train", "sweep", "generate", "eval", "analyze", "report", "view", "demo", "carry"]


def test_validate_reports_per_field_errors_and_exits_nonzero(tmp_path, make_record):
    bad = make_record(1, outputs=[{"name": "c", "dtype": "f32", "shape": "(4,)"}])
    res = runner.invoke(app, ["tasks", "validate", str(write_jsonl(tmp_path / "t.jsonl", [make_record(0), bad]))])
    assert res.exit_code == 1
    assert "t.jsonl:2: outputs[0].dtype: unknown dtype 'f32'" in res.output
    assert "1 valid task(s), 1 bad record(s)" in res.output


def test_validate_ok_and_lenient(tmp_path, make_record):
    good = write_jsonl(tmp_path / "t.jsonl", [make_record(0)])
    assert runner.invoke(app, ["tasks", "validate", str(good)]).exit_code == 0
    mixed = write_jsonl(tmp_path / "t.jsonl", [make_record(0), make_record(0)])
    assert runner.invoke(app, ["tasks", "validate", str(mixed), "--lenient"]).exit_code == 0


def test_show_prints_rendered_prompt(tmp_path, make_record):
    path = write_jsonl(tmp_path / "t.jsonl", [make_record(4)])
    res = runner.invoke(app, ["tasks", "show", str(path), "--id", "4", "--level", "2"])
    assert res.exit_code == 0, res.output
    assert "## Task Description\nElementwise sum of two vectors." in res.output
    res = runner.invoke(app, ["tasks", "show", str(path), "--id", "4", "--level", "1", "--compat"])
    assert "CUDA program:" in res.output and "Task Name:\nVector_Add" in res.output
    res = runner.invoke(app, ["tasks", "show", str(path), "--id", "9"])
    assert res.exit_code == 2 and "no valid task with id 9" in res.output


@pytest.mark.parametrize("command", [["tasks", "validate"], ["tasks", "list"], ["tasks", "show", "--id", "0"]])
@pytest.mark.parametrize("name", ["nope.jsonl", "./data", "runs/x/tasks"])
def test_a_missing_local_task_file_is_one_line_at_once(tmp_path, monkeypatch, command, name):
    """A name that can only be a local path is never tried as a hub dataset (25 s of retries)."""
    import datasets

    hub_calls = []
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: hub_calls.append(a) or [])
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, [*command[:2], name, *command[2:]])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit)  # fail(), not a crash
    assert f"tasks: {name}: no such file or directory" in " ".join(res.output.split())
    assert "Traceback" not in res.output and hub_calls == []


def test_a_missing_model_directory_is_named_by_generate(tmp_path, make_record):
    tasks = write_jsonl(tmp_path / "t.jsonl", [make_record(0)])
    res = runner.invoke(app, ["generate", "backend=hf", f"model={tmp_path / 'no-model'}", f"tasks={tasks}",
                              f"out={tmp_path / 'g.jsonl'}"])
    assert res.exit_code == 2
    assert f"model: {tmp_path / 'no-model'}: no such file or directory" in " ".join(res.output.split())


def test_local_paths_and_hub_names_are_told_apart():
    from cuset.localpath import is_local_path

    for name in ("/abs/model", "./m", "../m", "~/m", "runs/q7b/merged", "tasks.jsonl", "kb/problem.py"):
        assert is_local_path(name), name
    for name in ("Qwen/Qwen2.5-Coder-7B-Instruct", "CUDABench/CUDABench-Set", "gpt2"):
        assert not is_local_path(name), name


def test_a_user_error_from_deep_in_the_library_is_one_line_and_a_bug_keeps_its_traceback(monkeypatch, tmp_path):
    import cuset.tasks
    from cuset.errors import CusetError

    class Deep(CusetError, ValueError):
        pass

    def user_error(*a, **k):
        raise Deep("tasks.jsonl:3: field x: set it to an integer")

    monkeypatch.setattr(cuset.tasks, "load_tasks", user_error)
    res = runner.invoke(app, ["tasks", "list", "whatever.jsonl"])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit)
    assert "error: tasks.jsonl:3: field x: set it to an integer" in " ".join(res.output.split())

    def bug(*a, **k):
        raise KeyError("internal")

    monkeypatch.setattr(cuset.tasks, "load_tasks", bug)
    res = runner.invoke(app, ["tasks", "list", "whatever.jsonl"])
    assert isinstance(res.exception, KeyError)  # not swallowed into a one-line message
