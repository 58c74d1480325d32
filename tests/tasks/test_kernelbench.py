"""KernelBench tasks: record, validation, loading (JSONL and directory), prompts, extraction, bundled set."""

import ast
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jsonl_tools import write_jsonl

from cuset.generate.extract import extract_code, extract_modelnew, extract_modelnew_compat, get_extractor
from cuset.tasks import KernelBenchTask, Task, TaskValidationError, load_tasks, render_prompt, save_tasks
from cuset.tasks.kernelbench import check_reference, module_constants, validate_kernelbench_record
from cuset.tasks.kernelbench_prompts import (
    COMPAT_INSTRUCTION, COMPAT_STATEMENT, COMPAT_SYSTEM, EXAMPLE_ARCH, EXAMPLE_NEW_ARCH,
)
from cuset.tasks.reasoning import split_reasoning

BUNDLED = Path(__file__).resolve().parents[2] / "suites" / "kernelbench"
FAMILIES = {"elementwise", "reduction", "softmax", "matmul", "conv", "normalization"}

REF = """import torch
import torch.nn as nn

batch_size = 16
dim = 1024
scale: float = 0.5


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * scale


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"""

MODELNEW = """import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = "__global__ void k(float* x) {}"
ext = load_inline(name="e", cpp_sources="", cuda_sources=src, functions=[])


class ModelNew(nn.Module):
    def forward(self, x):
        return x
"""


def kb_record(tid="kb_x", **changes):
    rec = {"kind": "kernelbench", "id": tid, "task_name": "X", "reference_src": REF}
    rec.update(changes)
    return rec


# ---------------------------------------------------------------- record and JSONL


def test_round_trip_and_defaults(tmp_path):
    full = kb_record(family="elementwise", description="d", atol=0.001, rtol=0.5, n_trials=3, backward=True,
                     shape_variants=[{"dim": 1000}, {"batch_size": 2, "scale": 2.0}], value_variants=["negative"])
    task = KernelBenchTask.from_json(full)
    assert task.shape_variants == ({"dim": 1000}, {"batch_size": 2, "scale": 2.0})
    assert task.value_variants == ("negative",) and task.backward and task.n_trials == 3
    assert task.to_json() == full
    minimal = KernelBenchTask.from_json(kb_record("kb_min"))
    assert (minimal.atol, minimal.rtol, minimal.n_trials, minimal.backward) == (1e-2, 1e-2, 5, False)
    assert minimal.family is None and minimal.family_name == "X" and minimal.kind == "kernelbench"
    assert "family" not in minimal.to_json()
    out = tmp_path / "rt.jsonl"
    save_tasks([task, minimal], out)
    loaded, report = load_tasks(out)
    assert loaded == [task, minimal] and report.loaded == 2


def test_mixed_file_keeps_cudabench_records_byte_identical(tmp_path, make_record):
    path = write_jsonl(tmp_path / "mixed.jsonl", [make_record(0), kb_record(), make_record(1, kind="cudabench")])
    tasks, _ = load_tasks(path)
    assert [t.kind for t in tasks] == ["cudabench", "kernelbench", "cudabench"]
    assert isinstance(tasks[0], Task) and isinstance(tasks[1], KernelBenchTask)
    assert tasks[0].to_json() == make_record(0)  # no "kind" added to CUDABench records


def test_module_constants_read_without_running():
    assert module_constants(REF) == {"batch_size": 16, "dim": 1024, "scale": 0.5}
    src = "a = 1\nb = -2.5\nc = 'x'\nd = 3\nd = f(3)\nflag = True\n"
    assert module_constants(src) == {"a": 1, "b": -2.5}


def test_tuple_assigned_constants_are_constants():
    """Issue 38: `height, width = 32, 32` (as KernelBench references write them) and `a = b = 4`."""
    src = "height, width = 32, -16\nm = n = 4\n(p, (q, r)) = 1, (2.5, 3)\ns, t = size()\nu, v = 1, 2, 3\n" \
          "w, x = 5, 6\nw = 'x'\n"
    assert module_constants(src) == {"height": 32, "width": -16, "m": 4, "n": 4, "p": 1, "q": 2.5, "r": 3, "x": 6}
    ref = REF.replace("dim = 1024", "dim, other = 1024, 7")
    errs = validate_kernelbench_record({**kb_record(reference_src=ref), "shape_variants": [{"dim": 512, "other": 3}]})
    assert errs == []


