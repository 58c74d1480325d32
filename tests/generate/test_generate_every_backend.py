"""`cuset generate` on KernelBench- and CUDABench-format tasks through every backend, as the
docs/gpu.md documents it (`cuset generate configs/generate/<backend>.yaml tasks=suites/kernelbench ...`).

openai: a real HTTP server on 127.0.0.1 (openai_fakes.FakeServer). vllm: cuset's real
backend with only vLLM's engine faked (vllm_fakes: `LLM`, `SamplingParams` and the output
objects, put in sys.modules), so prompt building, the sampling parameters and their seeds,
output parsing and token counting all run. hf: the tiny local model. Both fakes answer as a
seeded model would: the text depends on the request's seed, so a record shows which seed
it was sampled with.
"""

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cuset.cli.main import app
from cuset.generate.records import load_generations
from cuset.generate.seeds import SEED_LIMIT, sample_seed
from cuset.tasks import load_tasks

from vllm_fakes import fake_vllm_module

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()

KERNELBENCH = ROOT / "suites" / "kernelbench"            # 23 tasks, ids are names
CUDABENCH = ROOT / "suites/cuset-bench-cpu.jsonl"    # CUDABench format, integer ids (0, 2, 4, ...)
FORMATS = {"kernelbench": (KERNELBENCH, 0), "cudabench": (CUDABENCH, 3)}  # path, limit (0 = all)

KB_CODE = ("import torch\nimport torch.nn as nn\n\n\n# sampled with seed {seed}\nclass ModelNew(nn.Module):\n"
           "    def forward(self, *inputs):\n        return inputs[0]\n")
CUDA_CODE = "#include <cstdio>\n__global__ void k() {{}}\nint main() {{ printf(\"%d\", {seed}); return 0; }}\n"


def answer(prompt: str, seed: int, think: bool = False) -> str:
    """What the fake model says: a ModelNew module to a KernelBench prompt, a CUDA program otherwise."""
    kernelbench = "ModelNew" in prompt
    code = (KB_CODE if kernelbench else CUDA_CODE).format(seed=seed)
    trace = f"<think>\nplan {seed}\n</think>\n" if think else ""
    return f"{trace}Here is the answer:\n```{'python' if kernelbench else 'cuda'}\n{code}```\n"


def expected_code(task, seed):
    return (KB_CODE if task.kind == "kernelbench" else CUDA_CODE).format(seed=seed)


def tasks_of(fmt):
    path, limit = FORMATS[fmt]
    tasks = load_tasks(path)[0]
    return tasks[:limit] if limit else tasks


def prompt_text(task):
    return task.reference_src if task.kind == "kernelbench" else task.level1_prompt


def generate(backend, fmt, out, *extra):
    path, limit = FORMATS[fmt]
    args = ["generate", str(ROOT / f"configs/generate/{backend}.yaml"), f"tasks={path}", f"out={out}",
            "n_samples=2", "progress=false", *([f"limit={limit}"] if limit else []), *extra]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output + repr(res.exception)
    return {r.key: r for r in load_generations(out)}


# -- openai ------------------------------------------------------------------


@pytest.fixture
def kb_server(server_factory):
    return server_factory(delay=0, content=lambda body: answer(body["messages"][-1]["content"], body["seed"]))


@pytest.mark.parametrize("fmt", FORMATS)
def test_openai_backend_through_the_cli(fmt, kb_server, tmp_path):
    tasks = {t.id: t for t in tasks_of(fmt)}
    url = f"openai.base_url={kb_server.url}"
    recs = generate("openai", fmt, tmp_path / "g.jsonl", "model=served-model", url)
    assert sorted(recs) == sorted((i, s) for i in tasks for s in range(2))
    assert len(kb_server.requests) == 2 * len(tasks)
    bodies = {body["seed"]: body for _, body, _ in kb_server.requests}
    want = {key: sample_seed(0, *key) for key in recs}
    assert len(set(want.values())) == len(want)                        # one distinct seed per (task, sample)
    assert sorted(bodies) == sorted(want.values())                     # and each was asked for once
    assert all(0 <= s < SEED_LIMIT for s in bodies)
    for key, rec in recs.items():
        task, seed = tasks[rec.task_id], want[key]
        body = bodies[seed]                                            # the request this record answered
        assert prompt_text(task) in body["messages"][-1]["content"] and body["messages"][0]["role"] == "system"
        assert (body["model"], body["temperature"], body["top_p"], body["max_tokens"]) == ("served-model", 0.8, 0.95,
                                                                                           4096)
        assert rec.task_name == task.task_name and rec.model == "served-model" and rec.level == 1
        assert rec.response == answer(body["messages"][-1]["content"], seed)
        assert rec.code == expected_code(task, seed)
        assert (rec.n_tokens, rec.finish_reason, rec.reasoning) == (17, "stop", None)   # the server's usage
    # a re-run into a fresh file asks for the same seeds; one over a single task too (the seed
    # depends on the task and sample, not on the request's place in the run)
    again = generate("openai", fmt, tmp_path / "again.jsonl", "model=served-model", url)
    assert {k: r.code for k, r in again.items()} == {k: r.code for k, r in recs.items()}
    one = next(iter(tasks))
    alone = generate("openai", fmt, tmp_path / "one.jsonl", "model=served-model", url, f"task_ids=[{one}]")
    assert {k: r.code for k, r in alone.items()} == {(one, s): recs[(one, s)].code for s in range(2)}
    # another base seed gives other seeds, and resuming a finished file asks for nothing
    other = generate("openai", fmt, tmp_path / "other.jsonl", "model=served-model", url, "sampling.seed=7",
                     f"task_ids=[{one}]")
    assert sorted(other) == [(one, 0), (one, 1)]
    for (_, s), r in other.items():
        assert r.code == expected_code(tasks[one], sample_seed(7, one, s)) != recs[(one, s)].code
    n = len(kb_server.requests)
    generate("openai", fmt, tmp_path / "g.jsonl", "model=served-model", url)
    assert len(kb_server.requests) == n


