"""One chat client for every backend: vLLM, the local llama.cpp server, any OpenAI-compatible API.

Responses are cached in SQLite keyed by the whole request (model id, messages, sampling
parameters, schema), so re-running a table costs nothing and runs at temperature 0 are
deterministic. Every call is counted (calls, tokens, latency, cache hits) by purpose.
"""


from __future__ import annotations

import logging
import os
import time
from typing import Any

import httpx
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from core.api import ChatResult, LLMError, LLMOutputError, LLMUsage
from core.llm.cache import ResponseCache
from core.llm.meter import UsageMeter

log = logging.getLogger(__name__)


def _retryable(err: BaseException) -> bool:
    if isinstance(err, httpx.TransportError | httpx.TimeoutException):
        return True
    if isinstance(err, httpx.HTTPStatusError):
        return err.response.status_code in (408, 429, 500, 502, 503, 504)
    return False


class OpenAICompatClient:
    """Chat over the OpenAI HTTP API (vLLM, llama.cpp server, hosted endpoints).

    ``model`` may be None: the served model id is then read from ``/v1/models``.
    The API key is read from the environment variable named by ``api_key_env`` and is
    never written to the cache or to results.
    """

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        api_key_env: str | None = None,
        cache_path: str | None = None,
        timeout_s: float = 300.0,
        max_retries: int = 4,
        health_timeout_s: float = 0.0,
        extra_body: dict[str, Any] | None = None,
        context_tokens: int | None = None,
    ) -> None:
        self._base_url = base_url.rstrip("/") if base_url else ""
        self._model = model
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.health_timeout_s = health_timeout_s
        self.extra_body = dict(extra_body or {})
        self.context_tokens = context_tokens
        self.cache = ResponseCache(cache_path) if cache_path else None
        self.meter = UsageMeter()
        self._http: httpx.Client | None = None

    # -- connection -------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """Root URL of the server (without ``/v1``); subclasses may start a server here."""
        return self._base_url

    @property
    def api_base(self) -> str:
        """The ``.../v1`` URL that OpenAI-style libraries (Mem0, A-Mem) expect."""
        return self.base_url if self.base_url.endswith("/v1") else self.base_url + "/v1"

    @property
    def api_key(self) -> str:
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise LLMError(f"environment variable {self.api_key_env} (llm.api_key_env) is not set")
            return key
        return "sk-no-key-needed"

    def _client(self) -> httpx.Client:
        if self._http is None:
            self._http = httpx.Client(
                timeout=self.timeout_s, headers={"Authorization": f"Bearer {self.api_key}"}, trust_env=False
            )
            if self.health_timeout_s > 0:
                self.wait_until_healthy(self.health_timeout_s)
        return self._http

    def wait_until_healthy(self, timeout_s: float) -> None:
        """Poll ``/health`` (vLLM and llama.cpp) or ``/v1/models`` until the server answers."""
        deadline = time.monotonic() + timeout_s
        last: Exception | None = None
        assert self._http is not None
        while time.monotonic() < deadline:
            for path in ("/health", "/v1/models"):
                try:
                    root = self.base_url.removesuffix("/v1")
                    if self._http.get(root + path, timeout=5).status_code == 200:
                        return
                except httpx.HTTPError as err:
                    last = err
            time.sleep(1.0)
        raise LLMError(f"LLM server at {self.base_url} not healthy after {timeout_s:.0f}s (last error: {last})")

    @property
    def model_id(self) -> str:
        if self._model is None:
            response = self._client().get(self.api_base + "/models")
            response.raise_for_status()
            self._model = response.json()["data"][0]["id"]
            log.info("served model id: %s", self._model)
        return self._model

    @property
    def usage(self) -> LLMUsage:
        return self.meter.snapshot()

    # -- calls ------------------------------------------------------------------------
    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        client = self._client()
        for attempt in Retrying(
            stop=stop_after_attempt(self.max_retries),
            wait=wait_exponential(multiplier=1, min=1, max=30),
            retry=retry_if_exception(_retryable),
            reraise=True,
        ):
            with attempt:
                response = client.post(self.api_base + "/chat/completions", json=payload)
                response.raise_for_status()
                return response.json()
        raise AssertionError("unreachable")

    def chat(
        self,
        messages: list[dict[str, str]],
        *,
        response_schema: dict[str, Any] | None = None,
        max_tokens: int = 256,
        temperature: float = 0.0,
        seed: int = 0,
        purpose: str = "other",
        top_logprobs: int = 0,
    ) -> ChatResult:
        payload: dict[str, Any] = {
            "model": self.model_id,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "seed": seed,
            **self.extra_body,
        }
        if response_schema is not None:
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": response_schema, "strict": True},
            }
        if top_logprobs:
            payload["logprobs"] = True
            payload["top_logprobs"] = top_logprobs
        key = ResponseCache.key(payload)
        hit = self.cache.get(key) if self.cache else None
        if hit is not None:
            result = ChatResult(**{**hit, "cached": True})
        else:
            started = time.perf_counter()
            try:
                body = self._post(payload)
            except httpx.HTTPStatusError as err:
                raise LLMError(
                    f"LLM server {self.base_url} answered {err.response.status_code}: {err.response.text[:500]}"
                ) from err
            except httpx.HTTPError as err:
                raise LLMError(f"LLM server {self.base_url} unreachable after {self.max_retries} tries: {err}") from err
            choice = body["choices"][0]
            usage = body.get("usage") or {}
            result = ChatResult(
                text=choice["message"].get("content") or "",
                prompt_tokens=int(usage.get("prompt_tokens", 0)),
                completion_tokens=int(usage.get("completion_tokens", 0)),
                latency_s=time.perf_counter() - started,
                cached=False,
                model=self.model_id,
                logprobs=(choice.get("logprobs") or {}).get("content") if top_logprobs else None,
                cached_prompt_tokens=int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0),
            )
            if self.cache:
                self.cache.put(key, {k: v for k, v in result.__dict__.items() if k != "cached"})
        self.meter.record(purpose, result)
        return result

    def chat_json(
        self,
        messages: list[dict[str, str]],
        schema: dict[str, Any],
        *,
        max_tokens: int = 256,
        purpose: str = "other",
        attempts: int = 2,
    ) -> Any:
        """Structured call: json_schema output, parsed; retried with a new seed if it breaks."""
        last: LLMOutputError | None = None
        for seed in range(attempts):
            result = self.chat(messages, response_schema=schema, max_tokens=max_tokens, seed=seed, purpose=purpose)
            try:
                return result.json()
            except LLMOutputError as err:
                last = err
                log.warning("schema-breaking output (%s), attempt %d/%d", purpose, seed + 1, attempts)
        assert last is not None
        raise last

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None
