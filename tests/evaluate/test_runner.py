"""evaluate_file end to end on the g++ test backend: streaming, resume, summary, report."""

import json
from dataclasses import asdict

import pytest

from eval_fakes import GxxBackend, make_task, needs_gxx, program
from cuset.config import load_config
from cuset.evaluate import EvalConfig, evaluate_file, load_results
from cuset.evaluate.config import ExecutionConfig
from cuset.generate.records import GenerationRecord, save_generations
from cuset.tasks import save_tasks

pytestmark = needs_gxx


def gen(task_id, sample, code, tokens=10, name="Axpb"):
    response = f"```cpp\n{code}```" if code else "I can't."
    return GenerationRecord(task_id, name, sample, "m", 1, response, code, tokens, "stop", 0.1)


@pytest.fixture
def run_files(tmp_path):
    tasks = [make_task(1), make_task(2, n=128), make_task(3, n=64, family="big")]
    save_tasks(tasks, tmp_path / "tasks.jsonl")
    good1, good2 = program(256), program(128)
    gens = [
        gen(1, 0, good1), gen(1, 1, good1), gen(1, 2, "int main() { return 0; }"),   # duplicates compile once
        gen(2, 0, None), gen(2, 1, good2, tokens=30), gen(2, 2, program(128, body="y[i] = 0;")),
        gen(3, 0, program(64)), gen(3, 1, program(64)), gen(3, 2, program(64)),
        gen(7, 0, good1),                                                            # not in the task file
    ]
    save_generations(tmp_path / "gens.jsonl", gens)
    cfg = EvalConfig(ExecutionConfig(backend="cpu", workers=2), cache_dir=str(tmp_path / "cache"), progress=False)
    return tmp_path, cfg


def test_whole_run_results_summary_and_report(run_files):
    tmp_path, cfg = run_files
    backend = GxxBackend()
    s = evaluate_file(tmp_path / "tasks.jsonl", tmp_path / "gens.jsonl", tmp_path / "out" / "results.jsonl", cfg,
                      backend=backend)
    results = {r.key: r for r in load_results(tmp_path / "out" / "results.jsonl")}
    assert len(results) == 10
    assert results[(1, 0)].status.value == "passed" and results[(1, 0)].compiled and results[(1, 0)].ran_ok
    assert results[(1, 2)].status.value == "wrong" and results[(1, 2)].ran_ok and not results[(1, 2)].passed
    assert results[(2, 0)].status.value == "no_code" and not results[(2, 0)].compiled
    assert results[(7, 0)].status.value == "skipped" and "not in the tasks file" in results[(7, 0)].detail
    assert results[(1, 0)].code_sha256 == results[(1, 1)].code_sha256
    assert backend.compiles == 5  # 9 samples with code, 5 distinct programs (task 7's is task 1's)
    # Task 1: 2/3 pass; task 2: 1/3; task 3: 3/3 -> function@1 = (2/3 + 1/3 + 1) / 3
    assert abs(s.overall["function@1"] - (2 / 3 + 1 / 3 + 1) / 3) < 1e-12
    assert s.overall["function@3"] == 1.0
    # Official + quirk: task 2's first sample has no code, so its later pass is ignored.
    assert s.overall["compat"]["function@3"] == 1.0
    assert abs(s.overall["compat_quirk"]["function@3"] - 2 / 3) < 1e-12
    assert s.skipped_tasks == [{"task_id": 7, "task_name": "Axpb", "reason": "task 7 is not in the tasks file"}]
    assert set(s.families) == {"axpb", "big"}
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["overall"]["n_tasks"] == 3 and summary["meta"]["compile_cache"]["misses"] == 5
    report = (tmp_path / "out" / "report.md").read_text()
    assert "| Pass@1 Compilation | Pass@1 Function | Pass@3 Compilation | Pass@3 Function |" in report
    assert "Skipped tasks (1" in report and "- 7 Axpb" in report


