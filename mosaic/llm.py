"""One chat client for every backend: vLLM, the local llama.cpp server, any OpenAI-compatible API.

Responses are cached in SQLite keyed by the whole request (model id, messages, sampling
parameters, schema), so re-running a table costs nothing and runs at temperature 0 are
deterministic. Every call is counted (calls, tokens, latency, cache hits) by purpose.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import httpx
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from mosaic.protocol import LLMUsage

log = logging.getLogger(__name__)


class LLMError(RuntimeError):
    """The server could not be reached or kept failing after bounded retries."""


class LLMOutputError(ValueError):
    """The model's output broke the requested JSON schema even after retries."""


@dataclass
class ChatResult:
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool
    model: str
    logprobs: list[dict[str, Any]] | None = None
    cached_prompt_tokens: int = 0  # prompt tokens the server reused from its prefix cache (usage.prompt_tokens_details)

    def json(self) -> Any:
        """Parse the text as JSON, tolerating a Markdown code fence around it."""
        text = self.text.strip()
        if text.startswith("```"):
            text = text.strip("`")
            text = text[text.find("\n") + 1 :] if "\n" in text else text
        try:
            return json.loads(text)
        except json.JSONDecodeError as err:
            raise LLMOutputError(f"model output is not valid JSON: {err}: {self.text[:300]!r}") from err


@runtime_checkable
class LLMClient(Protocol):
    """The chat interface every component uses (systems, answerer, judges)."""

    model_id: str

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
    ) -> ChatResult: ...

    def chat_json(
        self,
        messages: list[dict[str, str]],
        schema: dict[str, Any],
        *,
        max_tokens: int = 256,
        purpose: str = "other",
        attempts: int = 2,
    ) -> Any: ...

    @property
    def usage(self) -> LLMUsage: ...


class ResponseCache:
    """SQLite key -> response store; safe for one process with several threads."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=60)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._conn.commit()

    @staticmethod
    def key(request: dict[str, Any]) -> str:
        canonical = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._conn.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        with self._lock:
            self._conn.execute("INSERT OR REPLACE INTO responses VALUES (?, ?)", (key, json.dumps(value)))
            self._conn.commit()

    def close(self) -> None:
        with self._lock:
            self._conn.close()


@dataclass
class UsageMeter:
    """Thread-safe running totals, split by purpose; also keeps every latency for percentiles."""

    usage: LLMUsage = field(default_factory=LLMUsage)
    latencies_s: list[float] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, purpose: str, result: ChatResult) -> None:
        with self._lock:
            u = self.usage
            u.calls += 1
            u.prompt_tokens += result.prompt_tokens
            u.completion_tokens += result.completion_tokens
            u.cached_calls += int(result.cached)
            bucket = u.by_purpose.setdefault(purpose, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
            bucket["calls"] += 1
            bucket["prompt_tokens"] += result.prompt_tokens
            bucket["completion_tokens"] += result.completion_tokens
            if result.cached_prompt_tokens:  # how much of the prompt the server's prefix cache covered
                bucket["server_cached_prompt_tokens"] = bucket.get("server_cached_prompt_tokens", 0) + result.cached_prompt_tokens
            if not result.cached:
                self.latencies_s.append(result.latency_s)

    def snapshot(self) -> LLMUsage:
        with self._lock:
            return LLMUsage(**json.loads(json.dumps(self.usage.__dict__)))


def usage_since(before: LLMUsage, after: LLMUsage) -> LLMUsage:
    """The usage accrued between two snapshots of a meter."""
    by_purpose: dict[str, dict[str, int]] = {}
    for purpose, counts in after.by_purpose.items():
        old = before.by_purpose.get(purpose, {})
        delta = {k: v - old.get(k, 0) for k, v in counts.items()}
        if any(delta.values()):
            by_purpose[purpose] = delta
    return LLMUsage(
        calls=after.calls - before.calls,
        prompt_tokens=after.prompt_tokens - before.prompt_tokens,
        completion_tokens=after.completion_tokens - before.completion_tokens,
        cached_calls=after.cached_calls - before.cached_calls,
        by_purpose=by_purpose,
    )


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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def default_model_name(model: str) -> str:
    """The id a local model is served (and cached) under: the known name, or the file's name."""
    return Path(model).name.removesuffix(".gguf") if model.endswith(".gguf") else model