def test_reference_is_never_executed(tmp_path):
    marker = tmp_path / "ran"
    src = f"open({str(marker)!r}, 'w').write('x')\nraise SystemExit(3)\n" + REF
    assert check_reference(src) == []
    path = write_jsonl(tmp_path / "t.jsonl", [kb_record(reference_src=src)])
    assert len(load_tasks(path)[0]) == 1
    assert not marker.exists()


def _problems(tmp_path, records):
    path = write_jsonl(tmp_path / "t.jsonl", records)
    with pytest.raises(TaskValidationError) as exc:
        load_tasks(path)
    return [str(p) for p in exc.value.problems], str(path)


def test_validation_names_file_line_field_and_fix(tmp_path):
    no_inputs = REF.replace("def get_inputs():", "def make_inputs():")
    records = [
        kb_record("a", reference_src=no_inputs),
        kb_record("b", atol=0, rtol=-1),
        kb_record("c", value_variants=["huge", "zeros"]),
        kb_record("d", shape_variants=[{"dimm": 5}, {"dim": 2.5}, {"scale": 2}]),
        {"kind": "kernelbench", "id": "e", "task_name": "E"},
        kb_record("f", reference_src="import torch\nclass Model(:\n"),
        kb_record("g", kind="triton"),
        kb_record("h", n_trials=0, backward="yes", extra=1),
        kb_record("i", reference_src=REF.replace("class Model(nn.Module):", "class Net(nn.Module):")),
    ]
    problems, src = _problems(tmp_path, records)
    expected = [
        f"{src}:1: reference_src: line 19 of the source: no module-level function `get_inputs`: "
        "add `def get_inputs():` returning a list of the forward inputs",
        f"{src}:2: atol: must be a positive number, got 0 (KernelBench uses 1e-2)",
        f"{src}:2: rtol: must be a positive number, got -1 (KernelBench uses 1e-2)",
        f"{src}:3: value_variants[0]: unknown value variant 'huge'; use one of negative, zeros, large",
        f"{src}:4: shape_variants[0].dimm: 'dimm' is not a module-level int/float constant of the reference "
        "(it has: batch_size, dim, scale); define `dimm = ...` at module level or drop it",
        f"{src}:4: shape_variants[1].dim: dim is an int in the reference; give an int, not 2.5",
        f"{src}:5: reference_src: missing (KernelBench records need id, task_name and reference_src)",
        f"{src}:6: reference_src: line 2 of the source: Python syntax error: invalid syntax (column 13); "
        "fix the reference so it parses",
        f"{src}:7: kind: unknown task kind 'triton': use cudabench (the default) or kernelbench",
        f"{src}:8: extra: unknown field; KernelBench records take id, task_name, reference_src, family, "
        "description, atol, rtol, n_trials, backward, shape_variants, value_variants",
        f"{src}:8: n_trials: must be an integer >= 1, got 0",
        f"{src}:8: backward: must be true or false, got 'yes'",
        f"{src}:9: reference_src: line 19 of the source: no module-level class `Model`: "
        "add `class Model(nn.Module)` with the forward to reproduce",
    ]
    assert problems == expected


def test_duplicate_ids_and_lenient_counts(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", [kb_record("a"), kb_record("a"), kb_record("b", atol="x")])
    tasks, report = load_tasks(path, strict=False)
    assert [t.id for t in tasks] == ["a"]
    assert dict(report.skipped) == {"duplicate_id": 1, "bad_tolerance": 1}
    assert str(report.problems[0]).endswith(":2: id: duplicate id a (first seen on line 1)")


# ---------------------------------------------------------------- directory layout


def test_directory_loading_with_metadata(tmp_path):
    (tmp_path / "19_ReLU.py").write_text(REF)
    (tmp_path / "kb_scale.py").write_text(REF)
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "kb_scale.correct.py").write_text(MODELNEW)  # not a reference: not read
    write_jsonl(tmp_path / "metadata.jsonl", [
        {"id": "kb_scale", "task_name": "Scale", "family": "elementwise", "value_variants": ["large"],
         "shape_variants": [{"dim": 7}]},
    ])
    tasks, report = load_tasks(tmp_path)
    assert [(t.id, t.task_name, t.family) for t in tasks] == [("19_ReLU", "ReLU", None),
                                                               ("kb_scale", "Scale", "elementwise")]
    assert tasks[1].value_variants == ("large",) and tasks[1].shape_variants == ({"dim": 7},)
    assert tasks[0].reference_src == REF and report.loaded == 2


