"""Issue 37: hostile KernelBench candidates through `cuset eval`, next to honest ones.

Each hostile sample attacks the evaluator around the candidate's run (its verdict
file, its output files, the results writer, the static check, the cleanup); the
honest samples before and after it must keep their verdicts, the run must finish
with a summary and resume without evaluating anything again, every hostile sample
must stay in the Pass@k denominator, and neither a planted root-only file nor an
environment token of the evaluating process may appear anywhere under --out.

Every candidate keeps relu_ok's load_inline call: one extension build (cached in
the user cache dir, shared with tests/execute/test_kernelbench_exec.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import torch  # noqa: E402  (a required dependency: a broken install must fail, not skip)

from typer.testing import CliRunner  # noqa: E402

from cuset.cli.main import app  # noqa: E402
from cuset.evaluate.records import load_results  # noqa: E402
from sandbox_tools import needs_bwrap  # noqa: E402  (by the tool installed, never cuset's own probe)
from cuset.generate.records import GenerationRecord, save_generations  # noqa: E402
from cuset.tasks import KernelBenchTask, save_tasks  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench"
REFERENCE = (FIXTURES / "relu_ref.py").read_text()
RELU_OK = (FIXTURES / "relu_ok.py").read_text()
HEAD, MODEL_NEW = RELU_OK.split("class ModelNew")
MODEL_NEW = "class ModelNew" + MODEL_NEW
SECRET = "CUSET-KB-SECRET-5d1e"
TOKEN = "CUSET-KB-TOKEN-93b7"



def at_import(code: str) -> str:
    """A candidate that runs `code` when the harness imports it (before ModelNew exists)."""
    return HEAD + "import json, os\nCFG = json.load(open('config.json'))\n" + code + "\n" + MODEL_NEW


def claim(text: str) -> str:
    """A candidate that writes its own verdict.json and ends the harness before it writes one."""
    return at_import(f"open(CFG['verdict_path'], 'w').write({text!r})\nos._exit(0)")


# name -> (candidate, expected status, a phrase of the expected detail)
SAMPLES = {
    "honest": (RELU_OK, "passed", ""),
    "verdict_not_an_object": (claim("[1, 2]"), "runtime_error", "holds a JSON list, not an object"),
    "claims_infra_error": (claim('{"status": "infra_error", "detail": "not me"}'), "runtime_error",
                           "claims status 'infra_error'"),
    "verdict_fifo": (at_import("os.mkfifo(CFG['verdict_path'])\nos._exit(0)"), "runtime_error", "is a fifo"),
    "verdict_dev_zero": (at_import("os.symlink('/dev/zero', CFG['verdict_path'])\nos._exit(0)"), "runtime_error",
                         "is a symbolic link"),
    "verdict_huge": (at_import("f = open(CFG['verdict_path'], 'wb')\nf.truncate(64 << 20)\nf.close()\nos._exit(0)"),
                     "runtime_error", "more than the"),
    # outputs and progress linked to a root-only host file (SECRETFILE), then a finished run claimed
    "output_links_to_secret": (at_import(
        "os.makedirs(CFG['outputs_dir'])\n"
        "os.symlink('SECRETFILE', os.path.join(CFG['outputs_dir'], 'c0_t0.json'))\n"
        "os.symlink('SECRETFILE', os.path.join(CFG['outputs_dir'], 'c0_t0.safetensors'))\n"
        "os.remove(CFG['progress_path'])\nos.symlink('SECRETFILE', CFG['progress_path'])\n"
        "open(CFG['verdict_path'], 'w').write('{\"status\": \"ran\"}')\nos._exit(0)"),
        "runtime_error", "is a symbolic link"),
    # an exception message holding a lone surrogate (json.loads gives it back as one)
    "surrogate_in_message": (HEAD + MODEL_NEW.replace("assert x.is_cuda", "raise RuntimeError('bad \\udc80 byte')"),
                             "runtime_error", "bad \ufffd byte"),
    # the evaluating process's environment (the token) printed: the sandbox never had it
    "prints_environment": (at_import("import sys\nprint(dict(os.environ), file=sys.stderr)\n"
                                     "raise SystemExit(repr(dict(os.environ)))"), "runtime_error", "SystemExit"),
    "deep_expression": (RELU_OK + "\nDEEP = 1" + "+1" * 200_000 + "\n", "compile_error", "nests expressions too deeply"),
    # 3000 levels of directories left in the run dir; otherwise honest
    "deep_tree": (at_import("for _ in range(3000):\n    os.mkdir('d')\n    os.chdir('d')\n"
                            "os.chdir(os.path.dirname(CFG['verdict_path']))"), "passed", ""),
    # class 2: limits of the run and of the builds (this run: 16 MiB of disk, 1 GiB of memory per run)
    "writes_2gb": (at_import("buf = b'\\0' * (1 << 20)\ntry:\n    for i in range(2048):\n"
                             "        open(f'f{i}', 'wb').write(buf)\nexcept OSError:\n    pass"), "disk_limit",
                   "filled its 16 MiB disk quota"),
    # 64 MiB written to the runtime's diagnostics channel (an fd the candidate is told): it lives in the
    # run dir and counts against its quota, not the host's /tmp; freed again, the honest run passes
    # (before its extension loads: the CPU runtime then takes the fd over)
    "diag_channel_fill": ("import os\nfd = int(os.environ['CUSET_CPU_DIAG_FD'])\nbuf = b'd' * (1 << 20)\nn = 0\n"
                          "try:\n    for _ in range(64):\n        n += os.write(fd, buf)\nexcept OSError:\n"
                          "    pass\nos.ftruncate(fd, 0)\n"
                          "if n >= 64 << 20:\n    raise SystemExit('64 MiB written outside the quota')\n" + RELU_OK,
                          "passed", ""),
    "three_children": (at_import("kids = []\nfor _ in range(3):\n    pid = os.fork()\n    if pid == 0:\n"
                                 "        x = b'x' * (400 << 20)\n        import time; time.sleep(2)\n"
                                 "        os._exit(0)\n    kids.append(pid)\nfor k in kids:\n    os.waitpid(k, 0)"),
                       "memory_limit", "used more than their memory budget"),
    "fork_bomb": (at_import("try:\n    while True:\n        if os.fork() == 0:\n            import time\n"
                            "            time.sleep(60)\n            os._exit(0)\nexcept OSError:\n    pass\n"
                            "raise SystemExit('forks refused')"), "runtime_error", "forks refused"),
    # ten load_inline calls in functions never called: only MAX_STATIC_BUILDS are built before the run,
    # and a build the parent refuses decides the verdict before any run (the candidate's process could
    # hide a refusal it met at run time: docs/sandbox.md, "Verdict channels"), dead code or not
    "unused_load_inline_calls": (RELU_OK + "".join(
        f"\ndef dead{i}():\n    return load_inline(name='dead{i}', cpp_sources='int f();', functions=['not a name'])\n"
        for i in range(10)), "unsupported", "a refusal decides the verdict"),
    # extensions computed at run time, one request each. Each request ends the run (the except
    # never runs): relu and e0..e3 are built in the sample's 4 request rounds, the request for e4 is refused.
    "many_runtime_extensions": (at_import(
        "for i in range(12):\n    try:\n        load_inline(name=f'e{i}', cpp_sources=f'int e{i}() {{ return {i}; }}',"
        " functions=[f'e{i}'])\n    except BaseException:\n        pass"), "compile_error",
        "still asks for extensions after 4 request rounds, the most one sample may have"),
    "honest (after)": (RELU_OK, "passed", ""),
}
PASSING = [name for name, (_, status, _) in SAMPLES.items() if status == "passed"]


def _eval(files: Path):
    return CliRunner().invoke(app, ["eval", str(files / "tasks.jsonl"), str(files / "gens.jsonl"), "--out",
                                    str(files / "out"), "--backend", "cpu", "execution.workers=2", "progress=false",
                                    "execution.timeout_run=60", "execution.timeout_compile=600", f"workdir={files / 'work'}",
                                    "execution.sandbox.run_disk_mb=16", "execution.sandbox.program_memory_gb=1"])


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    files = tmp_path_factory.mktemp("kb-hostile")
    secret = files / "secret.txt"
    secret.write_text(SECRET + "\n")
    os.chmod(secret, 0o600)
    task = KernelBenchTask("kb_relu", "ReLU", REFERENCE, n_trials=2)
    save_tasks([task], files / "tasks.jsonl")
    names = list(SAMPLES)
    save_generations(files / "gens.jsonl", [
        GenerationRecord("kb_relu", "ReLU", i, "m", 1, "", SAMPLES[name][0].replace("SECRETFILE", str(secret)),
                         10, "stop", 0.1) for i, name in enumerate(names)])
    os.environ["CUSET_PLANTED_TOKEN"] = TOKEN
    try:
        first = _eval(files)
        second = _eval(files)   # the resume: nothing left to evaluate
    finally:
        del os.environ["CUSET_PLANTED_TOKEN"]
    results = {names[r.sample]: r for r in load_results(files / "out" / "results.jsonl")}
    return files, first, second, results


@needs_bwrap
def test_the_run_completes_and_resumes(evaluated):
    files, first, second, results = evaluated
    assert first.exit_code == 0, first.output
    assert second.exit_code == 0, second.output
    assert sorted(results) == sorted(SAMPLES)
    summary = json.loads((files / "out" / "summary.json").read_text())
    assert summary["meta"]["evaluated_now"] == 0 and summary["meta"]["resumed"] == len(SAMPLES)
    assert summary["meta"]["evaluator_failures"] == 0
    # every hostile sample stays in the denominator
    assert summary["infra_errors"] == [] and summary["skipped_tasks"] == []
    assert summary["tasks"]["kb_relu"]["n"] == len(SAMPLES)
    assert summary["overall"]["function@1"] == pytest.approx(len(PASSING) / len(SAMPLES))
    assert list((files / "work").iterdir()) == [], "the workspace (with the run dirs) was left behind"


@needs_bwrap
@pytest.mark.parametrize("name", list(SAMPLES))
def test_each_sample_gets_its_own_verdict(evaluated, name):
    _, _, _, results = evaluated
    r = results[name]
    _, status, phrase = SAMPLES[name]
    assert r.status.value == status, (name, r.status, r.detail)
    assert phrase in r.detail, (name, r.detail)


@needs_bwrap
def test_unused_calls_are_not_all_built_before_the_run(evaluated):
    from cuset.execute.kernelbench.verify import MAX_STATIC_BUILDS

    steps = evaluated[3]["unused_load_inline_calls"].steps
    # one verification: relu and three of the ten dead calls (refused as unsupported without
    # compiling), then no candidate run: the parent's refusal decides before it
    assert MAX_STATIC_BUILDS == 4 and sum(s.name == "compile" for s in steps) == MAX_STATIC_BUILDS
    assert sum(s.name.startswith("kernelbench[") for s in steps) == 0


@needs_bwrap
def test_no_planted_secret_under_the_output_dir(evaluated):
    files, _, _, _ = evaluated
    found = [p for p in (files / "out").rglob("*") if p.is_file()
             and (SECRET.encode() in p.read_bytes() or TOKEN.encode() in p.read_bytes())]
    assert found == []
    # the environment was printed: the sandbox's own (HOME in the run dir), never the evaluator's
    printed = [s.stderr for s in evaluated[3]["prints_environment"].steps if s.name.startswith("kernelbench[")]
    assert printed and "'HOME':" in printed[0]
