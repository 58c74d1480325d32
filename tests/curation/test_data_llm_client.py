import json
import socket

import pytest

from cuset.curation.config import LLMConfig
from cuset.curation.llm import BudgetExhausted, ChatClient, LLMFatalError, LLMReplyError, request_key

from llm_fakes import FakeLLMServer

MSGS = [{"role": "system", "content": "s"}, {"role": "user", "content": "Program:\n```cuda\n__global__ void row_sum() {}\n```"}]


def client(server_url, tmp_path, sleeps=None, **cfg):
    conf = LLMConfig(base_url=server_url, model="fake-coder", backoff_s=0.5, **cfg)
    return ChatClient(conf, tmp_path / "cache", sleep=(sleeps.append if sleeps is not None else lambda s: None))


def test_replies_are_cached_on_disk_across_clients(tmp_path, fake_llm, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    c = client(fake_llm.base_url, tmp_path)
    first = c.complete(MSGS)
    assert not first.cached and fake_llm.requests == 1
    assert json.loads(first.content)["task_name"] == "Row_Sum"
    assert fake_llm.auth_headers == ["Bearer sk-test"]
    again = c.complete(MSGS)
    assert again.cached and again.content == first.content and fake_llm.requests == 1
    # a new client (a new build) with the same cache directory sends nothing either
    fresh = client(fake_llm.base_url, tmp_path)
    assert fresh.complete(MSGS).cached and fake_llm.requests == 1
    assert c.stats() == {"requests_sent": 1, "cache_hits": 1, "retries": 0,
                         "prompt_tokens": first.prompt_tokens, "completion_tokens": first.completion_tokens}
    # the cache entry is inspectable: request and response, named by the request hash
    key = request_key(c.body(MSGS))
    entry = json.loads((tmp_path / "cache" / key[:2] / f"{key}.json").read_text())
    assert entry["request"]["model"] == "fake-coder" and entry["response"]["choices"][0]["message"]["content"] == first.content


def test_cache_key_ignores_the_server_address_but_not_the_model(tmp_path, fake_llm):
    a = client(fake_llm.base_url, tmp_path)
    b = client("http://127.0.0.1:1/v1", tmp_path)
    c = ChatClient(LLMConfig(base_url=fake_llm.base_url, model="other-model"), tmp_path / "cache")
    assert request_key(a.body(MSGS)) == request_key(b.body(MSGS)) != request_key(c.body(MSGS))


def test_5xx_and_429_are_retried_with_backoff(tmp_path):
    sleeps = []
    with FakeLLMServer(failures=[(500, None), (429, "3"), (503, None)]) as server:
        c = client(server.base_url, tmp_path, sleeps=sleeps, max_retries=4)
        reply = c.complete(MSGS)
        assert json.loads(reply.content)["task_name"] == "Row_Sum"
        assert server.requests == 4
    assert c.stats()["retries"] == 3 and c.stats()["requests_sent"] == 4
    # 0.5 s, then Retry-After 3 s, then 0.5 * 2^2 s; up to 10% jitter on each
    assert len(sleeps) == 3 and all(lo <= s <= lo * 1.1 for s, lo in zip(sleeps, (0.5, 3.0, 2.0)))


def test_a_server_that_keeps_failing_stops_the_build(tmp_path):
    with FakeLLMServer(failures=[(502, None)] * 3) as server:
        c = client(server.base_url, tmp_path, max_retries=2)
        with pytest.raises(LLMFatalError, match=r"no usable reply from .* after 3 attempts \(HTTP 502"):
            c.complete(MSGS)
        assert server.requests == 3


def test_client_errors_are_fatal_at_once(tmp_path):
    with FakeLLMServer(failures=[(401, None)]) as server:
        c = client(server.base_url, tmp_path)
        with pytest.raises(LLMFatalError, match=r"HTTP 401.*llm.base_url, llm.model \('fake-coder'\)"):
            c.complete(MSGS)
        assert server.requests == 1
    with FakeLLMServer() as server:
        with pytest.raises(LLMFatalError, match="HTTP 404"):
            client(server.base_url.replace("/v1", "/wrong"), tmp_path).complete(MSGS)


def test_unreachable_server(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = client(f"http://127.0.0.1:{port}/v1", tmp_path, max_retries=1)
    with pytest.raises(LLMFatalError, match="Is the server running"):
        c.complete(MSGS)


def test_request_budget(tmp_path, fake_llm):
    c = client(fake_llm.base_url, tmp_path, max_requests=2)
    other = [MSGS[0], {"role": "user", "content": "```cuda\n__global__ void vector_add() {}\n```"}]
    third = [MSGS[0], {"role": "user", "content": "```cuda\n__global__ void cube_kernel() {}\n```"}]
    c.complete(MSGS)
    c.complete(other)
    with pytest.raises(BudgetExhausted, match="max_requests=2"):
        c.complete(third)
    assert fake_llm.requests == 2
    assert c.complete(MSGS).cached  # cached replies still come back once the budget is spent


def test_token_budget(tmp_path, fake_llm):
    c = client(fake_llm.base_url, tmp_path, max_total_tokens=10)
    c.complete(MSGS)  # spends more than 10 tokens
    with pytest.raises(BudgetExhausted, match="max_total_tokens=10"):
        c.complete([MSGS[0], {"role": "user", "content": "```cuda\n__global__ void vector_add() {}\n```"}])


def test_an_empty_reply_is_an_item_error_and_not_cached(tmp_path):
    with FakeLLMServer(replies={"row_sum": ""}) as server:
        c = client(server.base_url, tmp_path)
        with pytest.raises(LLMReplyError) as exc:
            c.complete(MSGS)
        assert exc.value.reason == "llm_empty_reply"
        with pytest.raises(LLMReplyError):
            c.complete(MSGS)
        assert server.requests == 2