def test_resume_skips_done_samples(run_files):
    tmp_path, cfg = run_files
    out = tmp_path / "out" / "results.jsonl"
    backend = GxxBackend()
    evaluate_file(tmp_path / "tasks.jsonl", tmp_path / "gens.jsonl", out, cfg, backend=backend)
    lines = out.read_text().splitlines()
    # Simulate an interruption: keep 4 results and a torn fifth line.
    out.write_text("\n".join(lines[:4]) + "\n" + lines[4][:30])
    seen = []
    s = evaluate_file(tmp_path / "tasks.jsonl", tmp_path / "gens.jsonl", out, cfg, backend=GxxBackend(),
                      on_result=seen.append)
    assert len(seen) == 6 and s.meta["resumed"] == 4
    assert len(load_results(out)) == 10
    assert len(out.read_text().splitlines()) == 10
    again = []
    evaluate_file(tmp_path / "tasks.jsonl", tmp_path / "gens.jsonl", out, cfg, backend=GxxBackend(), on_result=again.append)
    assert again == []


def test_budget_skips_are_listed_not_counted(run_files):
    tmp_path, cfg = run_files
    cfg.max_data_mb = 0.001  # 1000 bytes: only task 3 (2 x 64 floats = 512 B) fits
    s = evaluate_file(tmp_path / "tasks.jsonl", tmp_path / "gens.jsonl", tmp_path / "o" / "r.jsonl", cfg,
                      backend=GxxBackend())
    assert [t["task_id"] for t in s.skipped_tasks] == [1, 2, 7]
    assert "budget" in s.skipped_tasks[0]["reason"]
    assert s.overall["n_tasks"] == 1 and s.overall["function@1"] == 1.0


def test_compat_reextracts_first_fence(run_files):
    tmp_path, cfg = run_files
    gens = [GenerationRecord(1, "Axpb", 0, "m", 1, f"```cuda\n{program()}```", program(), 5, "stop", 0.1)]
    save_generations(tmp_path / "g2.jsonl", gens)
    cfg.allow_missing = True   # one task of three: this test is about extraction
    cfg.compat = True
    evaluate_file(tmp_path / "tasks.jsonl", tmp_path / "g2.jsonl", tmp_path / "c" / "r.jsonl", cfg, backend=GxxBackend())
    (r,) = load_results(tmp_path / "c" / "r.jsonl")
    assert r.status.value == "compile_error"  # "cuda" stays in the code, as in the official harness
    cfg.compat = False
    evaluate_file(tmp_path / "tasks.jsonl", tmp_path / "g2.jsonl", tmp_path / "d" / "r.jsonl", cfg, backend=GxxBackend())
    assert load_results(tmp_path / "d" / "r.jsonl")[0].status.value == "passed"


def test_invalid_task_record_is_reported_by_id(run_files, make_record):
    tmp_path, cfg = run_files
    bad = make_record(82, outputs=[])
    (tmp_path / "t82.jsonl").write_text(json.dumps(bad) + "\n")
    save_generations(tmp_path / "g82.jsonl", [gen(82, 0, program())])
    s = evaluate_file(tmp_path / "t82.jsonl", tmp_path / "g82.jsonl", tmp_path / "e" / "r.jsonl", cfg,
                      backend=GxxBackend())
    (row,) = s.skipped_tasks
    assert row["task_id"] == 82 and "declares no outputs" in row["reason"] and "t82.jsonl:1" in row["reason"]


def test_reasoning_models_traces_unclosed_traces_and_token_averages(tmp_path):
    save_tasks([make_task(1)], tmp_path / "tasks.jsonl")
    good = program(256)
    quoted = f"<think>\nDraft:\n```cpp\n{program(256, body='y[i] = 0;')}```\n</think>\n"  # a wrong draft in the trace
    gens = [
        GenerationRecord(1, "Axpb", 0, "m", 1, quoted + f"```cpp\n{good}```", None, 100, "stop", 0.1,
                         reasoning="Draft", reasoning_tokens=30),
        GenerationRecord(1, "Axpb", 1, "m", 1, "<think>\nDraft:\n```cpp\n" + good + "```\nand then", None, 150,
                         "length", 0.1, reasoning="Draft", reasoning_tokens=150),   # cut inside the trace
        GenerationRecord(1, "Axpb", 2, "m", 1, "No code here.", None, 50, "stop", 0.1, reasoning="x",
                         reasoning_tokens=50),
    ]
    save_generations(tmp_path / "gens.jsonl", gens)
    cfg = EvalConfig(ExecutionConfig(backend="cpu", workers=1), cache_dir=str(tmp_path / "cache"), progress=False, extract="default")
    s = evaluate_file(tmp_path / "tasks.jsonl", tmp_path / "gens.jsonl", tmp_path / "out" / "results.jsonl", cfg,
                      backend=GxxBackend())
    results = {r.sample: r for r in load_results(tmp_path / "out" / "results.jsonl")}
    assert results[0].status.value == "passed"   # the answer's program, not the wrong draft in the trace
    assert results[1].status.value == "no_code" and results[1].detail.startswith("unterminated reasoning")
    assert results[2].status.value == "no_code" and results[2].detail == "no code was extracted from the response"
    assert s.meta["no_code_reasons"] == {"unterminated_reasoning": 1, "no_code": 1}
    assert s.overall["avg_tokens"] == 100.0
    assert s.overall["avg_reasoning_tokens"] == pytest.approx((30 + 150 + 50) / 3)
    assert s.overall["avg_answer_tokens"] == pytest.approx((70 + 0 + 0) / 3)
    report = (tmp_path / "out" / "report.md").read_text()
    assert "of which reasoning 77 and answer (code and prose) 23" in report
    assert "No code because the reasoning never ended" in report and "1 sample(s) of the 2 without code" in report


