"""Teacher-forced confidences on a tiny Qwen2 model built here: exact values, batching,
span labels, and `cuset analyze confidence` end to end."""

import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from cuset.experiment.scoring import encode_example, encode_examples, score_batches
from cuset.cli.main import app
from cuset.train.data import RecordOptions, read_examples
from cuda_programs import REDUCE

KERNEL = """#include <cuda_runtime.h>

__global__ void scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = a * x[i];
}

int main() {
    float* x;
    int n = 4096;
    cudaMalloc(&x, n * sizeof(float));
    scale<<<(n + 255) / 256, 256>>>(x, 2.0f, n);
    cudaFree(x);
    return 0;
}
"""



def task(i, name, code):
    return {"id": i, "task_name": name, "task_description": f"Compute {name}.",
            "inputs": [{"name": "x", "dtype": "float32", "shape": "(4096,)"}],
            "outputs": [{"name": "y", "dtype": "float32", "shape": "(4096,)"}], "gpu": "unknown",
            "bench.cu": code, "gen.py": "print(1)", "compare.py": "print(1)",
            "level1_prompt": f"Write a CUDA kernel for {name}.", "level2_prompt": name, "level3_prompt": name}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cuset.train.tiny import build_tiny_model

    root = tmp_path_factory.mktemp("tiny")
    model_dir = build_tiny_model(root / "model", [KERNEL, REDUCE] * 3 + ["Write a CUDA kernel for Task Name"],
                                 vocab_size=420, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2,
                                 intermediate_size=64, seed=3)
    data = root / "tasks.jsonl"
    lines = [json.dumps(task(0, "scale", KERNEL)), json.dumps(task(1, "block_sum", REDUCE)),
             json.dumps({"messages": [{"role": "user", "content": "Sum a block."},
                                      {"role": "assistant", "content": "Here:\n```cuda\n" + REDUCE + "```\nDone."}]}),
             "{not json", json.dumps({"id": 5})]
    data.write_text("\n".join(lines) + "\n")
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    return model_dir, data, model, AutoTokenizer.from_pretrained(model_dir)


def examples(data):
    return [e for e in read_examples(data, RecordOptions()) if not hasattr(e, "reason")]


