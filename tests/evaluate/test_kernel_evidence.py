"""Issue 38, without running anything: what a KernelBench pass ran (KernelEvidence), how
the parent believes the run's counts, strict_kernels, the record's compile columns and
the report's lines."""

from __future__ import annotations

import pytest

from cuset.evaluate.kernelbench import strict_kernel_verdict
from cuset.evaluate.metrics import summarize
from cuset.evaluate.records import SampleResult
from cuset.evaluate.report import judge_line, render_markdown
from cuset.evaluate.runner import compiled_and_ran
from cuset.execute.kernelbench import claims
from cuset.execute.kernelbench.verify import KbVerdict, _evidence
from cuset.execute.result import ExecResult, KernelEvidence, Status, StepResult

BUILT = {"k1": {"path": "/cache/k1.so", "module": "m1"},
         "k2": {"status": "compile_error", "detail": "load_inline('bad'): cuda.cu:3: error", "log": ""}}


def test_the_parent_believes_counts_only_with_an_extension_it_built():
    ran = {"status": "ran", "loaded": ["k1"], "kernel_launches": 6, "extension_calls": 3}
    assert _evidence(ran, "cpu", BUILT, {}) == KernelEvidence(built=1, launches=6, calls=3, ran=True)
    # an extension it never built (or one whose build failed) is not a build; its counts are not believed
    forged = {"status": "ran", "loaded": ["k2", "nope"], "kernel_launches": 50, "extension_calls": 9}
    assert _evidence(forged, "cpu", BUILT, {"k2": BUILT["k2"]}) == KernelEvidence(
        built=0, failed=("load_inline('bad')",), launches=0, calls=0, ran=True)
    # the GPU run builds its own extensions: its word, and no launch count (calls decide)
    gpu = {"status": "runtime_error", "loaded": ["relu"], "extension_calls": 2, "build_failed": ["other"]}
    ev = _evidence(gpu, "gpu", {}, {})
    assert ev == KernelEvidence(built=1, failed=("load_inline('other')",), launches=None, calls=2, ran=False)
    assert ev.kernel_ran and not ev.all_built


@pytest.mark.parametrize("evidence, why", [
    (KernelEvidence(built=1, launches=4, calls=4, ran=True), ""),
    (KernelEvidence(built=1, launches=0, calls=2, ran=True), "no_kernel_called"),   # called, launched nothing
    (KernelEvidence(ran=True), "no_kernel_called"),
    (KernelEvidence(failed=("load_inline('bad')",), launches=0, ran=True), "build_failed"),
    (KernelEvidence(built=1, launches=None, calls=1, ran=True), ""),                # GPU: calls decide
])
def test_without_kernel_categories(evidence, why):
    assert evidence.without_kernel() == why


def test_strict_kernels_fails_a_pass_without_its_own_kernels():
    real = KbVerdict(Status.PASSED, kernel=KernelEvidence(built=1, launches=2, ran=True))
    assert strict_kernel_verdict(real) is real
    pure = strict_kernel_verdict(KbVerdict(Status.PASSED, kernel=KernelEvidence(ran=True)))
    assert pure.status is Status.WRONG
    assert pure.detail == ("strict_kernels: passed without its own kernels: no kernel of its own launched in the "
                           "checked calls (a pure-torch answer, or one whose kernels are never reached at these "
                           "inputs)")
    fell_back = strict_kernel_verdict(KbVerdict(Status.PASSED, kernel=KernelEvidence(failed=("load_inline('x')",),
                                                                                     ran=True)))
    assert fell_back.status is Status.COMPILE_ERROR
    assert fell_back.detail == "strict_kernels: load_inline('x') failed to build and the answer passed on its torch fallback"
    wrong = KbVerdict(Status.WRONG, kernel=KernelEvidence(ran=True))
    assert strict_kernel_verdict(wrong) is wrong


def kb_result(status, evidence, steps=("kernelbench[cpu]",)):
    return ExecResult(status, steps=tuple(StepResult(s, 0, 0.1) for s in steps), backend="cpu", kernel=evidence)


