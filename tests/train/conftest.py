"""Shared fixtures: a few CUDA programs, task records, and a tiny model built locally."""

from __future__ import annotations

from pathlib import Path

import pytest
from cuda_programs import REDUCE
from jsonl_tools import write_jsonl  # re-exported: the train tests import it from here

VECTOR_ADD = """#include <cuda_runtime.h>
#include <cstdio>

__global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

int main() {
    const int n = 1024;
    float *a, *b, *c;
    cudaMalloc(&a, n * sizeof(float));
    cudaMalloc(&b, n * sizeof(float));
    cudaMalloc(&c, n * sizeof(float));
    vector_add<<<(n + 255) / 256, 256>>>(a, b, c, n);
    cudaDeviceSynchronize();
    cudaFree(a); cudaFree(b); cudaFree(c);
    return 0;
}
"""

RELU = """#include <cuda_runtime.h>

__global__ void relu(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = fmaxf(x[i], 0.0f);
}

int main() {
    float* x;
    cudaMalloc(&x, 4096 * sizeof(float));
    relu<<<16, 256>>>(x, 4096);
    cudaFree(x);
    return 0;
}
"""


PROGRAMS = {"vector_add": VECTOR_ADD, "relu": RELU, "block_sum": REDUCE}


def task_record(i: int, name: str, code: str) -> dict:
    return {
        "id": i, "task_name": name, "task_description": f"Compute {name} of the inputs.",
        "inputs": [{"name": "x", "dtype": "float32", "shape": "(1024,)"}],
        "outputs": [{"name": "y", "dtype": "float32", "shape": "(1024,)"}],
        "gpu": "unknown", "bench.cu": code, "gen.py": "print(1)", "compare.py": "print(1)",
        "level1_prompt": f"Write a CUDA kernel for {name}.", "level2_prompt": f"{name} (level 2).",
        "level3_prompt": f"{name}.",
    }


def build_program_model(directory: Path, hidden_size: int = 32, intermediate_size: int = 64) -> Path:
    """A 2-layer Qwen2 model with a BPE tokenizer trained on the programs (the train tests' models)."""
    from cuset.train.tiny import build_tiny_model

    corpus = list(PROGRAMS.values()) * 3 + ["Write a CUDA kernel. Task Name Description Input Output GPU"]
    return build_tiny_model(directory, corpus, vocab_size=400, hidden_size=hidden_size, num_layers=2, num_heads=4,
                            num_kv_heads=2, intermediate_size=intermediate_size)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """The programs' model at hidden size 32."""
    return build_program_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture()
def tasks_jsonl(tmp_path) -> Path:
    return write_jsonl(tmp_path / "tasks.jsonl", [task_record(i, n, c) for i, (n, c) in enumerate(PROGRAMS.items())])


@pytest.fixture(autouse=True)
def one_torch_thread():
    """The machine has 2 shared cores: one thread per process is faster than two fighting."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def train_data(tmp_path_factory) -> Path:
    """Six prompt/completion records: the three programs as fenced answers, twice."""
    root = tmp_path_factory.mktemp("data")
    rows = [{"prompt": f"Write the CUDA program {name} ({i}).", "completion": f"```cuda\n{code}```"}
            for i, (name, code) in enumerate(list(PROGRAMS.items()) * 2)]
    return write_jsonl(root / "train.jsonl", rows)


@pytest.fixture(scope="session")
def warm_model_dir(tiny_model_dir, train_data, tmp_path_factory) -> Path:
    """The tiny model after a few plain next-token steps on the training programs.

    A random model gives every token p ~ 1/vocab, so confidence-masked objectives
    (ProFit, CuSeT) would drop every token; after warming up some targets are
    confident and some are not, as with a real pretrained model.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cuset.train.data import DataConfig, PadCollator, build_dataset

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    ds, _ = build_dataset(DataConfig(paths=[str(train_data)], cache_dir=str(tmp_path_factory.mktemp("cache"))),
                          tok, progress=False)
    batch = PadCollator(tok.pad_token_id)([ds[i] for i in range(3)])
    batch.pop("cuda_mask")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(60):
        opt.zero_grad()
        model(**batch).loss.backward()
        opt.step()
    out = tmp_path_factory.mktemp("warm") / "model"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out