def test_directory_errors_point_at_the_right_file_and_line(tmp_path):
    (tmp_path / "good.py").write_text(REF)
    (tmp_path / "broken.py").write_text("import torch\n\ndef get_inputs(:\n")
    (tmp_path / "nomodel.py").write_text(REF.replace("class Model(", "class Other("))
    meta = tmp_path / "metadata.jsonl"
    write_jsonl(meta, [{"id": "good", "atol": -1}, {"id": "ghost"}, {"id": "good"}])
    with pytest.raises(TaskValidationError) as exc:
        load_tasks(tmp_path)
    problems = [str(p) for p in exc.value.problems]
    assert problems == [
        f"{meta}:3: id: duplicate id 'good' (first seen on line 1)",
        f"{meta}:2: id: no ghost.py in {tmp_path}: rename the entry to an existing reference or add the file",
        f"{tmp_path / 'broken.py'}:3: reference_src: Python syntax error: invalid syntax (column 16); "
        "fix the reference so it parses",
        f"{meta}:1: atol: must be a positive number, got -1 (KernelBench uses 1e-2)",
        f"{tmp_path / 'nomodel.py'}:19: reference_src: no module-level class `Model`: "
        "add `class Model(nn.Module)` with the forward to reproduce",
    ]
    tasks, report = load_tasks(tmp_path, strict=False)
    assert tasks == [] and report.total_skipped == 5


# ---------------------------------------------------------------- prompts


def test_default_prompt_holds_reference_and_contract():
    task = KernelBenchTask.from_json(kb_record(atol=0.001, n_trials=3))
    p = render_prompt(task)
    assert "```python\n" + REF.rstrip("\n") + "\n```" in p.user
    assert p.user.startswith("## Task Name\nX\n")
    assert "atol = 0.001 and rtol = 0.01 over 3 random inputs" in p.user
    for needle in ("class ModelNew(nn.Module)", "load_inline", "__global__", "```python", "cuda_sources"):
        assert needle in p.system
    assert "differentiable" not in p.user and "## GPU" not in p.user
    assert render_prompt(task, 3) == p  # one prompt per task: the level does not apply
    described = KernelBenchTask.from_json(kb_record(description="Rows of x.", backward=True))
    q = render_prompt(described, gpu="H100")
    assert "## Description\nRows of x.\n" in q.user and "gradients" in q.user and q.user.endswith("## GPU\nH100")


def test_compat_prompt_reproduces_kernelbench_template():
    task = KernelBenchTask.from_json(kb_record())
    p = render_prompt(task, compat=True)
    assert p.system == COMPAT_SYSTEM == "You are a helpful assistant"
    pad12, pad8 = " " * 12, " " * 8
    expected = (
        COMPAT_STATEMENT
        + f"\n{pad12}Here's an example to show you the syntax of inline embedding custom CUDA operators in torch: "
        f"The example given architecture is: \n\n{pad12}``` \n\n{pad12}{EXAMPLE_ARCH}\n{pad12}``` \n\n"
        f"{pad12}The example new arch with custom CUDA kernels looks like this: \n{pad12}```\n{pad12}"
        f"{EXAMPLE_NEW_ARCH}\n{pad12}``` \n\n{pad12}"
        f"\n{pad8}You are given the following architecture: \n\n{pad8}```\n{pad8}{REF}\n{pad8}```\n{pad8}"
        + COMPAT_INSTRUCTION
    )
    assert p.user == expected
    assert p.user.startswith("You write custom CUDA kernels to replace the pytorch operators in the given "
                             "architecture to get speedups. \n\n    You have complete freedom")
    assert p.user.endswith("Just output the new model code, no other text, and NO testing code! \n\n")
    # the one-shot example is itself a valid pair: Model + get_inputs, and a ModelNew using load_inline
    assert check_reference(EXAMPLE_ARCH) == []
    assert extract_modelnew(f"```python\n{EXAMPLE_NEW_ARCH}```") == EXAMPLE_NEW_ARCH


