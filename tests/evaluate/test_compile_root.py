"""Issue 37, class 3: the compile step sees only what compilers need.

A world-readable file planted outside the system directories (here under /srv, which
the host's read-only root used to show every compile step) is embedded by a CUDABench
program and by a KernelBench extension through directives the string check cannot see
(`\\056incbin`: an octal-escaped dot) and through `#include` of its absolute path. In
the minimal root (MINIMAL_ROOT plus the toolchain's own paths) the file does not exist:
each is a compile error, the honest samples of the same `cuset eval` run pass, and the
planted text appears nowhere under --out.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

import torch  # noqa: E402  (a required dependency: a broken install must fail, not skip)

from typer.testing import CliRunner  # noqa: E402

from cuset.cli.main import app  # noqa: E402
from cuset.evaluate.records import load_results  # noqa: E402
from cuset.execute.sandbox import MINIMAL_ROOT, compile_policy, run_compiler  # noqa: E402
from sandbox_tools import needs_bwrap  # noqa: E402  (by the tool installed, never cuset's own probe)
from cuset.generate.records import GenerationRecord, save_generations  # noqa: E402
from cuset.tasks import KernelBenchTask, save_tasks  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ADVERSARIAL = ROOT / "fixtures" / "adversarial"
KB = ROOT / "fixtures" / "kernelbench"
PLANTED = "CUSET-PLANTED-WORLD-READABLE-41c8"


# the planted file, embedded by the assembler; `\056` is the '.' the string check looks for
EMBED = ('__asm__("\\056pushsection \\056rodata\\n\\056globl cuset_leak\\ncuset_leak:\\n\\056incbin '
         '\\"PATH\\"\\n\\056byte 0\\n\\056popsection");\nextern "C" const char cuset_leak[];\n')


def _cuda_programs(path: Path) -> dict[str, str]:
    reference = (ADVERSARIAL / "reference.cu").read_text()
    leak = reference.replace("int main() {", EMBED.replace("PATH", str(path)) +
                             'int main() {\n    fputs(cuset_leak, stdout);')
    include = reference.replace("int main() {", f'#include "{path}"\nint main() {{')
    return {"cuda_reference": reference, "cuda_incbin_octal": leak, "cuda_include_absolute": include}


def _kernelbench_candidates(path: Path) -> dict[str, str]:
    ok = (KB / "relu_ok.py").read_text()
    leak = ok.replace('relu_source = """\n', 'relu_source = r"""\n' + EMBED.replace("PATH", str(path))).replace(
        "    CHECK_CUDA(x);\n    TORCH_CHECK(x.device()", "    TORCH_CHECK(false, cuset_leak);\n    TORCH_CHECK(x.device()")
    assert leak != ok and "cuset_leak" in leak.split("relu_cuda(torch::Tensor x)")[1]
    return {"kb_honest": ok, "kb_incbin_octal": leak}


@pytest.fixture(scope="module")
def planted():
    """A world-readable file outside every path a compile step needs."""
    if not os.access("/srv", os.W_OK):
        pytest.skip("/srv is not writable here: nowhere to plant a host file the old root showed")
    where = Path(tempfile.mkdtemp(prefix="cuset-planted-", dir="/srv"))
    os.chmod(where, 0o755)
    path = where / "planted.h"
    path.write_text(f'static const char planted[] = "{PLANTED}";\n{PLANTED}\n')
    os.chmod(path, 0o644)
    yield path
    shutil.rmtree(where)


@pytest.fixture(scope="module")
def evaluated(planted, tmp_path_factory):
    files = tmp_path_factory.mktemp("compile-root")
    cuda_task = json.loads((ADVERSARIAL / "task.json").read_text())
    kb_task = KernelBenchTask("kb_relu", "ReLU", (KB / "relu_ref.py").read_text(), n_trials=2)
    (files / "tasks.jsonl").write_text(json.dumps(cuda_task) + "\n" + json.dumps(kb_task.to_json()) + "\n")
    gens, names = [], {}
    for task_id, task_name, programs in ((900, cuda_task["task_name"], _cuda_programs(planted)),
                                         ("kb_relu", "ReLU", _kernelbench_candidates(planted))):
        for sample, (name, code) in enumerate(programs.items()):
            gens.append(GenerationRecord(task_id, task_name, sample, "m", 1, "", code, 10, "stop", 0.1))
            names[task_id, sample] = name
    save_generations(files / "gens.jsonl", gens)
    res = CliRunner().invoke(app, ["eval", str(files / "tasks.jsonl"), str(files / "gens.jsonl"), "--out",
                                   str(files / "out"), "--backend", "cpu", "execution.compile_judge=backend", "execution.workers=2",
                                   "progress=false", "execution.timeout_compile=600", f"workdir={files / 'work'}",
                                   # a compile cache of its own: the honest programs are built in the minimal
                                   # root on every run (the precompiled headers stay shared)
                                   f"cache_dir={files / 'cache'}"])
    results = {names[r.task_id, r.sample]: r for r in load_results(files / "out" / "results.jsonl")}
    return files, res, results


@needs_bwrap
def test_honest_programs_pass_and_embedded_host_files_do_not_compile(evaluated):
    files, res, results = evaluated
    assert json.loads((files / "out" / "summary.json").read_text())["meta"]["compile_cache"]["hits"] == 0
    assert res.exit_code == 0, res.output
    statuses = {name: r.status.value for name, r in results.items()}
    assert statuses == {"cuda_reference": "passed", "cuda_incbin_octal": "compile_error",
                        "cuda_include_absolute": "compile_error", "kb_honest": "passed",
                        "kb_incbin_octal": "compile_error"}, {n: r.detail[:300] for n, r in results.items()}
    assert "No such file or directory" in results["cuda_include_absolute"].detail
    for name in ("cuda_incbin_octal", "kb_incbin_octal"):   # the assembler's own error, past the string check
        assert "Assembler messages" in results[name].detail, results[name].detail


@needs_bwrap
def test_the_planted_file_appears_nowhere_under_out(evaluated):
    files, _, _ = evaluated
    leaked = [p for p in (files / "out").rglob("*") if p.is_file() and PLANTED.encode() in p.read_bytes()]
    assert leaked == []


@needs_bwrap
def test_the_compile_root_holds_the_system_and_the_build_dir_only(tmp_path, planted):
    probe = ("for p in / /etc /srv /work /root /home /opt; do echo \"$p: $(ls -A $p 2>/dev/null | tr '\\n' ' ')\";"
             " done; cat " + str(planted) + " || echo unreadable")
    step = run_compiler(["sh", "-c", probe], build_dir=tmp_path, timeout=60, policy=compile_policy(60))
    listing = dict(line.split(": ", 1) for line in step.stdout.splitlines() if ": " in line)
    visible_top = {Path(p).parts[1] for p in MINIMAL_ROOT if os.path.lexists(p)}
    assert set(listing["/"].split()) == visible_top | {"dev", "proc", "tmp"}
    assert set(listing["/etc"].split()) == {Path(p).name for p in MINIMAL_ROOT if p.startswith("/etc/")
                                           and os.path.lexists(p)}
    assert listing["/srv"] == listing["/work"] == listing["/root"] == listing["/home"] == listing["/opt"] == ""
    assert "unreadable" in step.stdout and PLANTED not in step.stdout
