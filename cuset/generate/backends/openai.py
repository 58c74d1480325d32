"""Any OpenAI-compatible chat-completions server (vLLM, SGLang, TGI, llama.cpp, hosted APIs).

Requests run on `concurrency` threads; 429, 5xx, timeouts and connection errors
are retried with exponential backoff (honouring Retry-After); a request the
server rejects as invalid (400/413/422, e.g. a prompt longer than the context)
becomes a sample with no code and finish_reason "error: ..."; bad credentials or
an unknown model (401/403/404) stop the run with a clear error.

Several endpoints (`base_urls`, e.g. one `vllm serve` per node) share the requests: each
has its own `concurrency` slots, a request goes to the healthy endpoint with the most
free slots, and an endpoint that fails (connection error, timeout, 5xx, 429) is set
aside for a cooldown that doubles with each consecutive failure while its requests
fail over to the others at once; only when every endpoint is cooling down does a
request wait.
"""

from __future__ import annotations

import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Iterator, Sequence

from cuset.generate.backends.interface import Completion, GenerationError, GenRequest
from cuset.generate.seeds import sample_seed
from cuset.tasks.reasoning import split_reasoning

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
FATAL_STATUS = {401, 403, 404}


class _Endpoint:
    """One server: its URL, free request slots and health."""

    def __init__(self, base_url: str, slots: int):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.free = slots
        self.failures = 0           # consecutive
        self.down_until = 0.0       # time.monotonic() before which it gets no request
        self.requests = 0


