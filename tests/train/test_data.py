"""Record formats, bad-data handling (strict and lenient), the cache, the collator."""

from __future__ import annotations

import json

import pytest
import torch

from cuset.spans.text import code_segments
from cuset.train.data import (IGNORE_INDEX, DataConfig, DataError, PadCollator, RecordOptions, build_dataset,
                              parse_record, read_examples, wrap_response)

from .conftest import RELU, VECTOR_ADD, task_record, write_jsonl


def test_wrap_response_fenced_and_raw():
    response, (start, end) = wrap_response("\n\nint x;\n", "fenced", "cuda")
    assert response == "```cuda\nint x;\n```" and response[start:end] == "int x;"
    assert wrap_response("int x;\n", "raw", "cuda") == ("int x;\n", (0, 7))


def test_the_cuda_mask_reads_fenced_blocks_or_the_whole_text():
    """Without a code_range, response_spans runs the detector on the whole response, which
    parses these segments (tests/test_reply_readers.py checks the users agree)."""
    def pieces(text):
        return [text[s.start:s.end] for s in code_segments(text)]

    assert pieces("Here:\n```cuda\nint a;\n```\nand\n```\nint b;\n```") == ["int a;\n", "int b;\n"]
    assert pieces("int a;") == ["int a;"]
    cut = "```cpp\n__global__ void k() {"  # truncated answer: block runs to the end
    assert pieces(cut) == ["__global__ void k() {"]


def test_every_format_becomes_prompt_and_response():
    opts = RecordOptions(system_prompt="SYS")
    ex = parse_record(task_record(7, "relu", RELU), RecordOptions(prompt_level=2), "f", 1)
    assert ex.prompt[0]["role"] == "system" and "relu (level 2)." in ex.prompt[1]["content"]
    assert ex.response.startswith("```cuda\n#include") and ex.response[slice(*ex.code_range)] == RELU.strip("\n")
    raw = parse_record(task_record(7, "relu", RELU), RecordOptions(response_wrap="raw"), "f", 1)
    assert raw.response == RELU and raw.code_range == (0, len(RELU))
    msgs = parse_record({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}, opts, "f", 2)
    assert msgs.prompt == ({"role": "system", "content": "SYS"}, {"role": "user", "content": "q"}) and msgs.response == "a"
    pc = parse_record({"prompt": "q", "completion": "a"}, RecordOptions(), "f", 3)
    assert pc.prompt == ({"role": "user", "content": "q"},) and pc.response == "a"
    pc2 = parse_record({"prompt": [{"role": "user", "content": "q"}], "completion": [{"role": "assistant", "content": "a"}]},
                       RecordOptions(), "f", 3)
    assert pc2.prompt == ({"role": "user", "content": "q"},) and pc2.response == "a"
    al = parse_record({"instruction": "do", "input": "this", "output": "a", "system": "S2"}, opts, "f", 4)
    assert al.prompt == ({"role": "system", "content": "S2"}, {"role": "user", "content": "do\n\nthis"}) and al.response == "a"


@pytest.mark.parametrize("record,fmt,field,reason", [
    ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "  "}]}, "messages", "messages[1].content", "empty_response"),
    ({"messages": [{"role": "user", "content": "q"}]}, "messages", "messages[0].role", "missing_field"),
    ({"prompt": "q"}, "prompt_completion", "completion", "missing_field"),
    ({"prompt": "q", "completion": ""}, "prompt_completion", "completion", "empty_response"),
    ({"instruction": "do"}, "alpaca", "output", "missing_field"),
    ({"instruction": "do", "output": 3}, "alpaca", "output", "bad_type"),
    ({"instruction": "do", "output": "a\ud800b"}, "alpaca", "output", "invalid_utf8"),
    ({**task_record(1, "relu", RELU), "bench.cu": ""}, "cudabench", "bench.cu", "empty_response"),
    ({k: v for k, v in task_record(1, "relu", RELU).items() if k != "level1_prompt"}, "cudabench", "level1_prompt", "missing_field"),
    ({"text": "hello"}, "auto", "<record>", "missing_field"),
    ([1, 2], "auto", "<record>", "bad_type"),
])
def test_bad_records_name_field_and_reason(record, fmt, field, reason):
    problem = parse_record(record, RecordOptions(format=fmt), "data.jsonl", 9)
    assert (problem.source, problem.line, problem.field, problem.reason) == ("data.jsonl", 9, field, reason)
    assert str(problem).startswith(f"data.jsonl:9: {field}: ")


def write_mixed(path):
    good = {"prompt": "Write relu.", "completion": "```cuda\n" + RELU + "```"}
    lines = [json.dumps(good), json.dumps({"prompt": "q", "completion": ""}), "", json.dumps({"prompt": "q"}),
             '{"prompt": "q", "completion": "a\\udc00"}', "{not json", json.dumps(good)]
    path.write_bytes(("\n".join(lines) + "\n").encode() + b'{"prompt": "\xff\xfe", "completion": "a"}\n')
    return path