# -- vllm --------------------------------------------------------------------


@pytest.fixture
def fake_vllm(monkeypatch):
    module = fake_vllm_module(lambda prompt, params: answer(prompt, params.seed, think=True))
    monkeypatch.setitem(sys.modules, "vllm", module)
    return module


@pytest.mark.parametrize("fmt", FORMATS)
def test_vllm_backend_through_the_cli(fmt, fake_vllm, tiny_model_dir, tmp_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tasks = {t.id: t for t in tasks_of(fmt)}
    recs = generate("vllm", fmt, tmp_path / "g.jsonl", f"model={tiny_model_dir}")
    assert sorted(recs) == sorted((i, s) for i in tasks for s in range(2))
    (engine,) = fake_vllm.engines
    assert engine.kwargs == dict(model=str(tiny_model_dir), tokenizer=None, tensor_parallel_size=1, dtype="auto",
                                 seed=0, gpu_memory_utilization=0.9, max_model_len=None)
    (prompts, params), = engine.calls                                  # one batched chat() call
    assert len(prompts) == len(params) == 2 * len(tasks)
    assert all((p.n, p.temperature, p.top_p, p.max_tokens) == (1, 0.8, 0.95, 4096) for p in params)
    by_seed = {p.seed: prompt for prompt, p in zip(prompts, params)}
    want = {key: sample_seed(0, *key) for key in recs}
    assert sorted(by_seed) == sorted(want.values())                    # distinct, and what sample_seed says
    for key, rec in recs.items():
        task, seed = tasks[rec.task_id], want[key]
        prompt = by_seed[seed]                                         # rendered by the model's chat template
        assert prompt.startswith("<|im_start|>system\n") and prompt.endswith("<|im_start|>assistant\n")
        assert prompt_text(task) in prompt
        text = answer(prompt, seed, think=True)
        assert rec.response == text and rec.finish_reason == "stop" and rec.task_name == task.task_name
        assert rec.code == expected_code(task, seed)                  # from the answer after the trace
        assert rec.n_tokens == len(tok.encode(text, add_special_tokens=False)) + 1   # + the EOS token
        assert rec.reasoning == f"\nplan {seed}\n"
        assert rec.reasoning_tokens == len(tok.encode(f"\nplan {seed}\n", add_special_tokens=False)) > 0
    # a re-run into a fresh file: a new engine, the same seeds, the same records
    again = generate("vllm", fmt, tmp_path / "again.jsonl", f"model={tiny_model_dir}")
    assert [p.seed for p in fake_vllm.engines[1].calls[0][1]] == [p.seed for p in params]
    assert {k: (r.response, r.n_tokens, r.reasoning_tokens) for k, r in again.items()} == \
        {k: (r.response, r.n_tokens, r.reasoning_tokens) for k, r in recs.items()}


def test_vllm_cut_off_while_reasoning_leaves_no_code(fake_vllm, tiny_model_dir, tmp_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    cut = len(tok.encode("<think>\n", add_special_tokens=False)) + 1     # the limit falls inside the trace
    recs = generate("vllm", "kernelbench", tmp_path / "g.jsonl", f"model={tiny_model_dir}",
                    "task_ids=[kb_softmax]", f"sampling.max_new_tokens={cut}")
    assert sorted(recs) == [("kb_softmax", 0), ("kb_softmax", 1)]
    for rec in recs.values():
        assert (rec.finish_reason, rec.n_tokens, rec.code) == ("length", cut, None)
        assert rec.response.startswith("<think>\n") and "</think>" not in rec.response
        assert rec.reasoning == rec.response[len("<think>"):]
        assert rec.reasoning_tokens == len(tok.encode(rec.reasoning, add_special_tokens=False))
    (_, params), = fake_vllm.engines[0].calls
    assert [p.max_tokens for p in params] == [cut, cut]
    assert [p.seed for p in params] == [sample_seed(0, "kb_softmax", 0), sample_seed(0, "kb_softmax", 1)]


# -- hf ----------------------------------------------------------------------


def test_hf_backend_on_kernelbench_through_the_cli(tiny_model_dir, tmp_path):
    ids = [t.id for t in tasks_of("kernelbench")][:3]
    recs = generate("hf", "kernelbench", tmp_path / "g.jsonl", f"model={tiny_model_dir}", "hf.device=cpu",
                    "hf.dtype=float32", "sampling.max_new_tokens=3", "limit=3")
    assert sorted(recs) == sorted((i, s) for i in ids for s in range(2))
    assert all(1 <= r.n_tokens <= 3 and r.task_name for r in recs.values())
