"""One way for every stage: `cuset STAGE [CONFIG] [key=value ...]`, `--help-config`, config
errors as one line with exit 2, and a bug (a plain ValueError) keeping its traceback."""

import json

import pytest
from typer.testing import CliRunner

from cuset.cli.main import app
from cuset.errors import CusetError

runner = CliRunner()


class Stop(CusetError):
    """Raised by a stubbed entry point once it has the config it was called with."""


def _stages(tmp_path):
    """stage -> (argv before CONFIG, argv after the overrides, minimal valid YAML, entry point module, name)."""
    gens = tmp_path / "g.jsonl"
    gens.write_text("")
    return {
        "data build": (["data", "build"], [], {"out_dir": str(tmp_path / "run"),
                                               "sources": [{"kind": "tasks_jsonl", "path": "t.jsonl"}]},
                       "cuset.curation.build", "build_dataset"),
        "train": (["train"], [], {"output_dir": str(tmp_path / "out"), "model": {"name_or_path": str(tmp_path)}},
                  "cuset.train.run", "train"),
        "sweep": (["sweep"], [], {"train_config": "t.yaml", "tasks": "t.jsonl"}, "cuset.experiment.sweep", "run_sweep"),
        "generate": (["generate"], [], {"tasks": "t.jsonl", "out": str(gens)}, "cuset.generate.run", "generate_file"),
        "eval": (["eval", "tasks.jsonl", str(gens)], ["--out", str(tmp_path / "ev")],
                 {"cases": [0, 2]},
                 "cuset.evaluate", "evaluate_file"),
        "demo": (["demo"], [], {"n_train": 3}, "cuset.demo.run", "run_demo"),
    }


STAGES = ["data build", "train", "sweep", "generate", "eval", "demo"]
KNOWN_KEY = {"data build": "max_file_bytes", "train": "loss.tau", "sweep": "train_config", "generate": "n_samples",
             "eval": "execution.compile_judge", "demo": "finetune_steps"}
OVERRIDE = {"data build": ("max_file_bytes=1234", "max_file_bytes", 1234), "train": ("loss.tau=0.25", "loss.tau", 0.25),
            "sweep": ("name=grid7", "name", "grid7"), "generate": ("n_samples=7", "n_samples", 7),
            "eval": ("execution.workers=3", "execution.workers", 3), "demo": ("seed=11", "seed", 11)}


def _stub(monkeypatch, module, name, seen, error=Stop("stopped")):
    import importlib

    def entry(*args, **kwargs):
        seen.append(next(a for a in (*args, *kwargs.values()) if hasattr(a, "__dataclass_fields__")))
        raise error

    monkeypatch.setattr(importlib.import_module(module), name, entry)


def _get(cfg, key):
    for part in key.split("."):
        cfg = getattr(cfg, part)
    return cfg


def _no_backend(monkeypatch):
    from cuset.evaluate.config import EvalConfig

    monkeypatch.setattr(EvalConfig, "make_backend", lambda self: object())


@pytest.mark.parametrize("stage", STAGES)
def test_help_config_lists_every_key_with_type_default_and_help(stage):
    res = runner.invoke(app, [*stage.split(), "--help-config"], terminal_width=250)
    assert res.exit_code == 0, res.output
    header = next(line for line in res.output.splitlines() if " key " in line)
    assert all(col in header for col in ("type", "default", "help"))
    assert any(line.split("│")[1].strip() == KNOWN_KEY[stage] for line in res.output.splitlines() if "│" in line)


@pytest.mark.parametrize("stage", STAGES)
def test_config_is_positional_and_overrides_follow(stage, tmp_path, monkeypatch):
    import yaml

    before, after, base, module, name = _stages(tmp_path)[stage]
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(base))
    seen = []
    _stub(monkeypatch, module, name, seen)
    _no_backend(monkeypatch)
    override, key, value = OVERRIDE[stage]
    res = runner.invoke(app, [*before, str(config), override, *after])
    assert res.exit_code == 2 and "error: stopped" in res.output, res.output
    cfg = seen[0]
    assert _get(cfg, key) == value
    first = next(iter(base))
    assert str(getattr(cfg, first)) == str(base[first]) or first == "model"  # read from CONFIG


