import json

import pytest

from cuset.config import load_config
from cuset.generate.backends.interface import GenerationError, GenRequest
from cuset.generate.backends.registry import get_generator
from cuset.generate.backends.hf import count_generated, render_chat
from cuset.generate.config import GenerateConfig
from cuset.generate.records import load_generations
from cuset.generate.run import generate_file
from cuset.tasks import save_tasks, Task


def test_count_generated_hand_cases():
    eos, pad = {2}, 0
    assert count_generated([5, 6, 2, 0, 0], eos, pad) == (3, "stop")     # EOS counted, padding not
    assert count_generated([5, 6, 7], eos, pad) == (3, "length")
    assert count_generated([5, 0, 0], eos, pad) == (1, "length")
    assert count_generated([2], eos, pad) == (1, "stop")
    assert count_generated([5, 2, 2], {2}, 2) == (2, "stop")             # pad == eos


def tasks_file(tmp_path, make_record, n=2):
    from cuset.tasks import load_tasks

    p = tmp_path / "tasks.jsonl"
    p.write_text("".join(json.dumps(make_record(i)) + "\n" for i in range(n)))
    return p


def config(tmp_path, model_dir, tasks, **kw):
    over = [f"tasks={tasks}", f"out={tmp_path / 'gens.jsonl'}", "backend=hf", f"model={model_dir}", "n_samples=2",
            "sampling.max_new_tokens=6", "hf.batch_size=3", "hf.device=cpu", "progress=false"]
    return load_config(GenerateConfig, None, over + [f"{k}={v}" for k, v in kw.items()])


def test_hf_generation_writes_records_with_token_counts(tmp_path, tiny_model_dir, make_record):
    from transformers import AutoTokenizer

    cfg = config(tmp_path, tiny_model_dir, tasks_file(tmp_path, make_record))
    stats = generate_file(cfg)
    assert stats.requested == 4 and stats.tasks == 2
    recs = load_generations(cfg.out)
    assert sorted(r.key for r in recs) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    for r in recs:
        assert r.model == str(tiny_model_dir) and r.level == 1 and r.task_name == "Vector_Add"
        assert 1 <= r.n_tokens <= 6
        assert r.finish_reason in ("stop", "length")
        if r.finish_reason == "length":
            assert r.n_tokens == 6
        assert r.seconds > 0


def test_hf_resume_only_fills_missing_samples(tmp_path, tiny_model_dir, make_record):
    cfg = config(tmp_path, tiny_model_dir, tasks_file(tmp_path, make_record))
    generate_file(cfg)
    lines = open(cfg.out).read().splitlines()
    keep = [l for l in lines if json.loads(l)["sample"] == 0]
    open(cfg.out, "w").write("\n".join(keep) + "\n")
    stats = generate_file(cfg)
    assert stats.requested == 2 and stats.already_done == 2
    assert sorted(r.key for r in load_generations(cfg.out)) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert generate_file(cfg).requested == 0


def test_greedy_is_deterministic(tmp_path, tiny_model_dir, make_record):
    cfg = config(tmp_path, tiny_model_dir, tasks_file(tmp_path, make_record, n=1), **{"sampling.temperature": 0})
    gen = get_generator("hf", cfg)
    req = GenRequest(0, 0, ({"role": "system", "content": "s"}, {"role": "user", "content": "write a kernel"}))
    (_, a), = list(gen.generate([req]))
    (_, b), = list(gen.generate([req]))
    assert a.text == b.text and a.n_tokens == b.n_tokens
    # Same count as generating by hand with the model and its tokenizer.
    import torch

    tok, model = gen.tokenizer, gen.model
    ids = tok(render_chat(tok, req.messages), return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        out = model.generate(ids, do_sample=False, max_new_tokens=6, pad_token_id=tok.pad_token_id)
    new = out[0, ids.shape[1]:].tolist()
    expected = new.index(tok.eos_token_id) + 1 if tok.eos_token_id in new else len(new)
    assert a.n_tokens == expected
    assert a.text == tok.decode(new[:expected], skip_special_tokens=True)


def test_chat_template_is_used(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = render_chat(tok, [{"role": "user", "content": "hi"}])
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_missing_model_is_a_clear_error(tmp_path, make_record):
    cfg = config(tmp_path, tmp_path / "no-such-model", tasks_file(tmp_path, make_record, n=1))
    with pytest.raises(GenerationError, match="model: .*no-such-model: no such file or directory"):
        generate_file(cfg)


def test_every_shipped_generate_config_loads():
    from pathlib import Path

    paths = sorted(Path(__file__).resolve().parents[2].glob("configs/generate/*.yaml"))
    assert paths, "configs/generate has no configs"
    for p in paths:
        load_config(GenerateConfig, p)
