"""`cuset data build` with `reasoning: true` (ConCuR-style curation) end to end: a fake
reasoning server on loopback answers each task several times with traces of different
lengths, some kernels wrong; real validation on the CPU backend decides which pass."""

import json
import shutil
from pathlib import Path

import pytest

from cuset.analysis.difficulty import attempts_from_reasoning_manifest, difficulty_table
from cuset.config import load_config
from cuset.curation.build import build_dataset
from cuset.curation.config import DataBuildConfig
from cuset.curation.reasoning_stage import select_kept
from cuset.io import read_jsonl
from cuset.tasks import load_tasks
from cuset.train.data import RecordOptions, parse_record

from llm_fakes import FakeReasoningServer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "data"
NEGATE = json.loads((FIXTURES / "tasks.jsonl").read_text().splitlines()[0])  # a task whose reference passes
CODE = NEGATE["bench.cu"]


def _double_task() -> dict:
    return {**NEGATE, "id": 1, "task_name": "Vector_Double",
            "bench.cu": CODE.replace("negate_kernel", "double_kernel").replace("y[i] = -x[i]", "y[i] = 2.0f * x[i]"),
            "gen.py": NEGATE["gen.py"].replace("(-x).tofile", "(2 * x).tofile"),
            "level1_prompt": "Double every element of the float32 vector x (3000 elements) into y.",
            "level2_prompt": "Elementwise doubling.", "level3_prompt": "Double a vector."}


def trace(n: int) -> str:
    return " ".join(f"step{i}" for i in range(n))  # n lexer tokens


def fenced(code: str) -> str:
    return f"Here is the program.\n```cuda\n{code}```\n"


SCRIPT = {
    # Vector_Negate: two pass (traces of 60 and 30 tokens), the shortest trace (10) is wrong, one never ends
    ("Vector_Negate", 0): (trace(60), fenced(CODE), "field"),
    ("Vector_Negate", 1): (trace(10), fenced(CODE.replace("y[i] = -x[i]", "y[i] = x[i]")), "field"),
    ("Vector_Negate", 2): (trace(30) + "\nI could launch negate_kernel<<<1, 3000>>>(dx, dy, n) but 3000 > 1024.",
                           fenced(CODE.replace("128", "256")), "inline"),
    ("Vector_Negate", 3): (None, "<think>\n" + trace(80), "none"),
    # Vector_Double: nothing passes
    ("Vector_Double", 0): (trace(5), fenced(_double_task()["bench.cu"].replace("2.0f * x[i]", "2.0f * z[i]")), "field"),
    ("Vector_Double", 1): (trace(7), fenced(_double_task()["bench.cu"].replace("2.0f * x[i]", "x[i]")), "field"),
    ("Vector_Double", 2): (trace(9), "I would rather not write code today.", "field"),
    ("Vector_Double", 3): (trace(200), "", "field"),  # cut at max_tokens inside the trace: no answer
}


@pytest.fixture
def reasoning_server():
    with FakeReasoningServer(SCRIPT) as server:
        yield server


def _config(tmp_path, server, *overrides):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n".join(json.dumps(t) for t in (NEGATE, _double_task())) + "\n")
    data = {"out_dir": str(tmp_path / "run"),
            "sources": [{"kind": "tasks_jsonl", "path": str(tasks), "label": "tasks"}],
            "llm": {"base_url": server.base_url, "model": "fake-reasoner", "concurrency": 2, "backoff_s": 0.0,
                    "cache_dir": str(tmp_path / "llm_cache")},
            "validation": {"execution": {"backend": "cpu", "workers": 2, "compile_judge": "backend"}, "cases": [0, 1]},
            "dedup": {"near_threshold": 1.0},  # the two tasks differ in one line: keep both
            "reasoning": True, "progress": False}
    return load_config(DataBuildConfig, None, ["reasoning.n_candidates=4", *overrides], base=data)


