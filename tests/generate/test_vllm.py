import sys

import pytest

from cuset.config import load_config
from cuset.errors import CusetError
from cuset.generate.backends.interface import GenerationError
from cuset.generate.backends.registry import get_generator
from cuset.generate.config import GenerateConfig


def test_missing_vllm_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    cfg = load_config(GenerateConfig, None, ["backend=vllm", "model=x"])
    with pytest.raises(GenerationError, match=r"pip install -e '\.\[vllm\]'"):
        get_generator("vllm", cfg)


def test_unknown_backend():
    with pytest.raises(CusetError, match="unknown generation backend 'tgi': use hf, vllm or openai"):
        get_generator("tgi", None)


@pytest.mark.gpu
def test_vllm_generates_on_a_gpu(tiny_model_dir, tmp_path, make_record):
    pytest.importorskip("vllm")
    import json

    from cuset.generate.records import load_generations
    from cuset.generate.run import generate_file

    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps(make_record(0)) + "\n")
    cfg = load_config(GenerateConfig, None, [f"tasks={tasks}", f"out={tmp_path / 'g.jsonl'}", "backend=vllm",
                                             f"model={tiny_model_dir}", "n_samples=2", "sampling.max_new_tokens=8",
                                             "progress=false", "vllm.gpu_memory_utilization=0.2"])
    generate_file(cfg)
    recs = load_generations(cfg.out)
    assert len(recs) == 2 and all(1 <= r.n_tokens <= 8 for r in recs)
