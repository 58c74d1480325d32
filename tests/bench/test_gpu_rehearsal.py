"""bench/gpu_rehearsal.py: the CPU dry run of every stage through the CLI, the stage runner's
handling of failures, time-outs, checks, dependencies and the budget, and the GPU recipe in
docs/gpu.md being the rehearsal's own command lines."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from .scripts import load_bench_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu_rehearsal.py"


@pytest.fixture(scope="module")
def rehearsal():
    yield load_bench_script("gpu_rehearsal")
    sys.modules.pop("gpu_rehearsal", None)


# --- the documented recipe -------------------------------------------------------------------------

def test_documented_gpu_recipe_is_the_rehearsals_command_lines(rehearsal, capsys):
    assert rehearsal.main(["--print-commands", "--out", str(ROOT / "runs" / "rehearsal")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == len(rehearsal.STAGES)
    page = (ROOT / "docs" / "gpu.md").read_text()
    marker = page.index("python bench/gpu_rehearsal.py --print-commands --out runs/rehearsal")
    block = re.search(r"```bash\n(.*?)```", page[marker:], re.S)
    assert block, "docs/gpu.md: no ```bash block after the --print-commands line"
    recipe = [ln for ln in block.group(1).splitlines() if ln.strip() and not ln.startswith("#")]
    assert recipe == printed


# --- the runner ------------------------------------------------------------------------------------

def python_stage(rehearsal, name, code, *, read=None, needs=(), timeout_s=120.0, skip=None):
    return rehearsal.Stage(name, f"test stage {name}", lambda plan: [sys.executable, "-c", code],
                           read or (lambda plan: {}), lambda plan: plan.path(f"{name}.done"), needs=needs,
                           skip=skip or (lambda plan: None), timeout_s=timeout_s)


def test_a_failing_stage_is_recorded_and_the_others_still_run(rehearsal, tmp_path):
    def check_fails(plan):
        raise rehearsal.CheckFailed("function@1 = 0.5, expected 1.0")

    def numbers(plan):
        return {"tokens": int((plan.out / "tokens.txt").read_text())}

    stages = (
        python_stage(rehearsal, "crash", "print('building'); print('boom: no GPU'); raise SystemExit(3)"),
        python_stage(rehearsal, "after-crash", "print('fine')", needs=("crash",)),
        python_stage(rehearsal, "hang", "import time; print('waiting', flush=True); time.sleep(600)", timeout_s=2),
        python_stage(rehearsal, "wrong-numbers", "print('done')", read=check_fails),
        python_stage(rehearsal, "numbers", f"open({str(tmp_path / 'tokens.txt')!r}, 'w').write('42')", read=numbers),
        python_stage(rehearsal, "no-vllm", "raise SystemExit(9)", skip=lambda plan: "vllm not importable"),
    )
    plan = rehearsal.Plan(replace(rehearsal.DRY_RUN, timeout_scale=1.0), tmp_path)
    results = {r.name: r for r in rehearsal.run_stages(stages, plan)}

    crash = results["crash"]
    assert (crash.status, crash.exit_code, crash.reason) == ("failed", 3, "exit 3: boom: no GPU")
    assert "building\nboom: no GPU" in crash.output_tail and Path(crash.log).read_text() == crash.output_tail
    assert (results["after-crash"].status, results["after-crash"].reason) == ("skipped", "needs crash (failed)")
    hang = results["hang"]
    assert hang.status == "failed" and hang.exit_code is None and hang.reason.startswith("timed out after 2 s")
    assert "waiting" in hang.output_tail and hang.seconds < 60
    assert (results["wrong-numbers"].status, results["wrong-numbers"].reason) == \
        ("failed", "check: function@1 = 0.5, expected 1.0")
    assert (results["numbers"].status, results["numbers"].numbers) == ("ok", {"tokens": 42})
    assert (results["no-vllm"].status, results["no-vllm"].reason, results["no-vllm"].seconds) == \
        ("skipped", "vllm not importable", None)

    machine = {"date": "2026-12-01T00:00:00+00:00", "python": "3.12", "cpus": 2, "memory_gib": 8.0, "load_start": [1.0],
               "git": {"commit": "abc", "branch": "b", "dirty": False, "source": "git"}, "gpu": None, "torch": None, "nvcc": None,
               "packages": {"torch": "2.13"}, "unmet_requirements": []}
    import datetime as dt

    summary = rehearsal.write_summary(plan, list(results.values()), machine, dt.datetime.now(dt.timezone.utc), 3.0)
    assert summary["counts"] == {"ok": 1, "failed": 3, "skipped": 2}
    assert json.loads((tmp_path / "summary.json").read_text())["stages"][0]["reason"] == "exit 3: boom: no GPU"
    md = (tmp_path / "summary.md").read_text()
    assert "| crash | failed |" in md and "| no-vllm | skipped |" in md and "| vllm not importable |" in md
    assert "Output tail:" in md and "boom: no GPU" in md


def test_only_and_the_budget_skip_stages_and_earlier_outputs_satisfy_needs(rehearsal, tmp_path):
    (tmp_path / "first.done").write_text("")  # left by an earlier run into the same --out
    stages = (python_stage(rehearsal, "first", "raise SystemExit(1)"),
              python_stage(rehearsal, "second", "print('ran')", needs=("first",)),
              python_stage(rehearsal, "missing-input", "print('ran')", needs=("third",)),
              python_stage(rehearsal, "third", "print('ran')"))
    plan = rehearsal.Plan(replace(rehearsal.DRY_RUN, timeout_scale=1.0), tmp_path)
    results = rehearsal.run_stages(stages, plan, only={"second", "missing-input"})
    assert [(r.name, r.status, r.reason) for r in results] == [
        ("first", "skipped", "not selected (--only)"),
        ("second", "ok", None),
        ("missing-input", "skipped", "needs third (unknown)"),
        ("third", "skipped", "not selected (--only)")]
    spent = rehearsal.run_stages(stages[3:], plan, budget_s=10)  # less than a stage's minimum start
    assert [(r.status, r.reason) for r in spent] == [("skipped", "rehearsal budget of 10 s spent")]


def test_a_stage_the_budget_stops_is_skipped_not_failed(rehearsal, tmp_path, monkeypatch):
    """On the first GPU run, generate-hf was stopped when the budget ran out and reported as a
    timeout failure; its own limit was far away. That is no verdict on the stage."""
    monkeypatch.setattr(rehearsal, "MIN_STAGE_START_S", 0.5)
    stages = (python_stage(rehearsal, "slow", "import time; time.sleep(60)"),)
    plan = rehearsal.Plan(replace(rehearsal.DRY_RUN, timeout_scale=1.0), tmp_path)
    (slow,) = rehearsal.run_stages(stages, plan, budget_s=2)
    assert slow.status == "skipped" and slow.timeout_s <= 2
    assert slow.reason.startswith("stopped after 2 s: the rehearsal's budget ran out (its own limit is ")
    assert slow.reason.endswith("rerun it with --only slow")


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="3">
<testcase classname="tests.execute.test_gpu" name="test_vector_add" time="1.0"/>
<testcase classname="tests.evaluate.test_perf_measure" name="test_ncu" time="9.0"><failure message="AssertionError: status unreadable">x</failure></testcase>
<testcase classname="tests.generate.test_vllm" name="test_real_vllm" time="0.1"><skipped message="vllm not installed"/></testcase>
</testsuite></testsuites>"""


