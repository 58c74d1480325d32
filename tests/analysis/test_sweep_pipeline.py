"""`cuset sweep` through the real train -> generate -> eval entry points on a tiny model.

Two cells (the base model and CuSeT) on two tasks; the first pass loses the CuSeT cell's
evaluation, the second resumes it without training again.
"""

import json
import shutil
from pathlib import Path

import pytest

from cuset.experiment.sweep import SweepConfig, run_sweep

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="evaluation judges compilation with nvcc")

KERNEL = """#include <cuda_runtime.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
int main() {
    float *a, *b, *c;
    cudaMalloc(&a, 4096); cudaMalloc(&b, 4096); cudaMalloc(&c, 4096);
    add<<<4, 256>>>(a, b, c, 1024);
    return 0;
}
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from cuset.train.tiny import build_tiny_model

    root = tmp_path_factory.mktemp("sweep")
    model = build_tiny_model(root / "model", [KERNEL] * 4 + ["Task Name Description Input Output GPU"],
                             vocab_size=300, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1,
                             intermediate_size=32)
    tasks = root / "tasks.jsonl"
    rec = lambda i: {"id": i, "task_name": f"Add_{i}", "task_description": "Add two vectors.",
                     "inputs": [{"name": "a", "dtype": "float32", "shape": "(1024,)"},
                                {"name": "b", "dtype": "float32", "shape": "(1024,)"}],
                     "outputs": [{"name": "c", "dtype": "float32", "shape": "(1024,)"}], "gpu": "unknown",
                     "bench.cu": KERNEL, "gen.py": "import numpy as np\n", "compare.py": "print('T')\n",
                     "level1_prompt": "Add a and b.", "level2_prompt": "Add.", "level3_prompt": "Add."}
    tasks.write_text("".join(json.dumps(rec(i)) + "\n" for i in range(2)))
    return root, model, tasks


def test_sweep_trains_generates_evaluates_and_resumes(setup, monkeypatch):
    import cuset.evaluate
    import cuset.train.run

    root, model, tasks = setup
    cfg = SweepConfig(
        name="tiny", out_dir=str(root / "out"), train_config=str(Path(__file__).resolve().parents[2] / "configs/train/tiny/lora.yaml"), tasks=str(tasks),
        train_overrides=[f"model.name_or_path={model}", f"data.paths=[{tasks}]", "optim.max_steps=1", "save_steps=0"],
        generate_overrides=["n_samples=3", "sampling.max_new_tokens=8", "hf.device=cpu", "progress=false"],
        eval_overrides=["execution.backend=cpu", "execution.compile_judge=nvcc", "progress=false", "execution.workers=1"],
        grid={"method": ["vanilla", "cuset"]}, labels={"params": "30K"}, progress=False)

    real_eval, real_train = cuset.evaluate.evaluate_file, cuset.train.run.train
    trained = []

    def flaky_eval(tasks_path, generations, results_path, config, **kw):
        if "cuset" in str(results_path):
            raise RuntimeError("evaluation interrupted (simulated)")
        return real_eval(tasks_path, generations, results_path, config, **kw)

    def counting_train(cfg, **kw):
        trained.append(cfg.output_dir)
        return real_train(cfg, **kw)

    monkeypatch.setattr(cuset.evaluate, "evaluate_file", flaky_eval)
    monkeypatch.setattr(cuset.train.run, "train", counting_train)
    first = run_sweep(cfg)
    assert first["counts"] == {"done": 1, "cached": 0, "failed": 1} and len(trained) == 1
    cuset_cell = next(c for c in first["cells"] if c["status"] == "failed")["cell_id"]
    assert (root / "out" / "cells" / cuset_cell / "train" / "run_summary.json").exists()

    monkeypatch.setattr(cuset.evaluate, "evaluate_file", real_eval)
    second = run_sweep(cfg)
    assert second["counts"] == {"done": 2, "cached": 1, "failed": 0}
    assert len(trained) == 1  # the finished training run was reused, not repeated

    report = json.loads((root / "out" / "report" / "report.json").read_text())
    rows = {r["method"]: r for r in report["table2"] if r["source"] == "this run"}
    assert set(rows) == {"Vanilla", "CuSeT"}
    for run in report["runs"]:
        assert run["counts"]["n_tasks"] == 2 and run["counts"]["n_samples"] == 6
        assert run["labels"]["model"] == "model" and run["labels"]["params"] == "30K"
    gens = (root / "out" / "cells" / cuset_cell / "generations.jsonl").read_text().splitlines()
    assert len(gens) == 6 and all(json.loads(g)["n_tokens"] <= 8 for g in gens)


def test_a_finished_sweep_judged_by_another_evaluator_is_evaluated_again(setup, monkeypatch):
    """After the evaluation code changed (here: its hash), a finished sweep re-evaluates every cell
    from its generations; nothing is trained or generated again."""
    import cuset.evaluate.judge as judge
    import cuset.generate.run
    import cuset.train.run
    from cuset.evaluate.records import load_results

    root, model, tasks = setup
    out = root / "out-rejudged"
    cfg = SweepConfig(
        name="tiny", out_dir=str(out), train_config=str(Path(__file__).resolve().parents[2] / "configs/train/tiny/lora.yaml"), tasks=str(tasks),
        train_overrides=[f"model.name_or_path={model}", f"data.paths=[{tasks}]", "optim.max_steps=1", "save_steps=0"],
        generate_overrides=["n_samples=3", "sampling.max_new_tokens=8", "hf.device=cpu", "progress=false"],
        eval_overrides=["execution.backend=cpu", "execution.compile_judge=nvcc", "progress=false", "execution.workers=1"],
        grid={"method": ["vanilla", "cuset"]}, labels={"params": "30K"}, progress=False)
    assert run_sweep(cfg)["counts"] == {"done": 2, "cached": 0, "failed": 0}
    assert run_sweep(cfg)["counts"] == {"done": 2, "cached": 2, "failed": 0}
    unused = lambda *a, **kw: pytest.fail("trained or generated again")  # noqa: E731
    monkeypatch.setattr(cuset.train.run, "train", unused)
    monkeypatch.setattr(cuset.generate.run, "generate_file", unused)
    monkeypatch.setattr(judge, "judge_code_hash", lambda: "newer evaluation code")
    again = run_sweep(cfg)
    assert again["counts"] == {"done": 2, "cached": 0, "failed": 0}
    for cell in again["cells"]:
        results = load_results(Path(cell["eval_dir"]) / "results.jsonl")
        assert len(results) == 6 and {r.judge for r in results} == {judge.current_judge(
            load_config_for(cfg, cell))}
    assert run_sweep(cfg)["counts"] == {"done": 2, "cached": 2, "failed": 0}


def load_config_for(cfg, entry):
    from cuset.experiment.sweep import PipelineRunner, build_cells

    cell = next(c for c in build_cells(cfg) if c.cell_id == entry["cell_id"])
    return PipelineRunner(cfg).eval_config(cell)