@pytest.mark.parametrize("stage", ["generate", "eval", "demo", "data build"])
def test_config_may_be_left_out(stage, tmp_path, monkeypatch):
    before, after, base, module, name = _stages(tmp_path)[stage]
    seen = []
    _stub(monkeypatch, module, name, seen)
    _no_backend(monkeypatch)
    override, key, value = OVERRIDE[stage]
    flat = [f"{k}={v}" for k, v in base.items()]
    res = runner.invoke(app, [*before, override, *flat, *after])
    assert res.exit_code == 2 and "error: stopped" in res.output, res.output
    assert _get(seen[0], key) == value


def test_the_global_config_option_is_gone(tmp_path):
    res = runner.invoke(app, ["--config", str(tmp_path / "c.yaml"), "demo"])
    assert res.exit_code == 2 and "No such option" in res.output


@pytest.mark.parametrize("stage", STAGES)
def test_a_bad_config_key_is_one_line_and_exit_2(stage, tmp_path, monkeypatch):
    before, after, base, module, name = _stages(tmp_path)[stage]
    seen = []
    _stub(monkeypatch, module, name, seen)
    _no_backend(monkeypatch)
    flat = [f"{k}={v}" for k, v in base.items() if not isinstance(v, dict)]
    flat += [f"{k}.{kk}={vv}" for k, v in base.items() if isinstance(v, dict) for kk, vv in v.items()]
    res = runner.invoke(app, [*before, *flat, "bogus_key=1", *after])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit)
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("config error: bogus_key: unknown key"), res.output
    assert "Traceback" not in res.output and not seen


def _bug_cases(tmp_path, make_record):
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps(make_record(0)) + "\n")
    scores = tmp_path / "scores.jsonl"
    scores.write_text("")
    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void k() {}\n")
    stages = _stages(tmp_path)
    cases = {stage: (stages[stage][3], stages[stage][4],
                     [*stages[stage][0], *[f"{k}={v}" for k, v in stages[stage][2].items() if not isinstance(v, dict)],
                      *[f"{k}.{kk}={vv}" for k, v in stages[stage][2].items() if isinstance(v, dict)
                        for kk, vv in v.items()], *stages[stage][1]])
             for stage in STAGES}
    cases.update({
        "data synth": ("cuset.curation.synth", "synthesize", ["data", "synth", "--n", "1", "--out", str(tmp_path / "s.jsonl")]),
        "data stats": ("cuset.curation.stats", "hf_token_counter", ["data", "stats", str(tasks), "--tokenizer", "tok"]),
        "analyze": ("cuset.analysis.confidence_report", "load_scores", ["analyze", "confidence", "--scores", str(scores)]),
        "report": ("cuset.analysis.results", "load_runs", ["report", str(tmp_path)]),
        "inspect": ("cuset.experiment.scoring", "load_tokenizer", ["inspect", str(cu), "--tokenizer", str(tmp_path), "--no-html"]),
    })
    return cases


BUG_STAGES = STAGES + ["data synth", "data stats", "analyze", "report", "inspect"]


@pytest.mark.parametrize("stage", BUG_STAGES)
def test_a_plain_value_error_is_a_bug_with_its_traceback(stage, tmp_path, monkeypatch, make_record):
    import importlib

    module, name, argv = _bug_cases(tmp_path, make_record)[stage]

    def bug(*args, **kwargs):
        raise ValueError("an internal bug")

    monkeypatch.setattr(importlib.import_module(module), name, bug)
    _no_backend(monkeypatch)
    res = runner.invoke(app, argv)
    assert isinstance(res.exception, ValueError) and str(res.exception) == "an internal bug", res.output
    assert res.exit_code != 2 and "error: an internal bug" not in res.output


