from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional

import pytest

from cuset.config import ConfigError, describe, load_config, option, to_dict


@dataclass(frozen=True)
class Inner:
    tau: float = option(0.1, "confidence threshold")
    window: int = option(256, "window length in tokens")


@dataclass(frozen=True)
class Outer:
    model: str = option("tiny", "model name or path")
    objective: str = option("cuset", "objective", choices=("sft", "cuset", "dft"))
    reduction: Literal["token", "sample_sum"] = option("token", "loss reduction")
    lr: float = option(1e-4, "learning rate")
    steps: int = option(10, "optimizer steps")
    lora: bool = option(True, "use LoRA")
    out: Optional[Path] = option(None, "output dir")
    tags: list[str] = option(help="free tags", default_factory=list)
    loss: Inner = option(help="loss settings", default_factory=Inner)


def test_defaults_yaml_and_overrides(tmp_path):
    y = tmp_path / "c.yaml"
    y.write_text("model: qwen\nloss:\n  tau: 0.2\nsteps: 5\n")
    cfg = load_config(Outer, y, ["loss.window=64", "lr=3e-5", "lora=false", "out=/tmp/x", "tags=[a, b]"])
    assert cfg == Outer(model="qwen", steps=5, lr=3e-5, lora=False, out=Path("/tmp/x"), tags=["a", "b"],
                        loss=Inner(tau=0.2, window=64))
    assert to_dict(cfg)["out"] == "/tmp/x"


def test_int_is_accepted_for_float_but_not_the_reverse():
    assert load_config(Outer, None, ["lr=1"]).lr == 1.0
    with pytest.raises(ConfigError, match=r"steps: expected an integer, got 2.5"):
        load_config(Outer, None, ["steps=2.5"])


def test_all_errors_at_once_with_suggestions(tmp_path):
    y = tmp_path / "c.yaml"
    y.write_text("modle: x\nloss:\n  windw: 3\n  tau: high\nobjective: cuseet\nreduction: mean\n")
    with pytest.raises(ConfigError) as exc:
        load_config(Outer, y, ["steps=many", "lora"])
    errs = exc.value.errors
    assert "modle: unknown key (did you mean 'model'?)" in errs
    assert "loss.windw: unknown key (did you mean 'loss.window'?)" in errs
    assert "loss.tau: expected a number, got 'high'" in errs
    assert any(e.startswith("objective: must be one of 'sft', 'cuset', 'dft', got 'cuseet' (did you mean 'cuset'?)") for e in errs)
    assert any(e.startswith("reduction: must be one of 'token', 'sample_sum'") for e in errs)
    assert "steps: expected an integer, got 'many'" in errs
    assert "override 'lora': expected key=value" in errs
    assert len(errs) == 7


@dataclass(frozen=True)
class Checked:
    workers: int = option(0, "parallel workers")
    backend: str = option("cpu", "backend", choices=("cpu", "gpu"))

    def __post_init__(self):
        if self.workers < 0:
            raise ValueError(f"workers must be >= 0, got {self.workers}")


def test_value_checks_run_even_when_another_key_is_refused():
    with pytest.raises(ConfigError) as exc:
        load_config(Checked, None, ["workers=-1", "backend=tpu"])
    assert exc.value.errors == ["backend: must be one of 'cpu', 'gpu', got 'tpu' (did you mean 'gpu'?)",
                                "Checked: workers must be >= 0, got -1"]
    assert load_config(Checked, None, ["workers=2"]) == Checked(workers=2)


def test_negative_validation_workers_are_refused_not_clamped():
    from cuset.curation.config import ValidationConfig

    with pytest.raises(ConfigError, match=r"execution: workers must be >= 0 \(0 = one per core\), got -3"):
        load_config(ValidationConfig, None, ["execution.workers=-3"])


def test_old_execution_keys_name_their_new_place():
    from cuset.curation.config import DataBuildConfig
    from cuset.evaluate.config import EvalConfig

    with pytest.raises(ConfigError) as exc:
        load_config(DataBuildConfig, None, ["sources=[{path: x}]", "validation.run_timeout_s=30",
                                            "validation.workers=2", "validation.cases=[0]"])
    assert exc.value.errors == ["validation.run_timeout_s was renamed validation.execution.timeout_run",
                                "validation.workers was renamed validation.execution.workers"]
    with pytest.raises(ConfigError) as exc:
        load_config(EvalConfig, None, ["backend=cpu", "sandbox.mode=none", "workerz=2"])
    assert exc.value.errors == ["backend was renamed execution.backend", "sandbox was renamed execution.sandbox",
                                "workerz: unknown key (did you mean 'execution.workers'?)"]
    # the new spelling loads, the same section in both configs
    cfg = load_config(DataBuildConfig, None, ["sources=[{path: x}]", "validation.execution.timeout_run=30",
                                              "validation.execution.program_threads=2"])
    assert (cfg.validation.execution.timeout_run, cfg.validation.execution.program_threads) == (30.0, 2)
    assert type(cfg.validation.execution) is type(load_config(EvalConfig).execution)


def test_unknown_key_without_close_match_lists_known_keys():
    with pytest.raises(ConfigError, match=r"zzz: unknown key \(known keys: model, objective"):
        load_config(Outer, None, ["zzz=1"])


def test_yaml_errors_name_the_line(tmp_path):
    y = tmp_path / "bad.yaml"
    y.write_text("model: a\nsteps: [1,\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:\d+: invalid YAML"):
        load_config(Outer, y)
    with pytest.raises(ConfigError, match="no such file"):
        load_config(Outer, tmp_path / "missing.yaml")
    y.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(Outer, y)


def test_describe_lists_nested_help():
    rows = {k: (d, h) for k, _, d, h in describe(Outer)}
    types = {k: t for k, t, _, _ in describe(Outer)}
    assert types["loss.tau"] == "float" and types["objective"] == "'sft' | 'cuset' | 'dft'"
    assert types["out"] == "Path | None" and types["tags"] == "list[str]"
    assert types["reduction"] == "'token' | 'sample_sum'"
    assert rows["loss.tau"] == ("0.1", "confidence threshold")
    assert rows["objective"][1] == "objective"