class OpenAIGenerator:
    def __init__(self, *, base_url: str | Sequence[str], model_name: str, api_key: str | None = None,
                 concurrency: int = 8, max_retries: int = 6, backoff_initial: float = 1.0, backoff_max: float = 60.0,
                 request_timeout: float = 600.0, temperature: float = 0.8, top_p: float = 0.95,
                 max_new_tokens: int = 4096, seed: int | None = 0, tokenizer=None, sleep=time.sleep):
        import httpx

        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        if not urls:
            raise GenerationError("openai: no endpoint: set openai.base_url or openai.base_urls=[...]")
        self.model_name = model_name
        self.endpoints = [_Endpoint(u, concurrency) for u in urls]
        self.url = self.endpoints[0].url if len(urls) == 1 else f"{len(urls)} endpoints"
        self._slots = threading.Condition()
        self.concurrency, self.max_retries = concurrency * len(urls), max_retries
        self.backoff_initial, self.backoff_max = backoff_initial, backoff_max
        self.temperature, self.top_p, self.max_new_tokens, self.seed = temperature, top_p, max_new_tokens, seed
        self.tokenizer = tokenizer
        self._sleep = sleep
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(headers=headers, timeout=request_timeout,
                                    limits=httpx.Limits(max_connections=self.concurrency))
        self._tok_lock = threading.Lock()

    @classmethod
    def from_config(cls, cfg) -> "OpenAIGenerator":
        if not cfg.model:
            raise GenerationError("set model=<served model name> for the openai backend")
        o, s = cfg.openai, cfg.sampling
        tokenizer = None
        if cfg.tokenizer:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(cfg.tokenizer)
        return cls(base_url=list(o.base_urls) or o.base_url, model_name=cfg.model, api_key=os.environ.get(o.api_key_env),
                   concurrency=o.concurrency, max_retries=o.max_retries, backoff_initial=o.backoff_initial,
                   backoff_max=o.backoff_max, request_timeout=o.request_timeout, temperature=s.temperature,
                   top_p=s.top_p, max_new_tokens=s.max_new_tokens, seed=s.seed, tokenizer=tokenizer)

    def generate(self, requests: Sequence[GenRequest]) -> Iterator[tuple[GenRequest, Completion]]:
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="openai") as pool:
            futures = {pool.submit(self._one, r): r for r in requests}
            try:
                for fut in as_completed(futures):
                    yield futures[fut], fut.result()
            except BaseException:
                for f in futures:
                    f.cancel()
                raise

    def close(self) -> None:
        self._client.close()

    # -- one request -------------------------------------------------------

    def _payload(self, req: GenRequest) -> dict:
        body = {"model": self.model_name, "messages": list(req.messages), "temperature": self.temperature,
                "top_p": self.top_p, "max_tokens": self.max_new_tokens, "n": 1}
        if self.seed is not None:
            body["seed"] = sample_seed(self.seed, req.task_id, req.sample)
        return body

    def _one(self, req: GenRequest) -> Completion:
        import httpx

        t0 = time.perf_counter()
        last = ""
        failed_here: set[int] = set()  # endpoints that failed this request: tried again only when no other can be
        for attempt in range(self.max_retries + 1):
            ep = self._acquire(failed_here)
            try:
                try:
                    resp = self._client.post(ep.url, json=self._payload(req))
                except (httpx.TimeoutException, httpx.TransportError) as e:
                    last = f"{ep.url}: {type(e).__name__}: {e}"
                    failed_here.add(id(ep))
                    self._failed(ep, attempt, None)
                    continue
                if resp.status_code == 200:
                    self._succeeded(ep)
                    return self._completion(resp, time.perf_counter() - t0, ep.url)
                last = f"HTTP {resp.status_code}: {resp.text[:300]}"
                if resp.status_code in FATAL_STATUS:
                    raise GenerationError(f"{ep.url} refused the request ({last}); check base_url, model and the "
                                          "API key")
                if resp.status_code in RETRY_STATUS:
                    failed_here.add(id(ep))
                    self._failed(ep, attempt, resp.headers.get("retry-after"))
                    continue
                # The server judged this request invalid: a failed sample, not a failed run.
                self._succeeded(ep)
                return Completion("", 0, f"error: {last}", time.perf_counter() - t0)
            finally:
                self._release(ep)
        raise GenerationError(f"{self.url}: giving up on task {req.task_id} sample {req.sample} after "
                              f"{self.max_retries + 1} attempts ({last}); re-run to resume")

    # -- endpoints ---------------------------------------------------------

    def _acquire(self, avoid: set[int] = frozenset()) -> _Endpoint:
        """A slot on the healthy endpoint with the most free slots; waits while none is free or healthy.

        Endpoints in `avoid` (ids of those that already failed this request) are taken only when
        every other endpoint is cooling down: a busy live endpoint is worth waiting for, since a
        dead one has all its slots free and would otherwise win every pick once its cooldown ends."""
        with self._slots:
            while True:
                now = time.monotonic()
                healthy = [e for e in self.endpoints if e.down_until <= now and e.free > 0]
                fresh = [e for e in healthy if id(e) not in avoid]
                others_up = any(id(e) not in avoid and e.down_until <= now for e in self.endpoints)
                if fresh or (healthy and not others_up):
                    ep = max(fresh or healthy, key=lambda e: e.free)
                    ep.free -= 1
                    ep.requests += 1
                    return ep
                wake = min((e.down_until for e in self.endpoints if e.down_until > now), default=now + 1.0)
                self._slots.wait(timeout=max(0.001, min(wake - now, 1.0)))

    def _release(self, ep: _Endpoint) -> None:
        with self._slots:
            ep.free += 1
            self._slots.notify_all()

    def _succeeded(self, ep: _Endpoint) -> None:
        with self._slots:
            ep.failures = 0

    def _failed(self, ep: _Endpoint, attempt: int, retry_after: str | None) -> None:
        """Cool the endpoint down; with another endpoint healthy the request fails over at once."""
        with self._slots:
            ep.failures += 1
            if len(self.endpoints) > 1:
                cooldown = min(self.backoff_max, self.backoff_initial * 2 ** (ep.failures - 1))
                ep.down_until = time.monotonic() + cooldown
                if any(e.down_until <= time.monotonic() for e in self.endpoints):
                    return
        self._backoff(attempt, retry_after)

    def _backoff(self, attempt: int, retry_after: str | None) -> None:
        if attempt >= self.max_retries:
            return
        wait = min(self.backoff_max, self.backoff_initial * 2 ** attempt) * (0.5 + random.random() / 2)
        if retry_after:
            try:
                wait = min(self.backoff_max, max(wait, float(retry_after)))
            except ValueError:
                pass
        self._sleep(wait)

    def _completion(self, resp, seconds: float, url: str) -> Completion:
        try:
            data = resp.json()
            choice = data["choices"][0]
            text = choice["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise GenerationError(f"{url} answered 200 without a chat completion ({e}): {resp.text[:300]}") from None
        message = choice["message"]
        reasoning = message.get("reasoning_content") or message.get("reasoning") or None
        n_tokens = reasoning_tokens = None
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        if self.tokenizer is not None:
            n_tokens = self._count_tokens(text) + (self._count_tokens(reasoning) if reasoning else 0)
            split = split_reasoning(text, reasoning)
            reasoning_tokens = self._count_tokens(split.reasoning) if split.reasoning is not None else None
        else:
            n_tokens = usage.get("completion_tokens")
            details = usage.get("completion_tokens_details")
            if isinstance(details, dict) and details.get("reasoning_tokens") is not None:
                reasoning_tokens = details["reasoning_tokens"]
        return Completion(text, n_tokens, choice.get("finish_reason"), seconds, reasoning, reasoning_tokens)

    def _count_tokens(self, text: str) -> int:
        with self._tok_lock:
            return len(self.tokenizer.encode(text, add_special_tokens=False))