def test_compile_columns_of_kernelbench_results():
    ran = KernelEvidence(built=1, launches=2, ran=True)
    assert compiled_and_ran(kb_result(Status.PASSED, ran)) == (True, True)
    assert compiled_and_ran(kb_result(Status.WRONG, ran)) == (True, True)        # ran every trial, wrong values
    assert compiled_and_ran(kb_result(Status.PASSED, KernelEvidence(failed=("b",), ran=True))) == (False, True)
    assert compiled_and_ran(kb_result(Status.RUNTIME_ERROR, KernelEvidence(built=1))) == (True, False)
    assert compiled_and_ran(kb_result(Status.UNSUPPORTED, None)) == (False, False)   # refused by the parent
    assert compiled_and_ran(kb_result(Status.COMPILE_ERROR, None, ("kernelbench[cpu]", "compile"))) == (False, False)
    # CUDABench results keep their definition (compile step, run[...] steps)
    cuda = ExecResult(Status.PASSED, steps=(StepResult("compile", 0, 1.0), StepResult("run[case=0,order=f]", 0, 1.0)))
    assert compiled_and_ran(cuda) == (True, True)


def test_record_fields_round_trip():
    r = SampleResult.from_exec(kb_result(Status.PASSED, KernelEvidence(failed=("load_inline('b')",), launches=0, ran=True)),
                               task_id="kb", task_name="K", family="K", sample=0, compiled=False, ran_ok=True,
                               n_tokens=None, code_sha256=None)
    assert (r.kernel_launches, r.extensions_built, r.passed_without_kernel) == (0, 0, "build_failed")
    assert SampleResult.from_json(r.to_json()) == r
    failed = SampleResult.from_exec(kb_result(Status.WRONG, KernelEvidence(ran=True)), task_id="kb", task_name="K",
                                    family="K", sample=1, compiled=True, ran_ok=True, n_tokens=None,
                                    code_sha256=None)
    assert failed.passed_without_kernel == ""   # only a pass is a pass without kernels


def sample(i, status, without="", built=0):
    return SampleResult("kb", "K", "K", i, status, passed=status is Status.PASSED, compiled=True, ran_ok=True,
                        kernel_launches=2 if built else 0, extensions_built=built, passed_without_kernel=without)


def test_report_lines_per_category():
    results = [sample(0, Status.PASSED, built=1), sample(1, Status.PASSED, "no_kernel_called"),
               sample(2, Status.PASSED, "build_failed"), sample(3, Status.PASSED, "build_failed"),
               sample(4, Status.WRONG, built=1)]
    meta = {"backend": "cpu", "compile_judge": "nvcc", "kernelbench_only": True, "strict_kernels": False,
            "kernelbench_compile_judge": "g++ (the CPU backend's build of load_inline extensions; nvcc not used)"}
    summary = summarize(results, meta=meta)
    assert summary.overall["passed_without_kernel"] == {"build_failed": 2, "no_kernel_called": 1}
    assert summary.overall["n_passed_with_kernel"] == 1
    md = render_markdown(summary)
    # the counts are the candidate process's word, and the report says so (issue 61): never evidence of a pass
    assert "of which 1 launched kernels of their own" not in md
    assert ("Passed: 4 sample(s). Their kernel launches are counted inside the candidate's process, which the "
            "candidate can rewrite: its own report, never evidence of a pass (docs/sandbox.md, \"Verdict channels\"). "
            "By that report 1 launched kernels of their own in the checked calls and 3 none") in md
    lines = md.splitlines()
    first = lines.index(next(line for line in lines if line.startswith("- build_failed: 2")))
    assert lines[first + 1].startswith("- no_kernel_called: 1")
    assert "strict_kernels=false: the outputs alone decided, and the counts nothing" in md
    # and which samples, in task and sample order, in summary.json and report.md
    assert [(d["sample"], d["why"]) for d in summary.overall["passed_without_kernel_samples"]] == [
        (1, "no_kernel_called"), (2, "build_failed"), (3, "build_failed")]
    listed = lines.index("Which samples passed without a kernel of their own, by their own report:")
    assert lines[listed + 1:listed + 4] == ["- kb (K) sample 1: no_kernel_called", "- kb (K) sample 2: build_failed",
                                            "- kb (K) sample 3: build_failed"]
    assert "compilation judged by nvcc" not in md
    assert judge_line(meta) == ("KernelBench extensions compiled by g++ (the CPU backend's build of load_inline "
                                "extensions; nvcc not used)")
    assert judge_line({**meta, "kernelbench_only": False}).startswith("compilation judged by nvcc; KernelBench")
    # CUDABench-only results: no KernelBench section
    assert "KernelBench" not in render_markdown(summarize([SampleResult(1, "T", "T", 0, Status.PASSED, passed=True)]))


