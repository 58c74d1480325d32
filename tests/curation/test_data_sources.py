import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from cuset.config import ConfigError, load_config
from cuset.curation.config import DataBuildConfig, SourceConfig
from cuset.curation.sources import SourceError, scan_sources

from conftest import MAX_FILE_BYTES


def src(**kw):
    return SourceConfig(**kw)


def test_cuda_dir_skips_every_unusable_file_by_reason(mixed_dir):
    scan = scan_sources([src(kind="cuda_dir", path=str(mixed_dir), label="gh")], MAX_FILE_BYTES)
    reasons = {s.origin.rsplit("/", 1)[1]: s.reason for s in scan.skips}
    assert reasons == {
        "blob.cu": "binary", "latin1.cu": "non_utf8", "huge.cu": "oversized", "gone.cu": "unreadable",
        "helpers.cuh": "no_kernel", "vector_add.cu": "identical_copy",  # sub/vector_add.cu, a byte copy
    }
    names = [c.origin.rsplit("/", 1)[1] for c in scan.candidates]
    assert names == ["bad_reply.cu", "broken_crash.cu", "broken_syntax.cu", "broken_wrong.cu", "incomplete_reply.cu",
                     "leaky_relu_copy.cu", "row_sum.cu", "vector_add.cu", "vector_add_checked.cu", "vector_add_copy.cu"]
    assert all(c.kind == "code" and c.source == "gh" for c in scan.candidates)
    copy = next(s for s in scan.skips if s.reason == "identical_copy")
    assert copy.origin.endswith("sub/vector_add.cu") and "cuda/vector_add.cu" in copy.detail
    assert scan.per_source["gh"] == Counter({"candidates": 10, "skipped:binary": 1, "skipped:non_utf8": 1,
                                             "skipped:oversized": 1, "skipped:unreadable": 1,
                                             "skipped:no_kernel": 1, "skipped:identical_copy": 1})


def test_size_limit_is_configurable(mixed_dir):
    big = scan_sources([src(kind="cuda_dir", path=str(mixed_dir))], 1_000_000)
    assert "oversized" not in big.skipped_by_reason()
    assert any(c.origin.endswith("huge.cu") for c in big.candidates)
    tiny = scan_sources([src(kind="cuda_dir", path=str(mixed_dir))], 1000)
    over = sorted(s.origin.split("cuda/", 1)[1] for s in tiny.skips if s.reason == "oversized")
    assert over == ["broken_crash.cu", "huge.cu", "leaky_relu_copy.cu", "row_sum.cu", "sub/vector_add.cu",
                    "vector_add.cu", "vector_add_checked.cu", "vector_add_copy.cu"]  # the files over 1000 bytes


def test_pairs_and_tasks(fixtures):
    scan = scan_sources([src(kind="pairs_jsonl", path=str(fixtures / "pairs.jsonl")),
                         src(kind="tasks_jsonl", path=str(fixtures / "tasks.jsonl"))], MAX_FILE_BYTES)
    assert [(s.origin.rsplit("/", 1)[1], s.reason) for s in scan.skips] == [
        ("pairs.jsonl:2", "bad_json"), ("pairs.jsonl:3", "missing_field"), ("pairs.jsonl:4", "no_code"),
        ("tasks.jsonl:2", "task_missing_field")]
    pair, task = scan.candidates
    assert pair.kind == "pair" and pair.prompt.startswith("Write a CUDA program that cubes")
    assert pair.code.startswith("#include <fstream>") and pair.code.rstrip().endswith("}")  # fence and prose removed
    assert task.kind == "task" and task.task["task_name"] == "Vector_Negate" and task.code == task.task["bench.cu"]


def test_same_task_under_another_id_is_an_identical_copy(tmp_path, fixtures):
    rec = json.loads((fixtures / "tasks.jsonl").read_text().splitlines()[0])
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(rec) + "\n" + json.dumps({**rec, "id": 999}) + "\n")
    scan = scan_sources([src(kind="tasks_jsonl", path=str(path))], MAX_FILE_BYTES)
    assert len(scan.candidates) == 1 and [s.reason for s in scan.skips] == ["identical_copy"]


def test_hf_source_reads_a_local_dataset_directory(tmp_path, fixtures):
    d = tmp_path / "hf_pairs"
    d.mkdir()
    (d / "train.jsonl").write_text((fixtures / "pairs.jsonl").read_text().splitlines()[0] + "\n")
    scan = scan_sources([src(kind="hf", path=str(d), format="pairs")], MAX_FILE_BYTES)
    assert [c.kind for c in scan.candidates] == ["pair"]
    assert scan.candidates[0].origin == f"{d}[train]:1"


def test_hf_source_offline_gives_a_clear_error(tmp_path):
    # huggingface_hub reads HF_HUB_OFFLINE when imported: use a fresh interpreter
    script = ("from cuset.curation.config import SourceConfig\n"
              "from cuset.curation.sources import SourceError, scan_sources\n"
              "try:\n"
              "    scan_sources([SourceConfig(kind='hf', path='no-such-org/no-such-dataset-cuset')], 100)\n"
              "except SourceError as e:\n"
              "    print('SourceError:', e)\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("SourceError: Hugging Face dataset 'no-such-org/no-such-dataset-cuset'")
    assert "offline" in proc.stdout and "Traceback" not in proc.stdout


def test_missing_paths_name_the_source(tmp_path):
    with pytest.raises(SourceError, match=r"source 'mine'.*not a directory"):
        scan_sources([src(kind="cuda_dir", path=str(tmp_path / "nope"), label="mine")], 100)
    with pytest.raises(SourceError, match="no such file"):
        scan_sources([src(kind="pairs_jsonl", path=str(tmp_path / "nope.jsonl"))], 100)


def test_config_errors_are_listed_together(tmp_path):
    with pytest.raises(ConfigError) as exc:
        load_config(DataBuildConfig, None, base={
            "sources": [{"kind": "cuda_directory", "path": "x"}, {"kind": "hf"}],
            "llm": {"concurency": 2}, "dedup": {"near_threshold": 1.5}})
    text = "\n".join(exc.value.errors)
    assert "sources[0].kind: must be one of" in text and "did you mean 'cuda_dir'" in text
    assert "llm.concurency: unknown key (did you mean 'llm.concurrency'?)" in text
    # value checks run once the keys and types are right
    with pytest.raises(ConfigError, match="needs a `path`"):
        load_config(DataBuildConfig, None, base={"sources": [{"kind": "hf"}]})
    with pytest.raises(ConfigError, match=r"near_threshold must be in \(0, 1\]"):
        load_config(DataBuildConfig, None, base={"sources": [{"path": "x"}], "dedup": {"near_threshold": 1.5}})
    with pytest.raises(ConfigError, match="no sources"):
        load_config(DataBuildConfig, None, base={})