def test_cudabench_prompts_unchanged(make_record):
    task = Task.from_json(make_record(0))
    assert render_prompt(task, 1, compat=True).user.endswith("CUDA program:\n")


# ---------------------------------------------------------------- extraction


def test_extract_modelnew_picks_the_modelnew_block():
    kernel_only = "```cpp\n__global__ void k() {}\n```\n"
    response = f"Here is the plan.\n{kernel_only}Final:\n```python\n{MODELNEW}```\nDone."
    assert extract_modelnew(response) == MODELNEW
    draft = MODELNEW.replace("return x", "return x * 0")
    assert extract_modelnew(f"```python\n{draft}```\nFixed:\n```python\n{MODELNEW}```") == MODELNEW
    assert extract_modelnew(MODELNEW) == MODELNEW  # a bare module, no fences
    assert extract_modelnew(f"```python\n{MODELNEW}") == MODELNEW  # unclosed last fence runs to the end


@pytest.mark.parametrize("response", [
    "", "I cannot do that.", "```python\nclass Model(nn.Module):\n    pass\n```",
    "```cpp\n__global__ void k() {}\n```", "class ModelNew(:\n  broken",
])
def test_extract_modelnew_none_without_modelnew(response):
    assert extract_modelnew(response) is None


def test_reasoning_trace_is_not_searched():
    # the generation loop extracts from split.answer, and nothing from an unterminated trace
    traced = f"<think>try:\n```python\n{MODELNEW}```\n</think>I give up."
    split = split_reasoning(traced)
    assert not split.unterminated and extract_modelnew(split.answer) is None
    cut = split_reasoning(f"<think>\n```python\n{MODELNEW}```\nstill thinking")
    assert cut.unterminated and cut.answer == ""
    good = split_reasoning(f"<think>plan</think>\n```python\n{MODELNEW}```")
    assert extract_modelnew(good.answer) == MODELNEW


def test_compat_extraction_is_kernelbench_rule():
    assert extract_modelnew_compat(f"text\n```python\n{MODELNEW}```") == MODELNEW.strip()
    assert extract_modelnew_compat("```cpp\nint x;\n``` then ```python\nclass ModelNew: pass\n```") == "int x;"
    assert extract_modelnew_compat("no code") is None and extract_modelnew_compat("``` ```") is None


def test_get_extractor_by_kind():
    assert get_extractor("default") is extract_code  # CUDABench unchanged
    assert get_extractor("default", "kernelbench") is extract_modelnew
    assert get_extractor("compat", "kernelbench") is extract_modelnew_compat
    with pytest.raises(ValueError, match="unknown task kind 'triton'"):
        get_extractor("default", "triton")


# ---------------------------------------------------------------- bundled set


@pytest.fixture(scope="module")
def bundled():
    return load_tasks(BUNDLED)[0]


def _init_params(tree: ast.Module, cls: str) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    return [a.arg for a in item.args.args[1:]]
            return []
    raise AssertionError(f"no class {cls}")


def test_bundled_set_covers_the_six_families(bundled):
    assert len(bundled) >= 20
    by_family = {f: [t.id for t in bundled if t.family == f] for f in FAMILIES}
    assert all(len(ids) >= 2 for ids in by_family.values()), by_family
    assert {t.family for t in bundled} == FAMILIES
    assert len({t.id for t in bundled}) == len(bundled)


def test_bundled_index_jsonl_is_in_sync(bundled):
    assert load_tasks(BUNDLED / "kernelbench.jsonl")[0] == bundled


def test_bundled_solutions_are_complete_modelnew_programs(bundled):
    for task in bundled:
        ref_params = _init_params(ast.parse(task.reference_src), "Model")
        for variant in ("correct", "wrong"):
            path = BUNDLED / "solutions" / f"{task.id}.{variant}.py"
            source = path.read_text()
            tree = ast.parse(source, filename=str(path))
            assert extract_modelnew(f"```python\n{source}```") == source, path
            assert _init_params(tree, "ModelNew") == ref_params, path
            calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "load_inline"]
            assert len(calls) == 1, path
            kwargs = {k.arg for k in calls[0].keywords}
            assert {"name", "cpp_sources", "cuda_sources", "functions"} <= kwargs, path
            cuda = [n.value.value for n in tree.body if isinstance(n, ast.Assign)
                    and n.targets[0].id.endswith("_cuda_source")]
            assert len(cuda) == 1 and "__global__" in cuda[0] and "torch::Tensor" in cuda[0], path
            assert "<<<" in cuda[0] and "data_ptr<float>()" in cuda[0], path
    names = [ast.literal_eval(next(k.value for k in n.keywords if k.arg == "name"))
             for p in (BUNDLED / "solutions").glob("*.py") for n in ast.walk(ast.parse(p.read_text()))
             if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "load_inline"]
    assert len(names) == len(set(names)) == 2 * len(bundled)  # distinct extension names: no build-cache clash


