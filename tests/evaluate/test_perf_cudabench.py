"""perf=true for CUDABench programs: the run under Nsight Compute, end to end.

No GPU here, so the command boundary is substituted: the g++ test backend stands in for
nvcc and the GPU (named "gpu", so measure() profiles), and a fake `ncu` on PATH (a shell
script) checks the arguments cuset passes, runs the program inside the sandbox as ncu
would, and writes a recorded CSV (tests/fixtures/perf) to its --log-file. The recorded
rows' expected values are the hand-computed ones of tests/execute/test_perf_ncu.py:
ncu_two_kernels.csv scores 0.5 (BU 0.5, CE 3.6e11 / 12.288e12 = 0.029296875) over 3 launches.
Each hostile-output path (malformed, oversized, a link, forged beyond the peak, no CSV,
no permission, a timeout, wrong outputs only under the profiler) gives a named perf
status; none raises. The `gpu` test profiles a bundled CUDABench reference with the real ncu.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from eval_fakes import GxxBackend, make_task, needs_gxx, program
from cuset.evaluate import EvalConfig, evaluate_file, load_results
from cuset.evaluate.config import ExecutionConfig
from cuset.evaluate.perf import cudabench_runner
from cuset.evaluate.perf.measure import measure
from cuset.evaluate.perf.options import PerfOptions
from cuset.evaluate.perf.records import NCU_NOT_INSTALLED, NOT_ON_CPU
from cuset.evaluate.options import EvalOptions
from cuset.evaluate.workspace import Workspace
from cuset.execute.compile_cache import CompileCache
from cuset.execute.perf.ncu import NCU_METRICS
from cuset.execute.result import ExecResult, Status
from cuset.generate.records import GenerationRecord, save_generations
from cuset.tasks import save_tasks

pytestmark = needs_gxx
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "perf"
TWO_KERNELS = (FIXTURES / "ncu_two_kernels.csv").read_text()
PASSED = ExecResult(Status.PASSED)


class GxxOnGpu(GxxBackend):
    """The g++ backend under the GPU backend's name: measure() profiles what it runs."""

    name = "gpu"
    device = "0"


def fake_ncu(where: Path, action: str, csv_text: str = TWO_KERNELS) -> Path:
    """An `ncu` that checks cuset's arguments, runs the program (telling it it is profiled)
    and then does `action` with "$log" (the --log-file) and "$rc" (the program's exit)."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "recorded.csv").write_text(csv_text)
    script = where / "ncu"
    script.write_text(f"""#!/bin/sh