# llama.cpp's flash-attention switch (its enum: -1 auto, 0 off, 1 on). On this 2-core CPU "auto" turns it
# on; off generates faster deep in a long context and reads prompts slower (Mem0's adds: docs/baselines.md).
FLASH_ATTN_MODES = {"auto": -1, "off": 0, "on": 1}


class LocalLLM(OpenAICompatClient):
    """xllamacpp's in-process OpenAI-compatible server on 127.0.0.1, started on first use.

    It speaks the same HTTP API as vLLM, so everything downstream exercises the vLLM path.
    """

    _lock = threading.Lock()

    def __init__(
        self,
        model: str,
        model_name: str | None = None,
        hub_filename: str | None = None,
        context_tokens: int = 16384,
        threads: int | None = None,
        parallel: int = 1,
        cache_path: str | None = None,
        timeout_s: float = 600.0,
        max_retries: int = 3,
        extra_body: dict[str, Any] | None = None,
        verbosity: int = 1,
        flash_attn: str | bool = "auto",
    ) -> None:
        if isinstance(flash_attn, bool):  # YAML 1.1 readers turn a bare on/off into a bool
            flash_attn = "on" if flash_attn else "off"
        if flash_attn not in FLASH_ATTN_MODES:
            raise ValueError(f"llm.flash_attn={flash_attn!r}: use one of {sorted(FLASH_ATTN_MODES)}")
        super().__init__(
            base_url="",
            model=model_name or default_model_name(model),
            cache_path=cache_path,
            timeout_s=timeout_s,
            max_retries=max_retries,
            extra_body=extra_body,
            context_tokens=context_tokens,
        )
        self.model_spec = model
        self.hub_filename = hub_filename
        self.threads = threads or os.cpu_count() or 2
        self.parallel = parallel
        self.verbosity = verbosity  # llama.cpp log level: 1 keeps warnings/errors, 3 logs every slot event
        self.flash_attn = flash_attn
        self._server: Any = None

    @property
    def base_url(self) -> str:
        if self._server is None:
            self.start()
        return self._base_url

    def start(self) -> None:
        with self._lock:
            if self._server is not None:
                return
            import xllamacpp

            from mosaic.model_files import resolve_model

            path = resolve_model(self.model_spec, hub_filename=self.hub_filename)
            params = xllamacpp.CommonParams()
            params.model.path = str(path)
            params.model_alias = self._model or path.stem
            params.n_ctx = int(self.context_tokens or 8192) * self.parallel
            params.n_parallel = self.parallel
            # Keep each slot's KV cache in place when it goes idle, so the next request that shares its
            # prefix (the same few-shot block, Mem0's ~8k-token system prompt) picks that slot by
            # similarity and reuses it. llama.cpp's default moves idle slots to a host-RAM prompt cache
            # instead: a restore of ~3 s per request at 7.7k tokens (0.5B model, /tmp test), and in one
            # Mem0 run two consecutive adds sharing a 7.9k-token prefix got no reuse (cause not found).
            params.cache_idle_slots = False
            params.flash_attn_type = FLASH_ATTN_MODES[self.flash_attn]
            params.cpuparams.n_threads = self.threads
            params.cpuparams_batch.n_threads = self.threads
            params.hostnames = ["127.0.0.1"]
            params.port = free_port()
            params.embedding = False
            params.verbosity = self.verbosity
            log.info("starting local LLM %s on 127.0.0.1:%d", path.name, params.port)
            self._server = xllamacpp.Server(params)
            self._base_url = str(self._server.listening_address).rstrip("/")

    def close(self) -> None:
        super().close()
        with self._lock:
            self._server = None  # the server stops when its object is collected
