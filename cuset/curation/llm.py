"""A small client for OpenAI-compatible chat-completions servers, with a disk cache
and hard limits on what one build may spend.

- Replies are cached on disk, one JSON file per request, named by the SHA-256 of
  the request body (model, messages, sampling settings; not the server address, so
  the same request to a restarted or moved server is still a hit).
- `max_requests` counts HTTP requests actually sent (retries included);
  `max_total_tokens` counts the usage the server reports. When either is spent,
  `BudgetExhausted` is raised and the caller stops asking.
- Connection errors, 429 and 5xx are retried with exponential backoff (Retry-After
  wins). Other 4xx replies and a server that stays unreachable raise `LLMFatalError`:
  every later request would fail the same way, so the build stops with a clear message.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, TypeVar

from cuset.errors import CusetError
from cuset.curation.config import LLMConfig
from cuset.io import atomic_write_json

MAX_BACKOFF_S = 60.0


class BudgetExhausted(CusetError, RuntimeError):
    """The configured request or token budget is spent."""


class LLMFatalError(CusetError, RuntimeError):
    """The server cannot answer this configuration (bad URL, key, model, or it is down)."""


class LLMReplyError(RuntimeError):
    """One reply is unusable (no choices, empty content); the item is rejected, the build goes on."""

    def __init__(self, reason: str, detail: str):
        self.reason = reason
        super().__init__(detail)


@dataclass(frozen=True)
class ChatReply:
    content: str
    request_key: str
    cached: bool
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = ""
    reasoning: str | None = None  # a reasoning model's separate trace (reasoning_content / reasoning), if sent


class ReplyCache:
    """Directory of `<aa>/<sha256>.json` files, written atomically."""

    def __init__(self, directory: str | os.PathLike):
        self.dir = Path(directory)

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        try:
            return json.loads(self._path(key).read_text(encoding="utf-8"))["response"]
        except (OSError, json.JSONDecodeError, KeyError, TypeError):
            return None

    def put(self, key: str, request: dict, response: dict) -> None:
        atomic_write_json(self._path(key), {"request": request, "response": response})


def request_key(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


class ChatClient:
    """Thread-safe: one client is shared by the synthesis workers."""

    def __init__(self, cfg: LLMConfig, cache_dir: str | os.PathLike, *, transport=None, sleep=time.sleep):
        self.cfg = cfg
        self.cache = ReplyCache(cache_dir)
        self._transport = transport
        self._sleep = sleep
        self._lock = threading.Lock()
        self._http = None
        self.requests_sent = 0
        self.cache_hits = 0
        self.retries = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    # -- public ---------------------------------------------------------------
    def body(self, messages: list[dict], overrides: dict | None = None) -> dict:
        body = {"model": self.cfg.model, "messages": messages, "temperature": self.cfg.temperature,
                "max_tokens": self.cfg.max_tokens}
        if self.cfg.json_mode:
            body["response_format"] = {"type": "json_object"}
        return {**body, **(overrides or {})}

    def complete(self, messages: list[dict], overrides: dict | None = None) -> ChatReply:
        """One reply (cached by the request body); `overrides` replace or add body fields (model, seed, ...)."""
        body = self.body(messages, overrides)
        key = request_key(body)
        cached = self.cache.get(key)
        if cached is not None:
            with self._lock:
                self.cache_hits += 1
            return _reply(cached, key, cached=True)
        response = self._post_with_retries(body)
        reply = _reply(response, key, cached=False)  # raises LLMReplyError before caching junk
        self.cache.put(key, body, response)
        return reply

    def stats(self) -> dict:
        return {"requests_sent": self.requests_sent, "cache_hits": self.cache_hits, "retries": self.retries,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    # -- internals ------------------------------------------------------------
    def _client(self):
        import httpx

        with self._lock:
            if self._http is None:
                headers = {}
                key = os.environ.get(self.cfg.api_key_env, "") if self.cfg.api_key_env else ""
                if key:
                    headers["Authorization"] = f"Bearer {key}"
                self._http = httpx.Client(base_url=self.cfg.base_url.rstrip("/") + "/", headers=headers,
                                          timeout=self.cfg.timeout_s, transport=self._transport)
            return self._http

    def _claim_request(self) -> None:
        with self._lock:
            if self.requests_sent >= self.cfg.max_requests:
                raise BudgetExhausted(f"llm.max_requests={self.cfg.max_requests} requests sent")
            spent = self.prompt_tokens + self.completion_tokens
            if spent >= self.cfg.max_total_tokens:
                raise BudgetExhausted(f"llm.max_total_tokens={self.cfg.max_total_tokens} tokens spent ({spent})")
            self.requests_sent += 1

    def _post_with_retries(self, body: dict) -> dict:
        import httpx

        url = self.cfg.base_url.rstrip("/") + "/chat/completions"
        last = ""
        for attempt in range(self.cfg.max_retries + 1):
            if attempt:
                with self._lock:
                    self.retries += 1
            self._claim_request()
            retry_after = None
            try:
                resp = self._client().post("chat/completions", json=body)
            except httpx.TransportError as e:  # connect/read errors and timeouts
                last = f"{type(e).__name__}: {e}"
            else:
                if resp.status_code == 200:
                    return self._decode(resp, url)
                last = f"HTTP {resp.status_code}: {resp.text[:300]}"
                if resp.status_code != 429 and resp.status_code < 500:
                    raise LLMFatalError(
                        f"{url} answered {last}. Check llm.base_url, llm.model ({self.cfg.model!r}) and the key in "
                        f"${self.cfg.api_key_env}.")
                retry_after = _retry_after(resp.headers.get("retry-after"))
            if attempt < self.cfg.max_retries:
                delay = retry_after if retry_after is not None else self.cfg.backoff_s * (2 ** attempt)
                self._sleep(min(MAX_BACKOFF_S, delay) * (1 + 0.1 * random.random()))
        raise LLMFatalError(f"no usable reply from {url} after {self.cfg.max_retries + 1} attempts ({last}). "
                            "Is the server running? (llm.base_url)")

    def _decode(self, resp, url: str) -> dict:
        try:
            data = resp.json()
        except ValueError:
            raise LLMFatalError(f"{url} answered 200 with a body that is not JSON: {resp.text[:200]!r}; "
                                "is llm.base_url an OpenAI-compatible /v1 endpoint?") from None
        usage = data.get("usage") if isinstance(data, dict) else None
        if isinstance(usage, dict):
            with self._lock:
                self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
                self.completion_tokens += int(usage.get("completion_tokens") or 0)
        return data


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _reply(response: dict, key: str, cached: bool) -> ChatReply:
    try:
        choice = response["choices"][0]
        message = choice["message"]
        content = message["content"]
    except (KeyError, IndexError, TypeError):
        raise LLMReplyError("llm_bad_reply", "reply has no choices[0].message.content") from None
    trace = message.get("reasoning_content") or message.get("reasoning")
    trace = trace if isinstance(trace, str) and trace.strip() else None
    content = "" if content is None and trace is not None else content
    # a trace with no answer (cut at max_tokens) is still a reply: the caller finds no code in it
    if not isinstance(content, str) or (not content.strip() and trace is None):
        raise LLMReplyError("llm_empty_reply", f"empty reply (finish_reason={choice.get('finish_reason')!r})")
    usage = response.get("usage") or {}
    return ChatReply(content, key, cached, int(usage.get("prompt_tokens") or 0),
                     int(usage.get("completion_tokens") or 0), str(choice.get("finish_reason") or ""), trace)


Item = TypeVar("Item")


def ask_concurrently(items: Iterable[Item], ask: Callable[[Item], None], *, concurrency: int,
                     deferred: Counter, advance=None) -> None:
    """Run `ask(item)` for every item on `concurrency` threads (ask records its own result).
    An item the budget refuses is counted in deferred["llm_budget_exhausted"] and left for a
    later run; the first LLMFatalError (bad key, unknown model) starts no new request and is
    raised once those in flight finish; Ctrl-C does the same. `advance()` ticks once an item."""
    stop = threading.Event()
    fatal: list[BaseException] = []
    lock = threading.Lock()

    def work(item: Item) -> None:
        if stop.is_set():
            return
        try:
            ask(item)
        except BudgetExhausted:
            with lock:
                deferred["llm_budget_exhausted"] += 1
        except LLMFatalError as e:
            stop.set()
            with lock:
                fatal.append(e)
        finally:
            if advance is not None:
                advance()

    pool = ThreadPoolExecutor(max_workers=max(1, concurrency))
    try:
        list(pool.map(work, items))
    except BaseException:  # Ctrl-C: finish the requests in flight, start no new ones
        stop.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if fatal:
        raise fatal[0]