def reference_probs(model, enc):
    """p(target) straight from the model's own full forward pass, one sample, no padding."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([enc.input_ids])).logits[0]
    probs = torch.softmax(logits.double(), dim=-1)
    return np.array([probs[p - 1, enc.input_ids[p]].item() for p in enc.positions])


def test_scored_tokens_are_exactly_the_response_text(tiny):
    _, data, _, tok = tiny
    ex = examples(data)[0]
    enc = encode_example(tok, ex, sample_id="s0", max_length=4096)
    assert "".join(enc.tokens) == ex.response  # no prompt token, no end-of-turn marker
    assert "<|im_end|>" not in enc.tokens
    kinds = dict(zip(range(len(enc.tokens)), enc.kinds))
    text_at = "".join(enc.tokens)
    # Tokens inside the kernel definition carry kernel_body; the include line carries nothing.
    body_start = text_at.index("__global__")
    pos = 0
    for i, t in enumerate(enc.tokens):
        if pos < text_at.index("#include") + len("#include"):
            assert kinds[i] == frozenset(), t
        if pos >= body_start and pos < text_at.index("int main"):
            assert "kernel_body" in kinds[i] or t.isspace(), t
        if t == "threadIdx":
            assert "thread_index" in kinds[i]
        pos += len(t)
    assert any("launch_config" in k for k in enc.kinds)


def test_confidences_equal_the_models_own_softmax_and_do_not_depend_on_batching(tiny):
    _, data, model, tok = tiny
    encoded, skipped, messages = encode_examples(tok, read_examples(data, RecordOptions()), max_length=4096)
    assert len(encoded) == 3 and sum(skipped.values()) == 2 and len(messages) == 2
    one = score_batches(model, tok, encoded, batch_size=1, progress=False)
    three = score_batches(model, tok, encoded, batch_size=3, progress=False)  # padded batch, sorted by length
    for enc, a, b in zip(encoded, one, three):
        ref = reference_probs(model, enc)
        np.testing.assert_allclose(a.confidences, ref, rtol=1e-4, atol=1e-7)
        np.testing.assert_allclose(b.confidences, ref, rtol=1e-4, atol=1e-7)
        assert a.sample_id == enc.sample_id and a.kinds == enc.kinds


def test_truncation_scores_only_what_fits(tiny):
    _, data, model, tok = tiny
    ex = examples(data)[1]
    full = encode_example(tok, ex, sample_id="f", max_length=4096)
    cut = encode_example(tok, ex, sample_id="c", max_length=int(full.positions[0]) + 30)
    assert len(cut.positions) == 30 < len(full.positions)
    assert cut.tokens == full.tokens[: len(cut.tokens)]
    [s] = score_batches(model, tok, [cut], progress=False)
    np.testing.assert_allclose(s.confidences, reference_probs(model, cut), rtol=1e-4, atol=1e-7)


def test_a_head_that_is_not_a_plain_projection_falls_back_to_full_logits(tiny, caplog):
    from transformers import AutoModelForCausalLM

    model_dir, data, _, tok = tiny
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.config.final_logit_softcapping = 0.05  # Qwen2's forward ignores it; our chunked head would apply it
    encoded, _, _ = encode_examples(tok, read_examples(data, RecordOptions()), max_length=4096)
    scored = score_batches(model, tok, encoded, batch_size=2, progress=False)
    assert "using full logits" in caplog.text
    for enc, s in zip(encoded, scored):
        np.testing.assert_allclose(s.confidences, reference_probs(model, enc), rtol=1e-4, atol=1e-7)


def test_cli_end_to_end_then_rescore_from_saved_scores(tiny, tmp_path, assert_png):
    model_dir, data, _, _ = tiny
    out = tmp_path / "conf"
    runner = CliRunner()
    res = runner.invoke(app, ["analyze", "confidence", "--model", str(model_dir), "--data", str(data), "--out", str(out),
                              "--window", "16", "--batch-size", "2", "--device", "cpu", "--no-progress"])
    assert res.exit_code == 0, res.output
    result = json.loads((out / "confidence.json").read_text())
    assert result["n_samples"] == 3 and result["skipped"] == {"bad_json": 1, "missing_field": 1}
    assert result["windows"]["size"] == 16
    for name in result["figures"].values():
        assert_png(out / name)
    assert "KS test: D = " in res.output
    # Same scores, another window: KS unchanged (token level), windows recounted.
    res2 = runner.invoke(app, ["analyze", "confidence", "--scores", str(out / "scores.jsonl"), "--out", str(tmp_path / "re"),
                               "--window", "8", "--window-mode", "centered"])
    assert res2.exit_code == 0, res2.output
    again = json.loads((tmp_path / "re" / "confidence.json").read_text())
    assert again["ks"] == result["ks"]
    assert again["windows"]["n_windows"] == sum(p["n_tokens"] for p in result["per_sample"])


def test_cli_errors(tiny, tmp_path):
    model_dir, data, _, _ = tiny
    runner = CliRunner()
    res = runner.invoke(app, ["analyze", "confidence", "--model", str(model_dir)])
    assert res.exit_code == 2 and "give --model and --data" in res.output
    res = runner.invoke(app, ["analyze", "confidence", "--scores", "x.jsonl", "--sensitive-kinds", "kernel,sync"])
    assert res.exit_code == 2 and "unknown kind(s) kernel" in res.output
    res = runner.invoke(app, ["analyze", "confidence", "--model", str(model_dir), "--data", str(data),
                              "--out", str(tmp_path / "s"), "--strict", "--no-progress"])
    assert res.exit_code == 2 and "tasks.jsonl:4" in res.output and "drop --strict" in res.output
    res = runner.invoke(app, ["analyze", "confidence", "--model", str(tmp_path / "no-model"), "--data", str(data),
                              "--out", str(tmp_path / "s"), "--no-progress"])
    assert res.exit_code == 2 and "no-model: no such file or directory (expected a model or adapter directory" in \
        " ".join(res.output.split())


def test_parameter_count_from_safetensors_and_model_label_from_generations(tiny, tmp_path, write_run):
    from cuset.analysis.results import count_parameters, load_run

    model_dir, _, model, _ = tiny
    assert count_parameters(model_dir) == sum(p.numel() for p in model.parameters())
    assert count_parameters(tmp_path) is None and count_parameters("Qwen/Qwen2.5-Coder-7B-Instruct") is None
    gens = tmp_path / "gens.jsonl"
    gens.write_text(json.dumps({"task_id": 0, "sample": 0, "model": str(model_dir)}) + "\n")
    run = write_run(tmp_path / "eval", {0: [(True, True)] * 3}, meta={"generations": str(gens)})
    labels = load_run(run).labels
    assert labels["model"] == model_dir.name and labels["params"] == count_parameters(model_dir)
