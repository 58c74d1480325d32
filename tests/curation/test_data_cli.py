import json
import socket

import pytest
import yaml
from typer.testing import CliRunner

from cuset.cli.main import app

from llm_fakes import FakeLLMServer

runner = CliRunner()


def write_config(tmp_path, data) -> str:
    path = tmp_path / "data.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_build_needs_a_config():
    res = runner.invoke(app, ["data", "build"])
    assert res.exit_code == 2 and "give a config file" in res.output


def test_build_lists_every_config_error(tmp_path):
    cfg = write_config(tmp_path, {"sources": [{"kind": "cuda_dirs", "path": "x"}], "llm": {"modle": "m"}})
    res = runner.invoke(app, ["data", "build", cfg, "validation.execution.workers=two"])
    assert res.exit_code == 2
    assert "config error" in res.output and "did you mean 'cuda_dir'" in res.output
    assert "llm.modle: unknown key (did you mean 'llm.model'?)" in res.output
    assert "validation.execution.workers: expected an integer" in res.output


def test_help_config_lists_nested_keys():
    res = runner.invoke(app, ["data", "build", "--help-config"])
    assert res.exit_code == 0
    for key in ("llm.max_requests", "validation.execution.backend", "decontam.threshold", "sources[].kind"):
        assert key in res.output


def test_build_runs_from_the_command_line(tmp_path, fixtures):
    """Only pairs, and the server rejects them all: the stages still run and report."""
    with FakeLLMServer(replies={}) as server:
        cfg = write_config(tmp_path, {
            "out_dir": str(tmp_path / "run"),
            "sources": [{"kind": "pairs_jsonl", "path": str(fixtures / "pairs.jsonl")}],
            "llm": {"base_url": server.base_url, "cache_dir": str(tmp_path / "cache")}})
        res = runner.invoke(app, ["data", "build", cfg, "progress=false"])
        assert res.exit_code == 0, res.output
        assert server.requests == 1
    assert "0 tasks ->" in res.output and "cuset data build" in res.output
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["stages"]["synthesis"]["rejected"] == {"bad_json": 1}
    assert manifest["stages"]["sources"]["skipped"] == {"bad_json": 1, "missing_field": 1, "no_code": 1}


def test_unreachable_llm_is_a_clear_error(tmp_path, fixtures):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = write_config(tmp_path, {
        "out_dir": str(tmp_path / "run"), "sources": [{"kind": "pairs_jsonl", "path": str(fixtures / "pairs.jsonl")}],
        "llm": {"base_url": f"http://127.0.0.1:{port}/v1", "max_retries": 0}})
    res = runner.invoke(app, ["data", "build", cfg, "progress=false"])
    assert res.exit_code == 2
    assert "Is the server running? (llm.base_url)" in res.output and "the next run resumes" in res.output
    assert "Traceback" not in res.output


def test_stats_on_a_task_file(tmp_path, fixtures):
    res = runner.invoke(app, ["data", "stats", str(fixtures / "eval_tasks.jsonl"), "--out", str(tmp_path / "st")])
    assert res.exit_code == 0, res.output
    assert "Token lengths (lexer tokens) over 2 tasks" in res.output and "Leaky_ReLU" in res.output
    assert sorted(p.name for p in (tmp_path / "st").iterdir()) == ["dtypes.png", "families.png", "token_lengths.png"]
    assert all((tmp_path / "st" / n).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for n in ("dtypes.png", "families.png"))


def test_stats_errors(tmp_path, fixtures):
    res = runner.invoke(app, ["data", "stats", str(tmp_path / "none.jsonl")])
    assert res.exit_code == 2 and "no such task file" in res.output
    bad = tmp_path / "m.json"
    bad.write_text("{not json")
    res = runner.invoke(app, ["data", "stats", str(fixtures / "eval_tasks.jsonl"), "--manifest", str(bad), "--out", str(tmp_path)])
    assert res.exit_code == 2 and "cannot read manifest" in res.output


def test_synth_same_seed_same_file(tmp_path):
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    for path, seed in ((a, "1"), (b, "1"), (c, "2")):
        res = runner.invoke(app, ["data", "synth", "--n", "20", "--seed", seed, "--out", str(path)])
        assert res.exit_code == 0, res.output
        assert f"20 tasks -> {path}" in res.output
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    from cuset.tasks import load_tasks

    tasks, _ = load_tasks(a)  # strict: every record is valid CUDABench
    assert len(tasks) == 20 and len({t.to_json()["bench.cu"] for t in tasks}) == 20


def test_synth_asking_for_too_many_is_a_clear_error(tmp_path):
    res = runner.invoke(app, ["data", "synth", "--n", "100000000", "--seed", "1", "--out", str(tmp_path / "x.jsonl")])
    assert res.exit_code == 2 and "error" in res.output and "Traceback" not in res.output


def test_synth_train_and_eval_splits_are_disjoint(tmp_path):
    from cuset.tasks import load_tasks

    files = {}
    for split in ("train", "eval"):
        files[split] = tmp_path / f"{split}.jsonl"
        res = runner.invoke(app, ["data", "synth", "--n", "10", "--seed", "4", "--split", split, "--holdout", "families",
                                  "--out", str(files[split])])
        assert res.exit_code == 0, res.output
    train, _ = load_tasks(files["train"])
    ev, _ = load_tasks(files["eval"])
    assert not {t.family_name for t in train} & {t.family_name for t in ev}
    res = runner.invoke(app, ["data", "synth", "--n", "3", "--split", "test", "--out", str(tmp_path / "x.jsonl")])
    assert res.exit_code == 2 and "--split must be train or eval" in res.output