def _run_reference(task, overrides=None):
    import torch

    namespace: dict = {"__name__": f"kb_ref_{task.id}"}
    exec(compile(task.reference_src, task.id, "exec"), namespace)  # our own bundled references
    namespace.update(overrides or {})
    torch.manual_seed(0)
    model = namespace["Model"](*namespace["get_init_inputs"]())
    inputs = namespace["get_inputs"]()
    with torch.no_grad():
        out = model(*inputs)
    return [tuple(x.shape) for x in inputs], out


def test_bundled_references_run_on_cpu_for_every_shape_variant(bundled):
    import torch

    for task in bundled:
        shapes, out = _run_reference(task)
        assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and torch.isfinite(out).all(), task.id
        for variant in task.shape_variants:
            varied_shapes, varied = _run_reference(task, variant)
            assert torch.isfinite(varied).all(), (task.id, variant)
            if any(isinstance(v, int) and k != "kernel_size" for k, v in variant.items()):
                assert varied_shapes != shapes, (task.id, variant)  # the override reaches the input sizes


def test_cli_lists_and_shows_kernelbench_tasks(tmp_path, make_record):
    from cuset.cli.main import app

    runner = CliRunner(env={"COLUMNS": "250"})  # wide enough that no cell is cut
    res = runner.invoke(app, ["tasks", "list", str(BUNDLED)])
    assert res.exit_code == 0, res.output
    assert "kb_softmax" in res.output and "normalization" in res.output
    res = runner.invoke(app, ["tasks", "show", str(BUNDLED), "--id", "kb_relu"])
    assert res.exit_code == 0 and "return torch.relu(x)" in res.output and "ModelNew" in res.output
    res = runner.invoke(app, ["tasks", "show", str(BUNDLED), "--id", "kb_relu", "--compat"])
    assert "You are a helpful assistant" in res.output and "NO testing code!" in res.output
    res = runner.invoke(app, ["tasks", "show", str(BUNDLED), "--id", "kb_relu", "--field", "reference"])
    assert res.output.startswith("import torch")
    res = runner.invoke(app, ["tasks", "show", str(BUNDLED), "--id", "kb_relu", "--field", "bench.cu"])
    assert res.exit_code != 0 and "reference or json for a kernelbench task" in res.output
    mixed = write_jsonl(tmp_path / "m.jsonl", [make_record(3), kb_record()])
    res = runner.invoke(app, ["tasks", "list", str(mixed)])
    assert res.exit_code == 0 and "Vector_Add" in res.output and "batch_size=16" in res.output
    assert runner.invoke(app, ["tasks", "validate", str(BUNDLED)]).exit_code == 0


def test_rows_in_kernelbench_dataset_columns_load_as_kernelbench_tasks(tmp_path):
    # KernelBench's own release (code, name, level, problem_id), e.g. exported to JSONL
    ref = (BUNDLED / "kb_relu.py").read_text()
    rows = [{"code": ref, "name": "19_ReLU", "level": 1, "problem_id": 19},
            {"code": ref, "name": "19_ReLU.py", "level": 2, "problem_id": 19},
            {"code": "import torch\n", "name": "3_Broken", "level": 1, "problem_id": 3}]
    tasks, report = load_tasks(write_jsonl(tmp_path / "kb.jsonl", rows), strict=False)
    assert [(t.kind, t.id, t.task_name) for t in tasks] == [("kernelbench", "L1_19_ReLU", "ReLU"),
                                                             ("kernelbench", "L2_19_ReLU", "ReLU")]
    assert tasks[0].reference_src == ref
    assert report.skipped and report.problems[0].line == 3 and "Model" in report.problems[0].message
