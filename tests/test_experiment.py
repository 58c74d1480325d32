"""cuset.experiment: the one train -> generate -> evaluate orchestration (demo and sweep).
The stages are replaced by recorders here; the real ones run in tests/demo and
tests/analysis/test_sweep_pipeline.py."""

import json

import pytest

import cuset.evaluate
import cuset.generate.run
import cuset.train.run
from cuset.config import load_config
from cuset.errors import CusetError
from cuset.evaluate.config import EvalConfig
from cuset.experiment import Cell, run_cell, step_seconds, trained_model
from cuset.generate.config import GenerateConfig
from cuset.train.config import TrainConfig


@pytest.fixture
def stages(monkeypatch):
    calls = []

    def train(cfg, resume=False):
        calls.append(("train", cfg.output_dir, resume))
        run_dir = cuset.train.run.Path(cfg.output_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        outputs = {"adapter": str(run_dir / "adapter")} if cfg.finetune == "lora" else {"model": str(run_dir / "model")}
        (run_dir / cuset.train.run.SUMMARY_NAME).write_text(json.dumps({"outputs": outputs}))

    def generate(cfg):
        calls.append(("generate", cfg.model, cfg.hf.adapter, cfg.out, cfg.tasks))

    def evaluate(tasks, generations, results, cfg, backend=None):
        calls.append(("evaluate", tasks, str(generations), str(results)))

    monkeypatch.setattr(cuset.train.run, "train", train)
    monkeypatch.setattr(cuset.generate.run, "generate_file", generate)
    monkeypatch.setattr(cuset.evaluate, "evaluate_file", evaluate)
    return calls


def make_cell(tmp_path, finetune="lora", backend="hf", train=True):
    tcfg = load_config(TrainConfig, base={"model": {"name_or_path": "/models/base"}, "finetune": finetune, "output_dir": str(tmp_path / "elsewhere"),
                                          "data": {"paths": ["t.jsonl"]}}) if train else None
    gcfg = load_config(GenerateConfig, base={"backend": backend, "model": "/models/base"})
    return Cell(tmp_path / "cell", "tasks.jsonl", generate=gcfg, evaluate=load_config(EvalConfig), train=tcfg,
                labels={"method": "cuset"})


def test_steps_chain_the_trained_adapter_into_generation_and_record_their_seconds(tmp_path, stages):
    cell = make_cell(tmp_path)
    assert run_cell(cell) == cell.dir / "eval"
    train_dir = cell.dir / "train"
    assert stages == [("train", str(train_dir), True),
                      ("generate", "/models/base", str(train_dir / "adapter"), str(cell.dir / "generations.jsonl"), "tasks.jsonl"),
                      ("evaluate", "tasks.jsonl", str(cell.dir / "generations.jsonl"), str(cell.dir / "eval" / "results.jsonl"))]
    assert set(step_seconds(cell.dir)) == {"train", "generate", "evaluate"}
    assert json.loads((cell.dir / "eval" / "labels.json").read_text()) == {"labels": {"method": "cuset"}}


def test_finished_steps_are_skipped_and_an_interrupted_one_resumes(tmp_path, stages, monkeypatch):
    cell = make_cell(tmp_path, finetune="full")

    def killed(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(cuset.evaluate, "evaluate_file", killed)
    with pytest.raises(KeyboardInterrupt):
        run_cell(cell)
    assert set(step_seconds(cell.dir)) == {"train", "generate"}
    stages.clear()
    monkeypatch.setattr(cuset.evaluate, "evaluate_file", lambda *a, **kw: stages.append(("evaluate",)))
    run_cell(cell)
    assert stages == [("evaluate",)]  # neither training nor generation ran again
    assert trained_model(cell) == (str(cell.dir / "train" / "model"), "")  # full fine-tuning: the weights themselves


def test_a_vanilla_cell_generates_with_the_model_as_it_is(tmp_path, stages):
    cell = make_cell(tmp_path, train=False)
    run_cell(cell)
    assert [c[0] for c in stages] == ["generate", "evaluate"] and stages[0][1:3] == ("/models/base", "")
    assert set(step_seconds(cell.dir)) == {"generate", "evaluate"}


def test_an_adapter_for_a_backend_that_cannot_apply_it_is_a_clear_error(tmp_path, stages):
    cell = make_cell(tmp_path, backend="openai")
    with pytest.raises(CusetError, match=r"backend openai cannot apply a LoRA adapter .*merge=true"):
        run_cell(cell)
    assert set(step_seconds(cell.dir)) == {"train"}  # training is kept for the re-run with merge


def test_a_finished_evaluation_another_judge_wrote_runs_again_alone(tmp_path, stages):
    from cuset.evaluate.judge import current_judge

    class Backend:
        def __init__(self, toolchain):
            self.toolchain = toolchain

        def fingerprint(self):
            return self.toolchain

    cell = make_cell(tmp_path, train=False)
    run_cell(cell, backend=Backend("v1"))
    results = cell.dir / "eval" / "results.jsonl"
    rows = [{"task_id": t, "task_name": "T", "family": "f", "sample": 0, "status": "passed",
             "judge": current_judge(cell.evaluate, Backend("v1"))}
            for t in (1, 2)]
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))  # what the evaluation wrote
    stages.clear()
    run_cell(cell, backend=Backend("v1"))
    assert stages == []                                  # judged by this evaluator: finished
    run_cell(cell, backend=Backend("v2"))                # e.g. the backend's code changed since
    assert [c[0] for c in stages] == ["evaluate"]        # generation is kept, the verdicts are redone
    rows[1]["judge"] = ""                                # one written before judges were stamped
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    stages.clear()
    run_cell(cell, backend=Backend("v1"))
    assert [c[0] for c in stages] == ["evaluate"] and "evaluate" in step_seconds(cell.dir)
