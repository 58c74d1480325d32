"""Small eval runs for the viewer's tests, written with the records module: every status,
a strict-check mismatch, a race, a compile error mapped to a line, and a sample whose
name, detail, program and logs carry an HTML/script payload."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

from cuset.evaluate.records import SampleResult, save_results
from cuset.execute.result import Status, StepResult
from cuset.generate.records import GenerationRecord, save_generations


def _shared_conftest():
    """tests/conftest.py by its path: `import conftest` finds whichever folder's conftest
    another test package put first on sys.path (tests/evaluate inserts its own)."""
    spec = importlib.util.spec_from_file_location("cuset_tests_conftest", Path(__file__).parents[1] / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_SHARED = _shared_conftest()
BENCH_CU, make_record = _SHARED.BENCH_CU, _SHARED.make_record

# Would change the page title and set a global if it ever ran as markup (the browser test looks).
PAYLOAD = ('</script><script>window.__cuset_pwned=1;document.title="pwned"</script>'
           '<img src=x onerror="window.__cuset_pwned=2">')
STRICT_DETAIL = ("case 0: strict check: output c: 3 of 1024 elements differ from c_ref.bin (float32, rtol=1e-05, "
                 "atol=1e-08*2); first at index 7: got np.float32(1.5), expected np.float32(2.0)")
# What the evaluation records for that sample (cuset.evaluate.strict.mismatch_record's shape)
MISMATCH = {"case": 0, "order": "forward", "verdict": "plain", "check": "compare.py", "not_compared": [],
            "outputs": [{"output": "c", "reference": "c_ref.bin", "dtype": "float32", "rule": "rtol=1e-05, atol=1e-08*2",
                         "n_bad": 3, "n_total": 1024, "max_abs_error": 1.5, "first": [
                             {"index": 7, "at": "7", "got": "1.5", "expected": "2.0", "abs_error": 0.5, "rel_error": 0.25},
                             {"index": 9, "at": "9", "got": "-1.0", "expected": "0.5", "abs_error": 1.5, "rel_error": 3.0},
                             {"index": 12, "at": "12", "got": "nan", "expected": "4.0", "abs_error": None,
                              "rel_error": None}]}]}
EVIL_CODE = f"// {PAYLOAD}\nint main() {{ const char* s = \"{PAYLOAD}\"; return 1; }}\n"
RACE_DETAIL = ("case 0: outputs differ between thread orders forward, random:1; order random:1: compare.py "
               "rejected the outputs (printed 'F') (passes under forward)")
COMPILE_LOG = 'kernel.cu(4): error: identifier "idx" is undefined\n      c[idx] = a[i];\n'


def sample_result(tid, s, status, *, detail="", steps=(), name=None, family="vector", robust=None, check="",
                  mismatch=None):
    passed = status is Status.PASSED
    return SampleResult(task_id=tid, task_name=name or f"task{tid}", family=family, sample=s, status=status,
                        detail=detail, compiled=status.compiled, ran_ok=passed or status is Status.WRONG,
                        passed=passed, n_tokens=100 + s, timings={"compile": 1.0, "total": 2.5}, backend="cpu",
                        steps=tuple(steps), robust_status=robust, robust_check=check, mismatch=mismatch)


def write_eval_dir(d: Path, records, codes: dict | None = None, tasks=None, meta=None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    save_results(d / "results.jsonl", records)
    gens = [GenerationRecord(task_id=r.task_id, task_name=r.task_name, sample=r.sample, model="models/tiny-7b",
                             level=2, response=f"```cuda\n{(codes or {}).get(r.key, BENCH_CU)}```",
                             code=(codes or {}).get(r.key, BENCH_CU), n_tokens=r.n_tokens, finish_reason="stop",
                             seconds=0.1) for r in records]
    save_generations(d / "generations.jsonl", gens)
    m = {"generations": str(d / "generations.jsonl"), **(meta or {})}
    if tasks is not None:
        (d / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
        m["tasks"] = str(d / "tasks.jsonl")
    (d / "summary.json").write_text(json.dumps({"overall": {}, "meta": m}))
    return d


def eval_run(tmp_path: Path) -> Path:
    records = [
        sample_result(0, 0, Status.PASSED),
        sample_result(0, 1, Status.COMPILE_ERROR, detail='nvcc: kernel.cu(4): error: identifier "idx" is undefined',
                steps=[StepResult("compile", 2, 1.0, stderr=COMPILE_LOG)]),
        sample_result(1, 0, Status.WRONG, detail=STRICT_DETAIL, family="reduce", robust=Status.WRONG, check="strict",
                      mismatch=MISMATCH,
                steps=[StepResult("run[case=0,order=forward]", 0, 0.3), StepResult("compare[case=0]", 0, 0.1, stdout="T\n")]),
        sample_result(1, 1, Status.RACE, detail=RACE_DETAIL, family="reduce",
                steps=[StepResult("run[case=0,order=forward]", 0, 0.3), StepResult("run[case=0,order=random:1]", 0, 0.3),
                       StepResult("compare[case=0]", 0, 0.1, stdout="F\n")]),
        sample_result(2, 0, Status.RUNTIME_ERROR, name=f"evil{PAYLOAD}", detail=f"case 0, order forward: {PAYLOAD}",
                steps=[StepResult("run[case=0,order=forward]", 1, 0.2, stderr=PAYLOAD, stdout=PAYLOAD)]),
    ]
    codes = {(2, 0): EVIL_CODE}
    tasks = [make_record(0), make_record(1, task_name="Reduce"), make_record(2, task_name="Evil")]
    return write_eval_dir(tmp_path / "run", records, codes, tasks)


def index_data(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="viewer-data">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))