@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU backend needs g++")
@pytest.mark.timeout(900)
def test_reasoning_build_keeps_the_most_concise_passing_answer(tmp_path, reasoning_server, cold_compile_cache):
    result = build_dataset(_config(tmp_path, reasoning_server))
    run = result.run_dir
    assert sorted(reasoning_server.asked) == sorted(SCRIPT)  # every task, seeds 0..3

    by_task = {r["task_name"]: r for r in read_jsonl(run / "5_reasoning.jsonl")}
    neg, dbl = by_task["Vector_Negate"], by_task["Vector_Double"]
    assert [c["status"] for c in neg["candidates"]] == ["passed", "wrong", "passed", "no_code"]
    assert [c["reasoning_tokens"] for c in neg["candidates"][:2]] == [60, 10]
    assert neg["candidates"][2]["reasoning_tokens"] > 30 and neg["candidates"][2]["reasoning_tokens"] < 60
    assert "never closes" in neg["candidates"][3]["detail"]
    assert neg["n_passed"] == 2 and neg["kept"] == [2]  # the shortest PASSING trace, not the shortest trace
    assert [c["status"] for c in dbl["candidates"]] == ["compile_error", "wrong", "no_code", "no_code"]
    assert dbl["kept"] == [] and neg["token_unit"] == "lexer tokens"

    (row,) = read_jsonl(run / "train_reasoning.jsonl")
    assert row["task_name"] == "Vector_Negate" and row["candidate"] == 2
    assistant = row["messages"][-1]
    assert assistant["reasoning_content"].startswith("step0 step1") and "```cuda" in assistant["content"]
    assert "<think>" not in assistant["content"]
    example = parse_record(row, RecordOptions(), "train_reasoning.jsonl", 1)
    assert example.reasoning == assistant["reasoning_content"] and "256" in example.response

    st = result.manifest["stages"]["reasoning"]
    assert (st["in"], st["candidates"], st["passed"], st["tasks_with_a_pass"], st["no_passing_answer"], st["out"]) \
        == (2, 8, 2, 1, 1, 1)
    assert st["statuses"] == {"no_code": 3, "passed": 2, "wrong": 2, "compile_error": 1}
    assert st["llm"]["requests_sent"] == 8 and result.manifest["complete"]
    summary = (run / "summary.md").read_text()
    assert "| 5. reasoning answers (concise) | 2 | 1 | no passing answer: 1 |" in summary

    # the difficulty analysis reads the stage's records as written
    attempts, unit = attempts_from_reasoning_manifest(run / "5_reasoning.jsonl")
    table = difficulty_table(attempts)
    assert unit == "lexer tokens" and len(attempts) == 8 and sum(a.passed for a in attempts) == 2
    rows = {r.task: r for r in table.tasks}
    assert rows["Vector_Negate"].pass_rate == 0.5 and rows["Vector_Double"].pass_rate == 0.0
    assert rows["Vector_Negate"].mean_passing_tokens == pytest.approx(
        (60 + neg["candidates"][2]["reasoning_tokens"]) / 2)

    # a re-run sends no request; another selection rule needs no new answers and no new validation
    sent = reasoning_server.requests
    again = build_dataset(_config(tmp_path, reasoning_server))
    assert reasoning_server.requests == sent and again.manifest["stages"]["reasoning"]["llm"]["requests_sent"] == 0
    assert read_jsonl(run / "5_reasoning.jsonl") == list(by_task.values())
    first = build_dataset(_config(tmp_path, reasoning_server, "reasoning.select=first"))
    assert reasoning_server.requests == sent
    assert [r["candidate"] for r in read_jsonl(first.run_dir / "train_reasoning.jsonl")] == [0]
    every = build_dataset(_config(tmp_path, reasoning_server, "reasoning.select=all"))
    assert [r["candidate"] for r in read_jsonl(every.run_dir / "train_reasoning.jsonl")] == [0, 2]
    assert reasoning_server.requests == sent


KB = Path(__file__).resolve().parents[2] / "suites" / "kernelbench"


def _kb_answer(which: str) -> str:
    return f"```python\n{(KB / 'solutions' / f'kb_relu.{which}.py').read_text()}```\n"


