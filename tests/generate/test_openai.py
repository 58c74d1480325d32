"""The OpenAI-compatible backend against a real HTTP server on 127.0.0.1."""

import json

import pytest

from cuset.config import load_config
from cuset.generate.backends.interface import GenerationError
from cuset.generate.config import GenerateConfig
from cuset.generate.records import load_generations
from cuset.generate.run import generate_file


def setup(tmp_path, make_record, server, n_tasks=3, **kw):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(make_record(i)) + "\n" for i in range(n_tasks)))
    over = {"tasks": tasks, "out": tmp_path / "gens.jsonl", "backend": "openai", "model": "served-model",
            "n_samples": 2, "progress": "false", "openai.base_url": server.url, "openai.concurrency": 2,
            "openai.backoff_initial": 0.01, "openai.backoff_max": 0.05, **kw}
    return load_config(GenerateConfig, None, [f"{k}={v}" for k, v in over.items()])


def test_retries_429_and_500_then_succeeds_within_concurrency(tmp_path, make_record, server_factory, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    server = server_factory(script=[429, 500])
    cfg = setup(tmp_path, make_record, server)
    stats = generate_file(cfg)
    assert stats.requested == 6
    assert len(server.requests) == 8               # 6 samples + 2 retried failures
    assert server.max_in_flight <= 2
    path, body, auth = server.requests[-1]
    assert path == "/v1/chat/completions" and auth == "Bearer sk-test"
    assert body["model"] == "served-model" and body["messages"][0]["role"] == "system" and body["n"] == 1
    recs = {r.key: r for r in load_generations(cfg.out)}
    assert sorted(recs) == [(t, s) for t in range(3) for s in range(2)]
    r = recs[(2, 1)]
    assert r.n_tokens == 17 and r.finish_reason == "stop" and r.model == "served-model"
    assert r.code == "__global__ void k() {}\nint main() { return 1847762632; }\n"   # sample_seed(0, 2, 1)


def test_resume_requests_only_missing_samples(tmp_path, make_record, server_factory):
    server = server_factory()
    cfg = setup(tmp_path, make_record, server)
    generate_file(cfg)
    lines = open(cfg.out).read().splitlines()
    open(cfg.out, "w").write("\n".join(lines[:4]) + "\n" + lines[4][:25])   # interrupted mid-line
    before = len(server.requests)
    stats = generate_file(cfg)
    assert stats.requested == 2 and stats.already_done == 4
    assert len(server.requests) - before == 2
    assert len(load_generations(cfg.out)) == 6


def test_bad_credentials_stop_the_run(tmp_path, make_record, server_factory):
    server = server_factory(always=401)
    cfg = setup(tmp_path, make_record, server, n_tasks=1)
    with pytest.raises(GenerationError, match="HTTP 401.*check base_url, model and the API key"):
        generate_file(cfg)


def test_invalid_request_is_a_failed_sample(tmp_path, make_record, server_factory):
    server = server_factory(always=400)
    cfg = setup(tmp_path, make_record, server, n_tasks=1)
    generate_file(cfg)
    recs = load_generations(cfg.out)
    assert len(recs) == 2 and all(r.code is None and r.finish_reason.startswith("error: HTTP 400") for r in recs)


def test_gives_up_after_max_retries(tmp_path, make_record, server_factory):
    server = server_factory(always=503)
    cfg = setup(tmp_path, make_record, server, n_tasks=1, n_samples=1, **{"openai.max_retries": 2})
    with pytest.raises(GenerationError, match="giving up on task 0 sample 0 after 3 attempts"):
        generate_file(cfg)
    assert len(server.requests) == 3


def test_unreachable_server(tmp_path, make_record, server_factory):
    server = server_factory()
    server.close()
    cfg = setup(tmp_path, make_record, server, n_tasks=1, n_samples=1, **{"openai.max_retries": 1})
    with pytest.raises(GenerationError, match="ConnectError"):
        generate_file(cfg)


def test_token_count_with_local_tokenizer(tmp_path, make_record, server_factory, tiny_model_dir):
    from transformers import AutoTokenizer

    server = server_factory()
    cfg = setup(tmp_path, make_record, server, n_tasks=1, n_samples=1, tokenizer=tiny_model_dir)
    generate_file(cfg)
    (r,) = load_generations(cfg.out)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert r.n_tokens == len(tok.encode(r.response, add_special_tokens=False)) != 17


def test_several_endpoints_share_the_load_and_fail_over(tmp_path, make_record, server_factory):
    a, b, down = server_factory(delay=0.05), server_factory(delay=0.05), server_factory()
    down.close()  # connection refused: as a node whose vllm serve died
    urls = f"[{a.url},{down.url},{b.url}]"
    cfg = setup(tmp_path, make_record, a, n_tasks=6, **{"openai.base_urls": urls, "openai.max_retries": 3})
    stats = generate_file(cfg)
    assert stats.requested == 12
    recs = {r.key: r for r in load_generations(cfg.out)}
    assert sorted(recs) == [(t, s) for t in range(6) for s in range(2)]
    assert all(r.code and r.finish_reason == "stop" for r in recs.values())
    assert len(a.requests) + len(b.requests) == 12  # each sample answered once, by a live endpoint
    assert len(a.requests) >= 3 and len(b.requests) >= 3  # spread over both
    assert a.max_in_flight <= 2 and b.max_in_flight <= 2  # concurrency is per endpoint


def test_several_endpoints_all_down_give_up_naming_them(tmp_path, make_record, server_factory):
    x, y = server_factory(always=503), server_factory(always=503)
    cfg = setup(tmp_path, make_record, x, n_tasks=1, n_samples=1,
                **{"openai.base_urls": f"[{x.url},{y.url}]", "openai.max_retries": 3})
    with pytest.raises(GenerationError, match="2 endpoints: giving up on task 0 sample 0 after 4 attempts"):
        generate_file(cfg)
    assert len(x.requests) + len(y.requests) == 4 and x.requests and y.requests


QUOTED = "```cuda\n__global__ void draft() {}\nint main() { return 99; }\n```"


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_a_reasoning_models_trace_is_kept_apart_and_never_extracted(tmp_path, make_record, server_factory, key):
    server = server_factory(reasoning=f"First a draft:\n{QUOTED}\nNo, better:", reasoning_key=key)
    cfg = setup(tmp_path, make_record, server, n_tasks=1, n_samples=1)
    generate_file(cfg)
    (rec,) = load_generations(cfg.out)
    assert rec.code == "__global__ void k() {}\nint main() { return 182970222; }\n"  # the answer's (sample_seed(0, 0, 0))
    assert rec.reasoning.startswith("First a draft:") and "draft()" in rec.reasoning
    assert rec.n_tokens == 40 and rec.reasoning_tokens == 23


def test_an_inline_trace_quoting_code_is_stripped_and_an_unclosed_one_leaves_no_code(tmp_path, make_record,
                                                                                      server_factory):
    answer = "```cuda\n__global__ void k() {}\nint main() { return 1; }\n```"
    closed = server_factory(content=f"<think>\nLet me try:\n{QUOTED}\n</think>\n{answer}")
    cfg = setup(tmp_path, make_record, closed, n_tasks=1, n_samples=1)
    generate_file(cfg)
    (rec,) = load_generations(cfg.out)
    assert rec.code == "__global__ void k() {}\nint main() { return 1; }\n"
    assert "draft()" in rec.reasoning and rec.response.startswith("<think>")
    cut = server_factory(content=f"<think>\nLet me try:\n{QUOTED}\nHmm, and then")  # max tokens inside the trace
    (tmp_path / "cut").mkdir()
    cfg = setup(tmp_path / "cut", make_record, cut, n_tasks=1, n_samples=1)
    generate_file(cfg)
    (rec,) = load_generations(cfg.out)
    assert rec.code is None and "draft()" in rec.reasoning