def test_the_gpu_tests_stage_names_each_failing_test(rehearsal, tmp_path):
    plan = rehearsal.Plan(rehearsal.GPU, tmp_path)
    argv = rehearsal.gpu_tests_argv(plan)
    assert argv[1:6] == ["-m", "pytest", "-m", "gpu", "-v"] and f"--junitxml={tmp_path / 'gpu-tests.xml'}" in argv
    files = [a for a in argv if a.endswith(".py")]   # only files with gpu tests: no import of ray or selenium
    assert str(ROOT / "tests" / "execute" / "test_gpu.py") in files
    assert not [f for f in files if "ray" in Path(f).name]
    (tmp_path / "gpu-tests.xml").write_text(JUNIT)
    with pytest.raises(rehearsal.CheckFailed, match=r"1 of 3 GPU test\(s\) failed: tests.evaluate.test_perf_measure::"
                                                    r"test_ncu: AssertionError: status unreadable"):
        rehearsal.read_gpu_tests(plan)
    (tmp_path / "gpu-tests.xml").write_text(JUNIT.replace('<failure message="AssertionError: status unreadable">x</failure>', ""))
    assert rehearsal.read_gpu_tests(plan) == {"tests": 3, "passed": 2, "failed": 0, "skipped": 1}
    only_skips = '<testsuite tests="1"><testcase classname="a" name="b"><skipped message="no GPU"/></testcase></testsuite>'
    (tmp_path / "gpu-tests.xml").write_text(only_skips)
    with pytest.raises(rehearsal.CheckFailed, match="no GPU test passed"):
        rehearsal.read_gpu_tests(plan)