def test_library_user_errors_are_cuset_errors_with_their_builtin_base():
    from cuset.analysis.confidence import ScoresError
    from cuset.experiment.scoring import ModelLoadError
    from cuset.curation.stats import TokenizerUnavailable
    from cuset.curation.synth import SynthError
    from cuset.evaluate.records import ResultRecordError
    from cuset.generate.records import GenerationRecordError

    for cls in (ScoresError, ModelLoadError, TokenizerUnavailable, SynthError, ResultRecordError, GenerationRecordError):
        assert issubclass(cls, CusetError) and issubclass(cls, ValueError), cls


def test_more_synthesised_tasks_than_the_options_allow_is_one_line(tmp_path):
    res = runner.invoke(app, ["data", "synth", "--n", "10000000", "--out", str(tmp_path / "s.jsonl")])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit)
    assert "asked for 10000000 tasks" in res.output and "Traceback" not in res.output


def test_a_generations_line_with_missing_fields_is_one_line(tmp_path, make_record):
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps(make_record(0)) + "\n")
    gens = tmp_path / "g.jsonl"
    gens.write_text(json.dumps({"task_id": 0}) + "\n")
    res = runner.invoke(app, ["generate", f"tasks={tasks}", f"out={gens}", "progress=false"])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert f"{gens}:1: missing field(s)" in " ".join(res.output.split())


def test_a_bad_compare_selector_is_one_line(tmp_path, monkeypatch):
    import cuset.analysis.results as results

    run = results.RunResults(source="r", labels={"model": "m", "method": "SFT"},
                             metrics={k: 0.5 for k in results.METRIC_KEYS})
    monkeypatch.setattr(results, "load_runs", lambda *a, **k: [run])
    res = runner.invoke(app, ["report", str(tmp_path), "--compare", "method=SFT", "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and "--compare 'method=SFT': write two label selectors" in " ".join(res.output.split())


@pytest.mark.parametrize("stage", BUG_STAGES)
def test_a_missing_path_from_the_library_is_one_line_and_a_plain_one_is_a_bug(stage, tmp_path, monkeypatch, make_record):
    """No stage catches FileNotFoundError itself: the library says a missing file as MissingPath
    (a CusetError: one line, exit 2), and a plain FileNotFoundError from deep inside is a bug."""
    import importlib

    from cuset.localpath import MissingPath

    module, name, argv = _bug_cases(tmp_path, make_record)[stage]
    for error in (MissingPath("/nowhere/x.jsonl: no such file"), FileNotFoundError("/nowhere/y: internal")):
        def missing(*args, error=error, **kwargs):
            raise error

        monkeypatch.setattr(importlib.import_module(module), name, missing)
        _no_backend(monkeypatch)
        res = runner.invoke(app, argv)
        if isinstance(error, MissingPath):
            assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
            assert "/nowhere/x.jsonl: no such file" in res.output and "Traceback" not in res.output
        else:
            assert type(res.exception) is FileNotFoundError and res.exit_code != 2, res.output


def test_training_on_a_directory_that_holds_no_model_is_one_line(tmp_path):
    (tmp_path / "empty-model").mkdir()
    res = runner.invoke(app, ["train", f"output_dir={tmp_path / 'out'}", f"model.name_or_path={tmp_path / 'empty-model'}",
                              "data.paths=[]"])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert "model.name_or_path: cannot load a tokenizer from" in " ".join(res.output.split())


def test_a_bad_backend_option_is_one_line(tmp_path, make_record):
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps(make_record(0)) + "\n")
    gens = tmp_path / "g.jsonl"
    gens.write_text("")
    res = runner.invoke(app, ["eval", str(tasks), str(gens), "--backend", "cpu", "execution.backend_options.stack_kb=4",
                              "--out", str(tmp_path / "ev")])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert "stack_kb=4: a CUDA thread needs at least 16 KiB of stack" in " ".join(res.output.split())
