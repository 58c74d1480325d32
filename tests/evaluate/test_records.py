import json

from cuset.evaluate.records import ResultWriter, SampleResult, load_results, save_results
from cuset.execute.result import Status, StepResult

FIELDS = {"task_id", "task_name", "family", "sample", "status", "detail", "compiled", "ran_ok", "passed",
          "n_tokens", "timings", "backend", "code_sha256", "steps", "notes", "reasoning_tokens",
          "robust_status", "robust_detail", "robust_check", "hack", "perf",
          # KernelBench's evidence of kernel work (issue 38); None/[]/"" for CUDABench programs
          "kernel_launches", "extension_calls", "extensions_built", "extensions_failed", "passed_without_kernel",
          # a wrong/race verdict's outputs against the reference, element by element (issue 42); None otherwise
          "mismatch",
          # the evaluator itself raised on this sample (set by the runner only, never from the candidate's detail)
          "evaluator_failed",
          # who judged it (cuset.evaluate.judge): another judge's verdicts are redone on resume
          "judge"}


def result(sample=0, status=Status.PASSED):
    return SampleResult(3, "ReLU", "relu", sample, status, "", True, True, status is Status.PASSED, 42,
                        {"run": 0.1}, "cpu", "ab" * 32, (StepResult("run[case=0,order=forward]", 0, 0.1, False, "", ""),))


def test_json_field_names_and_round_trip(tmp_path):
    path = tmp_path / "r.jsonl"
    save_results(path, [result(0), result(1, Status.WRONG)])
    line = json.loads(path.read_text().splitlines()[1])
    assert set(line) == FIELDS
    assert line["status"] == "wrong"
    assert line["steps"][0]["name"] == "run[case=0,order=forward]"
    assert load_results(path) == [result(0), result(1, Status.WRONG)]


def test_writer_streams_and_resumes_after_torn_line(tmp_path):
    path = tmp_path / "r.jsonl"
    with ResultWriter(path) as w:
        w.write(result(0))
    with open(path, "a") as fh:
        fh.write('{"task_id": 3, "sam')
    assert [r.sample for r in load_results(path)] == [0]
    with ResultWriter(path) as w:
        w.write(result(1))
    assert [r.sample for r in load_results(path)] == [0, 1]


def test_unknown_status_is_a_clear_error(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"task_id": 1, "task_name": "T", "family": "t", "sample": 0, "status": "exploded"}) + "\n")
    try:
        load_results(path)
    except ValueError as e:
        assert "r.jsonl:1: unknown status 'exploded'" in str(e)
    else:
        raise AssertionError("accepted an unknown status")


def test_a_result_missing_a_required_field_is_a_clear_error(tmp_path):
    import pytest

    from cuset.evaluate.records import ResultRecordError

    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"task_id": 1, "sample": 0, "status": "passed"}) + "\n")
    with pytest.raises(ResultRecordError, match=r"r.jsonl:1: missing field\(s\) task_name, family"):
        load_results(path)