def test_commands_are_shown_as_a_user_types_them(rehearsal):
    plan = rehearsal.Plan(rehearsal.GPU, ROOT / "runs" / "rehearsal")
    by_name = {s.name: rehearsal.shown(s.argv(plan)) for s in rehearsal.STAGES}
    assert by_name["train-zero3"].startswith(
        "accelerate launch --config_file configs/accelerate/deepspeed-zero3.yaml --num_processes 1 "
        "--main_process_port 0 -m cuset.cli.main train configs/train/qwen2.5-coder-7b-instruct/cuset.yaml "
        "model.name_or_path=runs/rehearsal/model 'data.paths=[runs/rehearsal/data/train.jsonl]'")
    assert by_name["eval-kernelbench-robust"] == (
        "cuset eval runs/rehearsal/data/kernelbench-slice runs/rehearsal/data/kernelbench-answers.jsonl "
        "configs/eval/gpu.yaml --out runs/rehearsal/eval/kernelbench-robust --backend gpu execution.workers=8 progress=false "
        "robust=true")
    assert rehearsal.shown(["/elsewhere/tool", "x=/tmp/y"]) == "/elsewhere/tool x=/tmp/y"


# --- the dry run -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("rehearsal")
    committed = _bench_results()
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=3600)
    md = (out / "summary.md").read_text() if (out / "summary.md").is_file() else "(no summary.md)"
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:] + md
    # the rehearsal's bench runs keep their records in its own out dir, never in bench/results/
    assert _bench_results() == committed
    assert json.loads((out / "train-step" / "record.json").read_text())["script"] == "bench/train_step.py"
    return out, json.loads((out / "summary.json").read_text())


@pytest.mark.slow
def test_a_run_that_saved_an_empty_adapter_fails_its_stage(rehearsal, dry_run, tmp_path):
    """PEFT under accelerate's FSDP plugin once wrote an adapter without a tensor and said nothing."""
    import shutil

    from safetensors.torch import save_file

    out, _ = dry_run
    plan = rehearsal.Plan(rehearsal.DRY_RUN, tmp_path)
    shutil.copytree(out / "train" / "lora-cuset", plan.train_dir("lora-cuset"))
    for f in plan.train_dir("lora-cuset").joinpath("adapter").glob("*.safetensors"):
        save_file({}, str(f))
    with pytest.raises(rehearsal.CheckFailed, match=r"train/lora-cuset/adapter holds no tensor"):
        rehearsal.train_reader("lora-cuset", finetune="lora")(plan)


def test_each_dry_run_skip_names_a_test_that_exists(rehearsal):
    """A stage the dry run leaves to a test says which: that test must exist, or the CPU path is run nowhere."""
    plan = rehearsal.Plan(rehearsal.DRY_RUN, ROOT / "runs" / "unused")
    reasons = {s.name: s.skip(plan) for s in rehearsal.STAGES}
    named = {n: re.findall(r"(tests/[\w/]+\.py)(?:::(\w+))?", why) for n, why in reasons.items() if why}
    for stage in ("train-lora-sft", "train-full-sft", "train-zero3", "train-fsdp", "train-qlora",
                  "eval-kernelbench-robust", "eval-cudabench-robust"):
        assert named[stage], (stage, reasons[stage])
        for path, test in named[stage]:
            assert (ROOT / path).is_file(), (stage, path)
            assert not test or f"def {test}(" in (ROOT / path).read_text(), (stage, path, test)
    # the GPU run skips none of them, but for a missing package
    gpu = rehearsal.Plan(rehearsal.GPU, ROOT / "runs" / "unused")
    for s in rehearsal.STAGES:
        assert (s.skip(gpu) or " not importable").endswith(" not importable"), s.name