def test_the_report_says_what_decided_under_strict_kernels():
    """strict_kernels: the evaluator's run without the answer's kernel launches decided
    (docs/sandbox.md, "Verdict channels"), skipped by the CPU runtime or, on the GPU, by the
    preloaded launch_skip library; without strict_kernels the counts decided nothing."""
    results = [sample(0, Status.PASSED, built=1), sample(1, Status.WRONG, built=1)]
    cpu = render_markdown(summarize(results, meta={"backend": "cpu", "strict_kernels": True}))
    assert ("strict_kernels=true: what decided is the evaluator's own run of each answer with its kernel launches "
            "skipped by the CPU runtime (`CUSET_CPU_SKIP_LAUNCHES`), whose outputs the evaluator compares: every "
            "pass above failed there. The counts could only fail an answer (none reported), never pass one") in cpu
    gpu = render_markdown(summarize(results, meta={"backend": "gpu", "strict_kernels": True}))
    assert ("strict_kernels=true: what decided is the evaluator's own run of each answer with its kernel launches "
            "skipped by a library preloaded into that run (`cuset.execute.kernelbench.launch_skip`") in gpu
    assert "CUSET_CPU_SKIP_LAUNCHES" not in gpu
    plain = render_markdown(summarize(results, meta={"backend": "cpu", "strict_kernels": False}))
    assert "strict_kernels" not in plain.split("## KernelBench")[1]   # no pass without kernels: nothing to say
    assert "its own report, never evidence of a pass" in plain


def test_claims_accept_evidence_and_refuse_malformed_evidence():
    rec = claims.checked_record({"status": "ran", "loaded": ["k"], "kernel_launches": 3, "extension_calls": 1},
                                "candidate")
    assert rec == {"status": "ran", "loaded": ["k"], "kernel_launches": 3, "extension_calls": 1}
    for bad, why in [({"kernel_launches": -1}, "negative"), ({"loaded": [1]}, "not a list of at most"),
                     ({"loaded": ["k"] * 65}, "not a list of at most"), ({"kernel_launches": 1.5}, "is a float")]:
        with pytest.raises(claims.Unbelievable, match=why):
            claims.checked_record({"status": "ran", **bad}, "candidate")


def test_eval_options_from_the_command_line():
    from cuset.config import ConfigError, load_config
    from cuset.evaluate.config import EvalConfig

    opts = load_config(EvalConfig, overrides=["strict_kernels=true", "eval_mode=eval"]).options()
    assert (opts.strict_kernels, opts.eval_mode) == (True, "eval")
    assert (EvalConfig().options().strict_kernels, EvalConfig().options().eval_mode) == (False, "train")
    with pytest.raises(ConfigError, match="eval_mode: must be one of 'train', 'eval', got 'inference'"):
        load_config(EvalConfig, overrides=["eval_mode=inference"])


def test_a_long_list_of_passes_without_kernel_is_cut_in_the_report_and_says_so():
    from cuset.evaluate.report import WITHOUT_KERNEL_LISTED

    results = [sample(i, Status.PASSED, "no_kernel_called") for i in range(WITHOUT_KERNEL_LISTED + 5)]
    summary = summarize(results, meta={"backend": "cpu", "compile_judge": "nvcc", "strict_kernels": False})
    assert len(summary.overall["passed_without_kernel_samples"]) == WITHOUT_KERNEL_LISTED + 5
    md = render_markdown(summary)
    assert (f"Which samples passed without a kernel of their own, by their own report (the first "
            f"{WITHOUT_KERNEL_LISTED} of "
            f"{WITHOUT_KERNEL_LISTED + 5}; every record in results.jsonl has `passed_without_kernel`):") in md
    assert f"- kb (K) sample {WITHOUT_KERNEL_LISTED - 1}: no_kernel_called" in md
    assert f"- kb (K) sample {WITHOUT_KERNEL_LISTED}: no_kernel_called" not in md