[ "$1" = "--metrics" ] && [ "$2" = "{','.join(NCU_METRICS)}" ] || {{ echo "fake ncu: metrics $2" >&2; exit 97; }}
[ "$3" = "--csv" ] && [ "$4" = "--log-file" ] || {{ echo "fake ncu: args $3 $4" >&2; exit 97; }}
log="$5"; shift 5
FAKE_UNDER_NCU=1 "$@"; rc=$?
{action}
exit $rc
""")
    script.chmod(0o755)
    return script


WRITE_CSV = 'cat "$(dirname "$0")/recorded.csv" > "$log"'


@pytest.fixture(scope="module")
def machinery(tmp_path_factory):
    root = tmp_path_factory.mktemp("cbperf")
    backend = GxxOnGpu()
    with Workspace(root / "ws") as ws, CompileCache(backend, root / "cache") as cache:
        def profile(code=None, action=WRITE_CSV, csv_text=TWO_KERNELS, name="ncu", **perf):
            ncu = fake_ncu(root / f"bin-{len(list(root.glob('bin-*')))}", action, csv_text)
            return measure(make_task(), code or program(), PASSED, backend,
                           PerfOptions(ncu=str(ncu) if name == "ncu" else name, **perf),
                           eval_options=EvalOptions(), cache=cache, workspace=ws)
        yield profile


def test_a_passing_program_is_profiled_and_scored_from_the_recorded_rows(machinery):
    perf = machinery()
    assert perf["status"] == "measured", perf
    assert perf["kind"] == "cudabench" and perf["launches"] == 3 and perf["device"]
    roof = perf["roofline"]
    assert roof["kernel"].startswith("saxpy")
    assert roof["score"] == pytest.approx(0.5) and roof["bandwidth_utilisation"] == pytest.approx(0.5)
    assert roof["compute_efficiency"] == pytest.approx(0.029296875)
    copy = next(k for k in roof["kernels"] if k["kernel"].startswith("copy"))
    assert (copy["score"], copy["compute_efficiency"]) == pytest.approx((0.75, 0.0))


def test_ncu_messages_around_the_table_are_skipped(machinery):
    noisy = "==PROF== Connected to process 4242\n" + TWO_KERNELS + "==PROF== Disconnected from process 4242\n"
    assert machinery(csv_text=noisy)["roofline"]["score"] == pytest.approx(0.5)


def test_malformed_csv_is_unreadable_naming_line_and_field(machinery):
    bad = TWO_KERNELS.replace('"30,000,000,000"', '"lots"', 1)
    perf = machinery(csv_text=bad)
    assert perf["status"] == "unreadable"
    assert "ncu.csv:" in perf["reason"] and "'lots', not a number" in perf["reason"]
    lacking = "\n".join(line for line in TWO_KERNELS.splitlines() if "fmul" not in line)
    perf = machinery(csv_text=lacking)
    assert perf["status"] == "unreadable" and "lacks smsp__sass_thread_inst_executed_op_fmul" in perf["reason"]
    assert machinery(csv_text="garbage,\x00\xff\n")["status"] == "unreadable"


def test_oversized_csv_is_refused_unread(machinery, monkeypatch):
    monkeypatch.setattr(cudabench_runner, "NCU_CSV_LIMIT", 4096)
    perf = machinery()
    assert perf["status"] == "unreadable"
    assert f"holds {len(TWO_KERNELS.encode())} bytes, more than the 4096 allowed" in perf["reason"]


def test_a_link_in_place_of_the_csv_is_not_followed(machinery):
    perf = machinery(action='ln -s /etc/passwd "$log"')
    assert perf["status"] == "unreadable" and "symbolic link" in perf["reason"]


def test_no_csv_at_all(machinery):
    perf = machinery(action='echo "==WARNING== No kernels were profiled." >&2')
    assert perf["status"] == "unreadable" and "ncu wrote no ncu.csv" in perf["reason"]
    assert "No kernels were profiled" in perf["reason"]


def test_a_forged_csv_beyond_the_peak_is_not_believed(machinery):
    forged = TWO_KERNELS.replace('"30,000,000,000"', '"640,000,000,000"')
    perf = machinery(csv_text=forged)
    assert perf["status"] == "unbelievable" and "is outside [0, 1.5]" in perf["reason"]


def test_no_permission_for_the_counters_is_named(machinery):
    message = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters"
    in_log = machinery(action=f'echo "{message}" > "$log"')   # ncu's --log-file, the program ran fine
    on_stderr = machinery(action=f'echo "{message}" >&2; rc=1')
    for perf in (in_log, on_stderr):
        assert perf["status"] == "failed" and "ERR_NVGPUCTRPERM" in perf["reason"]
        assert "NVreg_RestrictProfilingToAdminUsers=0" in perf["reason"]


def test_a_profile_that_hangs_stops_at_its_own_timeout(machinery):
    perf = machinery(action="sleep 30", profile_timeout=1.5)
    assert perf["status"] == "failed" and "still running after 1.5 s" in perf["reason"]


def test_outputs_are_checked_again_on_the_profiled_run(machinery):
    # correct unprofiled, wrong when it finds itself under the profiler
    cheat = program(extra="#include <cstdlib>",
                    body='y[i] = getenv("FAKE_UNDER_NCU") ? 0.0f : 2.0f * x[i] + 1.0f;')
    perf = machinery(code=cheat)
    assert perf["status"] == "failed" and perf["reason"].startswith("on the profiled run, compare.py")


def test_without_ncu_each_record_says_so_and_the_cpu_backend_profiles_nothing(machinery, monkeypatch):
    assert machinery(name="no-such-ncu-here") == {"status": "not_measured", "kind": "cudabench",
                                                  "reason": NCU_NOT_INSTALLED}
    assert measure(make_task(), program(), PASSED, "cpu", PerfOptions())["reason"] == NOT_ON_CPU


def gen(task_id, sample, code):
    return GenerationRecord(task_id, "Axpb", sample, "m", 1, f"```cpp\n{code}```", code, 10, "stop", 0.1)


def test_cuset_eval_perf_true_records_reports_and_compares(tmp_path, monkeypatch):
    """`evaluate_file` with perf=true and the fake ncu on PATH (as `ncu`): results.jsonl,
    summary.json, report.md, and `cuset report --compare` over two such runs."""
    from cuset.analysis.report import build_report
    from cuset.analysis.results import load_runs

    ncu = fake_ncu(tmp_path / "bin", WRITE_CSV)
    monkeypatch.setenv("PATH", f"{ncu.parent}{os.pathsep}{os.environ['PATH']}")
    save_tasks([make_task(1), make_task(2, n=128)], tmp_path / "tasks.jsonl")
    save_generations(tmp_path / "gens.jsonl", [gen(1, 0, program()), gen(1, 1, program(body="y[i] = 0;")),
                                               gen(2, 0, program(128)), gen(2, 1, program(128))])
    cfg = EvalConfig(ExecutionConfig(backend="cpu", workers=2), cache_dir=str(tmp_path / "cache"), progress=False, perf=True)
    out = tmp_path / "run" / "results.jsonl"
    evaluate_file(tmp_path / "tasks.jsonl", tmp_path / "gens.jsonl", out, cfg, backend=GxxOnGpu())
    results = {r.key: r for r in load_results(out)}
    assert results[(1, 0)].perf["status"] == "measured" and results[(1, 0)].perf["roofline"]["score"] == 0.5
    assert results[(1, 1)].perf == {"status": "not_measured", "kind": "cudabench",
                                    "reason": "not timed: the program did not pass"}
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    line = next(d for d in lines if (d["task_id"], d["sample"]) == (1, 0))   # per-sample metrics in results.jsonl
    assert line["perf"]["roofline"]["kernels"][0]["launches"] in (1, 2) and line["perf"]["launches"] == 3
    summary = json.loads((out.parent / "summary.json").read_text())
    cb = summary["overall"]["perf"]["cudabench"]
    # 3 of 4 samples passed and were measured at 0.5; the official mean scores the failure 0
    assert (cb["n_passed"], cb["n_measured"]) == (3, 3)
    assert cb["mean_score"] == pytest.approx(0.5) and cb["mean_bandwidth_utilisation"] == pytest.approx(0.5)
    assert cb["mean_compute_efficiency"] == pytest.approx(0.029296875)
    assert cb["mean_score_all"] == pytest.approx(1.5 / 4)
    report = (out.parent / "report.md").read_text()
    assert "### CUDABench (Nsight Compute roofline)" in report
    assert "| 3 of 3 | 0.500 | 0.500 | 0.029 | 0.375 |" in report
    # a second run where task 2's samples fail: --compare sees the roofline score per task
    save_generations(tmp_path / "gens2.jsonl", [gen(1, 0, program()), gen(1, 1, program()),
                                                gen(2, 0, program(128, body="y[i] = 0;")),
                                                gen(2, 1, program(128, body="y[i] = 0;"))])
    out2 = tmp_path / "run2" / "results.jsonl"
    evaluate_file(tmp_path / "tasks.jsonl", tmp_path / "gens2.jsonl", out2, cfg, backend=GxxOnGpu())
    runs = load_runs([out.parent, out2.parent], ["model=m,method=SFT", "model=m,method=CuSeT"])
    assert runs[0].task_metrics["1"]["roofline_score"] == pytest.approx(0.25)   # (0.5 + 0) / 2
    assert runs[1].task_metrics["2"]["roofline_score"] == 0.0
    doc = build_report(runs, tmp_path / "report", published_mode="none")
    rows = {r["metric"]: r for r in doc["paired"][0]["rows"]}
    assert rows["roofline_score"]["mean_a"] == pytest.approx((0.25 + 0.5) / 2)
    assert rows["roofline_score"]["mean_b"] == pytest.approx((0.5 + 0.0) / 2)
    md = (tmp_path / "report" / "report.md").read_text()
    device = results[(1, 0)].perf["device"]   # the host's nvidia-smi's word (here: none), never the CSV's
    assert f"| 1 | on {device} | n/a | n/a | n/a | n/a | 0.500 | 0.500 | 0.029 |" in md