def _bench_results() -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (ROOT / "bench" / "results").glob("*.json")}


@pytest.mark.slow
def test_dry_run_every_stage_with_a_cpu_substitute_is_ok(rehearsal, dry_run):
    out, summary = dry_run
    assert summary["format"] == "cuset-gpu-rehearsal/1" and summary["profile"] == "dry-run"
    stages = {s["name"]: s for s in summary["stages"]}
    assert list(stages) == list(rehearsal.STAGE_NAMES)
    skipped = {"train-lora-sft": rehearsal.SFT_ON_CPU, "train-full-sft": rehearsal.SFT_ON_CPU,
               "train-zero3": rehearsal.ZERO3_ON_CPU, "train-fsdp": rehearsal.FSDP_ON_CPU,
               "train-qlora": rehearsal.QLORA_ON_CPU, "generate-vllm": rehearsal.VLLM_ON_CPU,
               "eval-kernelbench-robust": rehearsal.KB_ROBUST_ON_CPU,
               "eval-cudabench-robust": rehearsal.CB_ROBUST_ON_CPU, "gpu-tests": rehearsal.GPU_TESTS_ON_CPU,
               "kernelbench-speedups": rehearsal.KB_SPEEDUPS_ON_CPU}
    assert {n: (s["status"], s["reason"]) for n, s in stages.items() if s["status"] != "ok"} == {
        n: ("skipped", why) for n, why in skipped.items()}
    assert summary["counts"] == {"ok": len(stages) - len(skipped), "failed": 0, "skipped": len(skipped)}
    for name in ("train-lora-cuset", "train-full-cuset"):
        assert stages[name]["numbers"]["saved_tensors"] > 0, name
    for s in stages.values():
        if s["status"] == "ok":
            assert s["seconds"] > 0 and s["cpu_s"] > 0 and s["exit_code"] == 0 and Path(s["log"]).is_file(), s["name"]
            assert s["command"].startswith(("cuset ", "accelerate launch ", "python bench/")), s["command"]
    machine = summary["machine"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert machine["git"]["commit"] == head and machine["git"]["source"] == "git"
    import torch

    assert machine["torch"]["version"] == torch.__version__ and machine["torch"]["cuda_available"] is False


@pytest.mark.slow
def test_dry_run_numbers(rehearsal, dry_run):
    out, summary = dry_run
    profile = rehearsal.DRY_RUN
    n = {s["name"]: s["numbers"] for s in summary["stages"]}
    assert n["data"] == {"tasks": profile.train_tasks}
    assert n["setup"]["device"] == "cpu" and n["setup"]["pretrain_steps"] == profile.pretrain_steps
    assert n["setup"]["pretrain_loss_last"] < n["setup"]["pretrain_loss_first"]
    for name in ("train-lora-cuset", "train-full-cuset"):
        t = n[name]
        assert t["steps"] == profile.train_steps and math.isfinite(t["loss"]) and math.isfinite(t["loss_first"]), name
        assert t["steps_per_s"] > 0 and t["peak_memory_mib"]["process_rss"] > 0, name
        assert t["peak_memory_mib"]["cuda_allocated"] is None, name
    assert n["train-lora-cuset"]["strategy"]["kind"] == "single"
    assert n["train-lora-cuset"]["trainable_parameters"] < n["train-full-cuset"]["trainable_parameters"]
    assert "merged" in n["train-lora-cuset"]["outputs"]
    g = n["generate-hf"]
    n_samples = len(profile.cudabench_ids) * profile.gen_samples
    assert g["samples"] == n_samples and g["tokens"] > 0 and g["model"].endswith("train/lora-cuset/merged")
    # the pretrained opening: the samples carry a reasoning trace, and every trace's tokens are counted
    assert g["with_trace"] >= 1 and g["reasoning_tokens_counted"] == g["with_trace"]
    assert 0 < g["reasoning_tokens"] < g["tokens"]
    # known answers score as known: a correct and a wrong answer per KernelBench task, references pass
    kb_tasks = len(profile.kernelbench_ids)
    assert n["eval-kernelbench"]["function@1"] == 0.5 and n["eval-kernelbench"]["n_samples"] == 2 * kb_tasks
    assert n["eval-cudabench"]["function@1"] == 1.0 and n["eval-cudabench"]["compile@1"] == 1.0
    gen = n["eval-generated"]
    assert gen["n_samples"] == n_samples and 0.0 <= gen["function@1"] <= 1.0 and 0.0 <= gen["compile@1"] <= 1.0
    cases = n["train-step"]["cases"]
    assert set(cases) >= {"trainer:lora:-", "cuset:lora:cuset"}
    assert all(c["steps_per_s"] > 0 and c["peak_rss_mib"] > 0 and c["peak_cuda_mib"] is None for c in cases.values())


@pytest.mark.slow
def test_dry_run_markdown(dry_run):
    out, summary = dry_run
    md = (out / "summary.md").read_text()
    assert md.startswith("# cuset GPU rehearsal (dry-run)")
    for s in summary["stages"]:
        assert f"| {s['name']} | {s['status']} |" in md and s["command"] in md
    assert "function@1 0.5" in md and "Output tail:" not in md


def test_a_copy_without_git_names_its_commit_source(rehearsal, tmp_path, monkeypatch):
    monkeypatch.setattr(rehearsal, "ROOT", tmp_path)  # not a git checkout, as on a machine the tree was copied to
    monkeypatch.delenv("CUSET_COMMIT", raising=False)
    assert rehearsal.git_facts() == {"commit": None, "branch": None, "dirty": None,
                                     "source": "unknown: no git checkout"}
    monkeypatch.setenv("CUSET_COMMIT", "6251a77")
    assert rehearsal.git_facts()["commit"] == "6251a77" and rehearsal.git_facts()["source"] == "CUSET_COMMIT"


# --- the lease: order and deadline -------------------------------------------------------------------

class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def fake_runs(rehearsal, clock, seconds: dict[str, float], started: list):
    """run_stage's stand-in: a stage 'takes' its seconds on the fake clock (or its timeout, when
    shorter: then it was stopped, as the real runner stops a process group)."""
    def run(stage, plan, timeout, env, own_timeout=None):
        started.append((stage.name, clock.now, timeout))
        took = seconds.get(stage.name, 10.0)
        if took > timeout:
            clock.now += timeout
            return rehearsal.StageResult(stage.name, stage.what, "skipped", reason="stopped: budget", seconds=timeout)
        clock.now += took
        return rehearsal.StageResult(stage.name, stage.what, "ok", seconds=took)
    return run


def test_lease_order_puts_the_never_measured_first_and_needs_before_their_users(rehearsal):
    order = [s.name for s in rehearsal.lease_order(rehearsal.STAGES)]
    assert order[:4] == ["gpu-tests", "kernelbench-speedups", "train-step", "data"]
    assert order.index("setup") < order.index("eval-cudabench") < order.index("eval-cudabench-robust") \
        < order.index("generate-hf") < order.index("train-lora-sft")
    assert order.index("train-lora-cuset") < order.index("generate-hf") < order.index("eval-generated")
    assert sorted(order) == sorted(rehearsal.STAGE_NAMES)  # every stage once
    for i, name in enumerate(order):  # each stage after everything it needs
        stage = next(s for s in rehearsal.STAGES if s.name == name)
        assert all(order.index(n) < i for n in stage.needs), name


def test_lease_order_refuses_unknown_names_and_circles(rehearsal):
    stages = (python_stage(rehearsal, "a", "", needs=("b",)), python_stage(rehearsal, "b", "", needs=("a",)))
    with pytest.raises(ValueError, match="circle: a -> b -> a"):
        rehearsal.lease_order(stages, ("a",))
    with pytest.raises(ValueError, match=r"unknown stage\(s\) \['nope'\]"):
        rehearsal.lease_order(stages[:1], ("nope",))


def test_lease_dry_run_respects_its_deadline_on_a_fake_clock(rehearsal, tmp_path, monkeypatch, capsys):
    """`--lease --dry-run --budget-s 100`: stages start in lease order until less than
    MIN_STAGE_START_S is left, the last one's timeout is cut to what is left, everything after is
    skipped as over budget, and summary.json is rewritten after every stage."""
    clock = FakeClock()
    started = []
    seconds = {"gpu-tests": 0.0, "kernelbench-speedups": 0.0, "train-step": 30.0, "data": 5.0, "setup": 40.0,
               "eval-cudabench": 60.0}   # the dry run skips the first two (no CPU substitute): no time spent
    monkeypatch.setattr(rehearsal, "CLOCK", clock)
    monkeypatch.setattr(rehearsal, "run_stage", fake_runs(rehearsal, clock, seconds, started))
    monkeypatch.setattr(rehearsal, "machine_facts", lambda profile: {
        "date": "2026-12-06", "python": "3", "platform": "x", "cpus": 2, "memory_gib": 1, "load_start": [0, 0, 0],
        "git": {"commit": "abc", "branch": "b", "dirty": False, "source": "git"}, "gpu": None, "torch": None,
        "nvcc": None, "packages": {}, "unmet_requirements": []})
    snapshots = []
    real_write = rehearsal.write_summary

    def write(plan, results, machine, started_at, secs, complete=True):
        snapshots.append(([r.name for r in results], complete))
        return real_write(plan, results, machine, started_at, secs, complete)

    monkeypatch.setattr(rehearsal, "write_summary", write)
    assert rehearsal.main(["--lease", "--dry-run", "--budget-s", "100", "--out", str(tmp_path)]) == 0
    # gpu-tests and kernelbench-speedups are skipped in a dry run; train-step (30) + data (5) + setup (40)
    # leave 25 s: eval-cudabench starts with its timeout cut to 25 s and is stopped there; every
    # timeout is cut to the time left when the stage starts
    assert [(n, round(t0 - 1000.0), round(timeout)) for n, t0, timeout in started] == [
        ("train-step", 0, 100), ("data", 30, 70), ("setup", 35, 65), ("eval-cudabench", 75, 25)]
    summary = json.loads((tmp_path / "summary.json").read_text())
    stages = {s["name"]: s for s in summary["stages"]}
    assert [s["name"] for s in summary["stages"]] == [s.name for s in rehearsal.lease_order(rehearsal.STAGES)]
    assert stages["eval-cudabench"]["status"] == "skipped"
    after = [s for s in summary["stages"][summary["stages"].index(stages["eval-cudabench"]) + 1:]
             if s["reason"] not in (rehearsal.KB_ROBUST_ON_CPU, rehearsal.CB_ROBUST_ON_CPU)]
    assert after and all(s["status"] == "skipped" and s["seconds"] is None for s in after)
    assert {s["reason"] for s in after if "budget" in (s["reason"] or "")} == {"rehearsal budget of 100 s spent"}
    assert clock.now - 1000.0 <= 100.0   # nothing ran past the deadline
    # a record after every stage (not complete), then the final one
    assert [c for _, c in snapshots] == [False] * len(rehearsal.STAGES) + [True]
    assert snapshots[3] == (["gpu-tests", "kernelbench-speedups", "train-step", "data"], False)
    assert summary["complete"] is True


def test_print_order_of_a_lease(rehearsal, capsys):
    assert rehearsal.main(["--lease", "--dry-run", "--print-order"]) == 0
    assert capsys.readouterr().out.split() == [s.name for s in rehearsal.lease_order(rehearsal.STAGES)]


def test_prepare_carries_what_the_gpu_image_lacks_and_never_its_gpu_stack(rehearsal):
    import _lease_prepare as prep
    from packaging.requirements import Requirement

    assert not prep.on_image(Requirement("transformers>=5.19"))   # the image has 5.17.0
    assert prep.on_image(Requirement("accelerate>=1.0")) and prep.on_image(Requirement("tokenizers>=0.21"))
    assert not prep.on_image(Requirement("cut-cross-entropy>=25.1"))   # not on the image: carried
    assert all(prep.NEVER.match(n) for n in ("torch", "triton", "nvidia-cublas", "cuda-bindings"))
    assert not prep.NEVER.match("transformers")
    wanted = {r.name for r in prep.project_requirements()}
    assert {"cut-cross-entropy", "trl", "transformers", "deepspeed"} <= wanted and "vllm>=0.8" not in wanted
    script = prep.lease_script(Path(".whl"), "abc1234")
    assert "--target /tmp/site .whl/*.whl" in script and "gpu_rehearsal.py --lease --out /tmp/lease" in script
    assert "CUSET_COMMIT=abc1234" in script
    # at most 8 files come back from a lease: the script copies no more
    assert script.count('cp "') + script.count("cp bench/") + script.count("tar czf") + script.count('> "$OUT') <= 8
