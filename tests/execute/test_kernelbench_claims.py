"""Issue 37, the parent side of a KernelBench run without any sandbox: what a harness
run may claim (claims.py), the careful reads of its files, the static check's parser
failures, cleanup of deep trees, and the results writer on untrusted text."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from cuset.evaluate.records import ResultWriter, SampleResult, load_results
from cuset.execute.kernelbench import claims
from cuset.execute.kernelbench.verify import _discard, _static_problem, extract_specs
from cuset.execute.result import Status, printable
from cuset.execute.untrusted_files import UnsafeOutput, read_bounded
from cuset.io import json_line

SPEC = {"name": "relu", "cpp_sources": ["int f();"], "cuda_sources": [], "functions": ["f"], "extra_cflags": ["-O3"],
        "extra_cuda_cflags": [], "extra_ldflags": [], "extra_include_paths": [], "with_cuda": False,
        "with_pytorch_error_handling": True}


@pytest.mark.parametrize("status", ["passed", "skipped", "infra_error", "no_code", "made_up", None, 3])
def test_a_candidate_cannot_claim_a_pass_a_skip_or_the_machines_fault(status):
    with pytest.raises(claims.Unbelievable, match="which a candidate run may not report"):
        claims.checked_record({"status": status}, "candidate")


def test_the_reference_may_skip_its_task_but_never_pass():
    assert claims.checked_record({"status": "skipped", "detail": "no Model"}, "reference")["status"] == "skipped"
    assert claims.checked_record({"status": "infra_error"}, "reference")["status"] == "infra_error"
    with pytest.raises(claims.Unbelievable):
        claims.checked_record({"status": "passed"}, "reference")


@pytest.mark.parametrize("value,why", [
    ([1, 2], "holds a JSON list, not an object"), ("ran", "holds a JSON str"),
    ({"status": "wrong", "trial": "0"}, "field 'trial' is a str"),
    ({"status": "wrong", "trial": True}, "field 'trial' is a bool"),
    ({"status": "wrong", "max_abs_err": float("nan")}, "field 'max_abs_err' is a float"),
    ({"status": "wrong", "detail": {"x": 1}}, "field 'detail' is a dict"),
    ({"status": "need_extensions"}, "without naming them"),
    ({"status": "need_extensions", "specs": [{**SPEC, "functions": "f"}]}, "not a load_inline call's arguments"),
    ({"status": "need_extensions", "specs": [{**SPEC, "extra_cflags": "-O3"}]}, "not a load_inline call's arguments"),
    ({"status": "need_extensions", "specs": [{**SPEC, "with_cuda": 1}]}, "not a load_inline call's arguments"),
    ({"status": "need_extensions", "specs": [{k: v for k, v in SPEC.items() if k != "extra_ldflags"}]},
     "not a load_inline call's arguments"),
    ({"status": "need_extensions", "specs": [SPEC] * (claims.MAX_SPECS + 1)}, "more than 16"),
])
def test_malformed_records_are_not_believed(value, why):
    with pytest.raises(claims.Unbelievable, match=why.replace("(", r"\(")):
        claims.checked_record(value, "candidate")


def test_a_believed_record_keeps_known_fields_only_and_printable_text():
    record = claims.checked_record({"status": "wrong", "detail": "x\udc80\x1b[2J", "trial": 1, "extra": "dropped",
                                    "step": {"step": "forward", "timeout": "soon", "trial": 1}}, "candidate")
    assert record == {"status": "wrong", "detail": "x\ufffd\\x1b[2J", "trial": 1, "step": {"step": "forward",
                                                                                            "trial": 1}}
    ask = claims.checked_record({"status": "need_extensions", "specs": [{**SPEC, "more": 1}]}, "candidate")
    assert ask["specs"] == [SPEC]


def test_harness_files_are_read_carefully(tmp_path):
    (tmp_path / "verdict.json").write_text('{"status": "ran"}')
    assert claims.read_json(tmp_path, "verdict.json", 100) == {"status": "ran"}
    assert claims.read_json(tmp_path, "absent.json", 100) is None
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(claims.Unbelievable, match="nested too deeply"):
        claims.read_json(tmp_path, "deep.json", 1 << 20)
    (tmp_path / "bad.json").write_bytes(b'{"a": "\xff"}')
    with pytest.raises(claims.Unbelievable, match="UnicodeDecodeError"):
        claims.read_json(tmp_path, "bad.json", 100)
    os.mkfifo(tmp_path / "fifo.json")
    opened = []
    reader = threading.Thread(target=lambda: opened.append(_try(read_bounded, tmp_path, "fifo.json", 100)))
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "reading a fifo blocked"
    assert "is a fifo" in str(opened[0])
    os.symlink("/dev/zero", tmp_path / "zero.json")
    with pytest.raises(UnsafeOutput, match="is a symbolic link"):
        read_bounded(tmp_path, "zero.json", 100)
    (tmp_path / "big.json").write_bytes(b" " * 101)
    with pytest.raises(UnsafeOutput, match="holds 101 bytes, more than the 100 allowed"):
        read_bounded(tmp_path, "big.json", 100)
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "c0_t0.json").write_text("{}")
    os.symlink(tmp_path / "real", tmp_path / "outputs")
    with pytest.raises(UnsafeOutput, match="outputs/ is a symbolic link"):
        read_bounded(tmp_path, "outputs/c0_t0.json", 100)
    # progress notes and the watchdog's file: a link is no progress and no timeout
    os.symlink(tmp_path / "verdict.json", tmp_path / "progress.json")
    assert claims.read_progress(tmp_path) == {}
    os.symlink("/proc/self/status", tmp_path / "timeout.txt")
    assert claims.watchdog_fired(tmp_path) is False


def _try(fn, *args):
    try:
        return fn(*args)
    except UnsafeOutput as e:
        return e


def test_the_static_check_answers_every_parser_failure():
    deep_sum = "class ModelNew: pass\nx = 1" + "+1" * 200_000
    assert _static_problem(deep_sum) == (Status.COMPILE_ERROR, "the candidate nests expressions too deeply for "
                                                               "Python's parser")
    assert _static_problem("class ModelNew: pass\nx = " + "-" * 200_000 + "1")[0] is Status.COMPILE_ERROR
    assert _static_problem("class ModelNew: pass\nx = '\0'") == (
        Status.COMPILE_ERROR, "the candidate is not valid Python: source code string cannot contain null bytes")
    assert _static_problem("class ModelNew(:\n")[0] is Status.COMPILE_ERROR
    # a concatenation deeper than the stack: no static specs (the harness finds the calls at run time)
    concat = "S = 'a'" + " + 'a'" * 5000 + "\nm = load_inline(name='x', cpp_sources=S, functions=['f'])\n"
    assert extract_specs(concat) == []
    assert len(extract_specs("S = 'a' + 'b'\nm = load_inline(name='x', cpp_sources=S, functions=['f'])\n")) == 1


def test_a_3000_level_tree_is_removed_without_recursion(tmp_path):
    root = tmp_path / "kb-run"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    for _ in range(3000):
        os.mkdir("d", dir_fd=fd)
        nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    os.close(fd)
    _discard(root)
    assert not root.exists()


def test_untrusted_text_always_reaches_the_results_file(tmp_path):
    assert json_line({"d": "a\udc80b"}) == '{"d": "a\ufffdb"}\n'
    assert printable("a\x00b\x85c\u2028d\n\t") == "a\\x00b\\x85c\u2028d\n\t"
    path = tmp_path / "results.jsonl"
    with ResultWriter(path) as w:
        w.write(SampleResult("kb", "K", "K", 0, Status.RUNTIME_ERROR, detail="bad \udc80 \ud800 byte\x1b"))
        w.write(SampleResult("kb", "K", "K", 1, Status.PASSED))
    got = {r.sample: r for r in load_results(path)}
    assert got[0].detail == "bad \ufffd \ufffd byte\x1b" and got[1].status is Status.PASSED
    assert json.loads(Path(path).read_text(encoding="utf-8").splitlines()[0])["sample"] == 0


def test_a_candidate_longer_than_any_answer_is_refused_before_parsing():
    from cuset.execute.kernelbench.verify import MAX_SOURCE_CHARS, verify

    v = verify("", "class ModelNew: pass\n" + "#" * MAX_SOURCE_CHARS)
    assert v.status is Status.COMPILE_ERROR and v.detail.endswith("more than the 1048576 a KernelBench answer may have")
    assert v.steps == ()