@pytest.mark.skipif(shutil.which("g++") is None, reason="the CPU backend needs g++")
@pytest.mark.timeout(900)
def test_reasoning_stage_asks_for_kernelbench_tasks_too(tmp_path):
    # reasoning.tasks adds a KernelBench task (PyTorch reference -> ModelNew, ConCuR's format):
    # its answers are validated by the KernelBench engine and kept like CUDABench ones
    kb_tasks = tmp_path / "kb.jsonl"
    (relu,) = [t for t in load_tasks(KB)[0] if t.id == "kb_relu"]
    kb_tasks.write_text(json.dumps(relu.to_json()) + "\n")
    script = {("Vector_Negate", 0): (trace(12), fenced(CODE), "field"),
              ("Vector_Negate", 1): (trace(4), fenced(CODE.replace("y[i] = -x[i]", "y[i] = x[i]")), "field"),
              ("ReLU", 0): (trace(40), _kb_answer("wrong"), "field"),
              ("ReLU", 1): (trace(20), _kb_answer("correct"), "inline")}

    def name_of(prompt: str) -> str:
        return "ReLU" if "class ModelNew" in prompt else FakeReasoningServer.TASK.search(prompt).group(1)

    with FakeReasoningServer(script, name_of=name_of) as server:
        cfg = _config(tmp_path, server, "reasoning.n_candidates=2", f"reasoning.tasks=[{kb_tasks}]")
        cfg.sources[0].path = str(tmp_path / "negate.jsonl")
        Path(cfg.sources[0].path).write_text(json.dumps(NEGATE) + "\n")
        result = build_dataset(cfg)
        assert sorted(server.asked) == sorted(script)
    by_task = {r["task_name"]: r for r in read_jsonl(result.run_dir / "5_reasoning.jsonl")}
    kb = by_task["ReLU"]
    assert [c["status"] for c in kb["candidates"]] == ["wrong", "passed"] and kb["kept"] == [1]
    assert by_task["Vector_Negate"]["kept"] == [0]
    rows = {r["task_name"]: r for r in read_jsonl(result.run_dir / "train_reasoning.jsonl")}
    prompt, answer = rows["ReLU"]["messages"][-2]["content"], rows["ReLU"]["messages"][-1]
    assert relu.reference_src.strip() in prompt and "class ModelNew" in answer["content"]
    assert answer["reasoning_content"] == trace(20) and "<think>" not in answer["content"]


def test_select_rules_on_hand_made_candidates():
    cands = [{"index": 0, "status": "passed", "reasoning_tokens": 50, "code_chars": 900},
             {"index": 1, "status": "wrong", "reasoning_tokens": 5, "code_chars": 100},
             {"index": 2, "status": "passed", "reasoning_tokens": 20, "code_chars": 800},
             {"index": 3, "status": "passed", "reasoning_tokens": 20, "code_chars": 700}]
    assert select_kept(cands, "concise") == [3]  # tie on the trace: the shorter code
    assert select_kept(cands, "first") == [0]
    assert select_kept(cands, "all") == [0, 2, 3]
    assert select_kept([cands[1]], "concise") == []


def test_reasoning_config_errors_name_the_key(tmp_path):
    from cuset.config import ConfigError

    base = {"sources": [{"kind": "tasks_jsonl", "path": "t.jsonl"}]}
    with pytest.raises(ConfigError, match="reasoning.select: must be one of"):
        load_config(DataBuildConfig, None, ["reasoning.select=shortest"], base=base)
    with pytest.raises(ConfigError, match="n_candidates"):
        load_config(DataBuildConfig, None, ["reasoning.n_candidates=0"], base=base)
    assert load_config(DataBuildConfig, None, [], base={**base, "reasoning": True}).reasoning.enabled
    # `reasoning: true` in the YAML, a reasoning.* override on the command line: still on
    both = load_config(DataBuildConfig, None, ["reasoning.n_candidates=2"], base={**base, "reasoning": True})
    assert both.reasoning.enabled and both.reasoning.n_candidates == 2