def test_strict_mode_lists_every_bad_line_with_file_and_reason(tmp_path, tokenizer):
    path = write_mixed(tmp_path / "mixed.jsonl")
    cfg = DataConfig(paths=[str(path)], cache_dir=str(tmp_path / "cache"), cuda_mask=False)
    with pytest.raises(DataError) as err:
        build_dataset(cfg, tokenizer, progress=False)
    msg = str(err.value)
    for line, reason in [(2, "empty_response"), (4, "missing_field"), (5, "invalid_utf8"), (6, "bad_json"), (8, "invalid_utf8")]:
        assert f"{path}:{line}: " in msg and reason in msg
    assert f"{path}:1:" not in msg and "data.strict=false" in msg
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_lenient_mode_skips_and_counts_by_reason(tmp_path, tokenizer):
    path = write_mixed(tmp_path / "mixed.jsonl")
    cfg = DataConfig(paths=[str(path)], cache_dir=str(tmp_path / "cache"), cuda_mask=False, strict=False)
    ds, report = build_dataset(cfg, tokenizer, progress=False)
    assert len(ds) == report.examples == 2
    assert dict(report.skipped) == {"empty_response": 1, "missing_field": 1, "invalid_utf8": 2, "bad_json": 1}
    assert sorted(p.line for p in report.problems) == [2, 4, 5, 6, 8]


def test_prompt_over_the_limit_is_a_bad_record(tmp_path, tokenizer):
    long = {"prompt": "word " * 400, "completion": "int x;"}
    path = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "q", "completion": "int x;"}, long])
    cfg = DataConfig(paths=[str(path)], cache_dir=str(tmp_path / "c"), cuda_mask=False, max_length=64)
    with pytest.raises(DataError, match=r"d.jsonl:2: prompt: prompt is \d+ tokens but max_length is 64.*prompt_too_long"):
        build_dataset(cfg, tokenizer, progress=False)
    cfg.strict = False
    ds, report = build_dataset(cfg, tokenizer, progress=False)
    assert len(ds) == 1 and dict(report.skipped) == {"prompt_too_long": 1}


def test_missing_file_and_empty_file_are_clear_errors(tmp_path, tokenizer):
    with pytest.raises(FileNotFoundError, match="no such file: .*nope.jsonl"):
        build_dataset(DataConfig(paths=[str(tmp_path / "nope.jsonl")]), tokenizer, progress=False)
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ValueError, match="no examples"):
        build_dataset(DataConfig(paths=[str(tmp_path / "empty.jsonl")], cache_dir=str(tmp_path)), tokenizer, progress=False)


def test_cache_is_keyed_by_data_tokenizer_and_settings(tmp_path, tokenizer):
    path = write_jsonl(tmp_path / "t.jsonl", [task_record(0, "relu", RELU), task_record(1, "vadd", VECTOR_ADD)])
    cfg = DataConfig(paths=[str(path)], cache_dir=str(tmp_path / "cache"), cuda_mask=False, max_length=4096)
    ds1, r1 = build_dataset(cfg, tokenizer, progress=False)
    ds2, r2 = build_dataset(cfg, tokenizer, progress=False)
    assert not r1.cache_hit and r2.cache_hit and r1.cache_key == r2.cache_key
    assert ds1["input_ids"] == ds2["input_ids"] and ds1["labels"] == ds2["labels"]
    cfg.max_length = 700
    ds3, r3 = build_dataset(cfg, tokenizer, progress=False)
    assert not r3.cache_hit and max(len(x) for x in ds3["input_ids"]) == 700 and r3.truncated == 2
    write_jsonl(path, [task_record(0, "relu", RELU)])  # same name, new content
    ds4, r4 = build_dataset(cfg, tokenizer, progress=False)
    assert not r4.cache_hit and len(ds4) == 1
    import copy
    tok2 = copy.deepcopy(tokenizer)
    tok2.chat_template = tok2.chat_template.replace("<|im_start|>assistant\n", "<|im_start|>assistant\n\n")
    assert not build_dataset(cfg, tok2, progress=False)[1].cache_hit


def test_dataset_columns_match_tokenize_example(tmp_path, tokenizer):
    from cuset.tasks import Task, render_prompt
    from cuset.train.data import tokenize_example

    rec = task_record(0, "relu", RELU)
    path = write_jsonl(tmp_path / "t.jsonl", [rec])
    ds, report = build_dataset(DataConfig(paths=[str(path)], cache_dir=str(tmp_path), cuda_mask=False, prompt_level=3),
                               tokenizer, progress=False)
    direct = tokenize_example(tokenizer, render_prompt(Task.from_json(rec), 3).messages(),
                              wrap_response(RELU, "fenced", "cuda")[0], max_length=4096)
    assert ds[0]["input_ids"] == direct["input_ids"] and ds[0]["labels"] == direct["labels"]
    assert report.supervised_tokens == sum(l != IGNORE_INDEX for l in direct["labels"])