def test_results_judged_by_another_evaluator_are_judged_again(run_files):
    from cuset.evaluate.judge import current_judge

    tmp_path, cfg = run_files
    out = tmp_path / "out" / "results.jsonl"

    def run(backend=None, config=cfg):
        seen = []
        s = evaluate_file(tmp_path / "tasks.jsonl", tmp_path / "gens.jsonl", out, config,
                          backend=backend or GxxBackend(), on_result=seen.append)
        return s, seen

    s, _ = run()
    judge = current_judge(cfg, GxxBackend())
    assert s.meta["judge"] == judge and {r.judge for r in load_results(out)} == {judge}
    assert run()[1] == []                                   # the same judge: nothing again
    # another backend toolchain (here: its flags) judges every sample again; the file keeps one line each
    s, seen = run(GxxBackend(flags=("-O0",)))
    assert len(seen) == 10 and s.meta["rejudged"] == 10 and s.meta["resumed"] == 0
    assert len(out.read_text().splitlines()) == 10
    assert {r.judge for r in load_results(out)} == {current_judge(cfg, GxxBackend(flags=("-O0",)))} != {judge}
    run()
    # settings that can change a verdict make another judge; parallelism and caches do not
    for change in ({"cases": [0, 1]}, {"execution.timeout_run": 30.0}, {"execution.sandbox.processes": 32}):
        other = load_config(EvalConfig, base=asdict(cfg), overrides=[f"{k}={json.dumps(v)}" for k, v in change.items()])
        assert current_judge(other, GxxBackend()) != judge, change
    for change in ({"execution.workers": 1}, {"progress": True}, {"cache_dir": str(tmp_path / "c2")}):
        other = load_config(EvalConfig, base=asdict(cfg), overrides=[f"{k}={json.dumps(v)}" for k, v in change.items()])
        assert current_judge(other, GxxBackend()) == judge, change
        assert run(config=other)[1] == []
    # a result written before judges were stamped (no field) is judged again, and only it
    lines = out.read_text().splitlines()
    first = json.loads(lines[0])
    del first["judge"]
    out.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    s, seen = run()
    assert [r.key for r in seen] == [(first["task_id"], first["sample"])] and s.meta["rejudged"] == 1


def test_the_judge_covers_the_code_and_names_real_settings():
    from cuset.evaluate import judge

    files = {str(p.relative_to(judge.PACKAGE)) for p in judge.judge_files()}
    assert {"evaluate/runner.py", "evaluate/judge.py", "execute/cpu/rewriter.py", "tasks/__init__.py",
            "generate/extract.py"} <= files
    assert any(f.startswith("execute/cpu/runtime/") and f.endswith(".h") for f in files)
    assert not any("__pycache__" in f for f in files)
    fields = {f"{prefix}{k}" for prefix, d in (("", asdict(EvalConfig())),
                                               ("execution.", asdict(EvalConfig())["execution"])) for k in d}
    assert judge.NOT_VERDICT <= fields  # a misspelt name would silently keep a setting in the judge
    settings = judge.verdict_settings(EvalConfig())
    assert "cases" in settings and "execution.timeout_run" in settings and "execution.sandbox.mode" in settings
    assert not judge.NOT_VERDICT & set(settings)