def test_collator_pads_every_column_alike():
    rows = [{"input_ids": [5, 6, 7], "labels": [-100, 6, 7], "cuda_mask": [0.0, 1.0, 0.0]},
            {"input_ids": [8], "labels": [8], "cuda_mask": [1.0]}]
    batch = PadCollator(pad_token_id=0, pad_to_multiple_of=4)(rows)
    assert batch["input_ids"].tolist() == [[5, 6, 7, 0], [8, 0, 0, 0]]
    assert batch["labels"].tolist() == [[-100, 6, 7, -100], [8, -100, -100, -100]]
    assert batch["cuda_mask"].tolist() == [[0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0], [1, 0, 0, 0]]
    assert batch["cuda_mask"].dtype == torch.float32 and batch["labels"].dtype == torch.long
    with pytest.raises(ValueError, match="differ in length"):
        PadCollator(0)([{"input_ids": [1, 2], "labels": [1], "cuda_mask": [0.0, 0.0]}])


def test_read_examples_keeps_file_order_and_line_numbers(tmp_path):
    path = write_jsonl(tmp_path / "m.jsonl", [{"prompt": "a", "completion": "b"}, "", {"prompt": "c", "completion": "d"}])
    items = list(read_examples(path, RecordOptions()))
    assert [(i.line, i.response) for i in items] == [(1, "b"), (3, "d")]


def test_cuda_mask_column_is_built_from_spans(tmp_path, tokenizer, tasks_jsonl):
    ds, report = build_dataset(DataConfig(paths=[str(tasks_jsonl)], cache_dir=str(tmp_path)), tokenizer, progress=False)
    assert len(ds) == 3 and 0 < report.cuda_tokens < report.supervised_tokens
    for row in ds:
        assert len(row["cuda_mask"]) == len(row["input_ids"]) == len(row["labels"])
        assert all(l != IGNORE_INDEX for l, m in zip(row["labels"], row["cuda_mask"]) if m)
        assert sum(row["cuda_mask"]) > 0
    off, _ = build_dataset(DataConfig(paths=[str(tasks_jsonl)], cache_dir=str(tmp_path), cuda_mask=False), tokenizer, progress=False)
    assert off["input_ids"] == ds["input_ids"] and all(sum(r) == 0 for r in off["cuda_mask"])


def test_cuda_spans_paper_marks_fewer_tokens_than_broad(tmp_path, tokenizer):
    helper = ("__device__ float twice(float v) { return 2.0f * v; }\n" + VECTOR_ADD)
    path = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "Write it.", "completion": f"```cuda\n{helper}```"}])
    reports = {}
    for mode in ("broad", "paper"):
        cfg = DataConfig(paths=[str(path)], cache_dir=str(tmp_path / "cache"), cuda_spans=mode)
        ds, reports[mode] = build_dataset(cfg, tokenizer, progress=False)
        assert sum(ds[0]["cuda_mask"]) == reports[mode].cuda_tokens
    broad, paper = reports["broad"], reports["paper"]
    assert broad.supervised_tokens == paper.supervised_tokens
    assert 0 < paper.cuda_tokens < broad.cuda_tokens  # the __device__ helper and the cudaMalloc calls drop out
    assert broad.cache_key != paper.cache_key
    from cuset.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="cuda_spans: must be one of 'broad', 'paper', got 'narrow'"):
        load_config(DataConfig, None, ["cuda_spans=narrow"])


def test_tokenisation_cache_key_covers_every_module_that_decides_the_tokens():
    """The cache key hashes the source of TOKENISATION_PACKAGES. Every cuset module those
    packages import must lie inside them (prompt rendering in cuset.tasks once did not, so a
    change of the prompts reused stale tokenised data); only infrastructure that never
    shapes a token may lie outside."""
    import ast
    import importlib
    from pathlib import Path

    from cuset.tasks import render_prompt
    from cuset.train.data.build import TOKENISATION_PACKAGES

    # config parsing, path checks, cache root, progress bars, errors, file writes: none shapes a token
    infrastructure = {"cuset.config", "cuset.localpath", "cuset.cachedir", "cuset.progress", "cuset.errors", "cuset.io"}
    outside = set()
    for package in TOKENISATION_PACKAGES:
        for root in importlib.import_module(package).__path__:
            for path in Path(root).rglob("*.py"):
                for node in ast.walk(ast.parse(path.read_text())):
                    names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module else
                             [a.name for a in node.names] if isinstance(node, ast.Import) else [])
                    outside |= {(n, path.name) for n in names
                                if n.startswith("cuset") and not n.startswith(TOKENISATION_PACKAGES)}
    assert {n for n, _ in outside} <= infrastructure, f"add these packages to TOKENISATION_PACKAGES: {outside}"
    assert render_prompt.__module__.startswith(TOKENISATION_PACKAGES)
