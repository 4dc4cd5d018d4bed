"""One chat client for every backend: vLLM, the local llama.cpp server, any OpenAI-compatible API.

Responses are cached in SQLite keyed by the whole request (model id, messages, sampling
parameters, schema), so re-running a table costs nothing and runs at temperature 0 are
deterministic. Every call is counted (calls, tokens, latency, cache hits) by purpose.
"""


from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Callable, Mapping

from pydantic import ConfigDict, Field

from core.api import ChatResult, LLMError, LLMOutputError, LLMUsage
from core.config_check import Count, Positive
from core.llm.cache import ResponseCache
from core.llm.meter import UsageMeter

if TYPE_CHECKING:  # httpx and tenacity are imported where a request is made: a finished run's rerun makes none
    import httpx

log = logging.getLogger(__name__)

# The key that marks a cache entry as a remembered output fault (a deterministic bad reply), not a response.
OUTPUT_FAULT = "output_fault"


@dataclass(frozen=True)
class RetryPolicy:
    """How a reply that is cut off at ``max_tokens`` or breaks its schema is asked again: the one retry
    mechanism of every system (MOSAIC's structured calls, the library tap of Mem0/A-Mem/Zep, MemGPT's
    tool-call layer).

    ``attempts`` tries in all. The first is the caller's request unchanged, so a cached reply replays.
    Retry ``n`` (1, 2, ...) samples at ``temperature`` (or the caller's, if higher) with the fixed seed
    ``seed + n - 1``: at temperature 0 llama.cpp decodes greedily and ignores the seed, so a greedy retry
    writes the same looping reply again; a small temperature with a fixed seed is a different attempt that
    is still reproducible (and cached like any other request). ``temperature=0`` is the old schedule
    (seeds 0, 1, ... at temperature 0), kept for callers that pass no policy (the judges).
    """

    __pydantic_config__ = ConfigDict(extra="forbid")  # core.config_check: an unknown key of system.retry fails by name

    attempts: Annotated[int, Field(ge=1)] = 2  # tries in all; 1 = no retry
    temperature: Annotated[float, Field(ge=0, le=2)] = 0.0  # of the retries (0 repeats a greedy loop)
    seed: Annotated[int, Field(ge=0)] = 1  # of the first retry

    def __post_init__(self) -> None:
        if int(self.attempts) < 1:
            raise ValueError(f"attempts={self.attempts} must be >= 1 (1 = no retry)")
        if not 0.0 <= float(self.temperature) <= 2.0:
            raise ValueError(f"temperature={self.temperature} must be in [0, 2] (a small value such as 0.3)")
        if int(self.seed) < 0:
            raise ValueError(f"seed={self.seed} must be >= 0")

    def sampling(self, attempt: int, temperature: float | None, seed: int | None) -> tuple[float | None, int | None]:
        """(temperature, seed) of try ``attempt`` (0 = the caller's own request)."""
        if attempt == 0:
            return temperature, seed
        return max(float(temperature or 0.0), float(self.temperature)), int(self.seed) + attempt - 1


def retry_policy(value: "RetryPolicy | Mapping[str, Any] | None", key: str = "system.retry") -> RetryPolicy:
    """A RetryPolicy from a config block (``{attempts, temperature, seed}``); None = no retry (one attempt)."""
    if value is None:
        return RetryPolicy(attempts=1)
    if isinstance(value, RetryPolicy):
        return value
    try:
        return RetryPolicy(**{str(k): v for k, v in dict(value).items()})
    except TypeError as err:
        raise ValueError(f"{key}: {err}; the keys are attempts, temperature, seed") from err
    except ValueError as err:
        raise ValueError(f"{key}: {err}") from err


def chat_json_with_retry(
    chat: Callable[..., ChatResult],
    messages: list[dict[str, str]],
    schema: dict[str, Any],
    *,
    max_tokens: int,
    purpose: str,
    policy: RetryPolicy,
) -> Any:
    """A json_schema call through ``chat`` (an ``LLMClient.chat``), parsed; an empty, cut-off or unparsable
    reply is asked again as ``policy`` says; after the last try its LLMOutputError is raised."""
    last: LLMOutputError | None = None
    for attempt in range(policy.attempts):
        temperature, seed = policy.sampling(attempt, 0.0, 0)
        try:  # chat() raises on empty, truncated or unparsable output (and caches none of them as a response)
            return chat(messages, response_schema=schema, max_tokens=max_tokens, temperature=temperature, seed=seed, purpose=purpose).json()
        except LLMOutputError as err:
            last = err
            log.warning("schema-breaking output (%s), attempt %d/%d", purpose, attempt + 1, policy.attempts)
    assert last is not None
    raise last


class GuardedLLM:
    """An ``LLMClient`` whose structured calls retry as ``policy`` says (a system's own retry, from its
    conf/system block); everything else is the wrapped client's, unchanged."""

    def __init__(self, llm: Any, policy: RetryPolicy) -> None:
        self.llm = llm
        self.policy = policy

    def chat(self, messages: list[dict[str, str]], **kwargs: Any) -> ChatResult:
        return self.llm.chat(messages, **kwargs)

    def chat_json(self, messages: list[dict[str, str]], schema: dict[str, Any], *, max_tokens: int = 256,
                  purpose: str = "other", attempts: int | None = None) -> Any:
        """``attempts`` is ignored: the policy decides (one setting per system)."""
        return chat_json_with_retry(self.llm.chat, messages, schema, max_tokens=max_tokens, purpose=purpose, policy=self.policy)

    def __getattr__(self, name: str) -> Any:  # model_id, usage, meter, cache, api_base, ...
        return getattr(self.llm, name)


class ClientClosedError(BaseException):
    """A call on a closed client (the run is stopping): refused, never sent, never retried, never cached.

    A cancellation, not a failure, so it derives from BaseException as asyncio.CancelledError does: a system
    that counts an ``LLMError`` (or any ``Exception``) as a failed turn and goes on (MOSAIC's extraction) must
    not turn a stop into recorded failures while its worker thread winds down; the error ends the unit of work.
    """


class BadResponseError(LLMError):
    """The server answered 200 with something that is not a usable chat completion (retried, never cached)."""

    answered = 0  # how many 200 answers the request got over its tries (set when the last try gives up)


class EmptyContentError(BadResponseError):
    """A well-formed completion with nothing in it: retried; after the last try a counted LLMOutputError."""


def _retryable(err: BaseException) -> bool:
    import httpx

    if isinstance(err, httpx.TransportError | httpx.TimeoutException | BadResponseError):
        return True
    if isinstance(err, httpx.HTTPStatusError):
        return err.response.status_code in (408, 429, 500, 502, 503, 504)
    return False


def completion_choice(response: httpx.Response, url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The body and first choice of a chat completion; BadResponseError if it is not one."""
    try:
        body = response.json()
    except ValueError as err:
        raise BadResponseError(f"{url} answered {response.status_code} with a body that is not JSON: {response.text[:200]!r}") from err
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict) or not isinstance(choices[0].get("message"), dict):
        raise BadResponseError(f"{url} answered {response.status_code} without `choices[0].message`: {response.text[:200]!r}")
    choice = choices[0]
    if not (choice["message"].get("content") or "").strip() and not choice["message"].get("tool_calls"):
        raise EmptyContentError(f"{url} answered {response.status_code} with empty content (finish_reason {choice.get('finish_reason')!r})")
    return body, choice


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
        timeout_s: Positive = 300.0,
        max_retries: Count = 4,
        patience_s: Positive = 900.0,
        retry_wait_s: Annotated[float, Field(ge=0)] = 1.0,
        health_timeout_s: Annotated[float, Field(ge=0)] = 0.0,
        extra_body: dict[str, Any] | None = None,
        context_tokens: Count | None = None,
        remember_output_faults: bool = True,
    ) -> None:
        self._base_url = base_url.rstrip("/") if base_url else ""
        self._model = model
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        # total time one request may take over all its tries before the server is reported: a hung
        # server is named after patience_s, not after timeout_s x max_retries (vLLM's 600 s x 4 = 40 min)
        self.patience_s = patience_s
        self.retry_wait_s = retry_wait_s  # first back-off between tries (doubles, at most 30 s)
        self.health_timeout_s = health_timeout_s
        self.extra_body = dict(extra_body or {})
        self.context_tokens = context_tokens
        # A greedy (temperature 0) reply that is cut off or breaks its schema comes back the same when asked again,
        # so the fault itself is cached (marked, never served as a response): a replay then fails the same way at
        # no cost instead of paying the generation again, and cannot drift to a different reply on a server whose
        # output shifts slightly with its prompt-cache state.
        self.remember_output_faults = remember_output_faults
        self.cache = ResponseCache(cache_path) if cache_path else None
        self.meter = UsageMeter()
        self._http: AbortableHTTP | None = None
        self._closed = False  # set once by close(); a closed client refuses every call

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

    def check_credentials(self) -> None:
        """Fail now, before any work, when the API key's environment variable is missing."""
        _ = self.api_key

    @property
    def closed(self) -> bool:
        return self._closed

    def refuse_if_closed(self) -> None:
        """Raise ClientClosedError once ``close()`` was called: the run is stopping, no call may start."""
        if self._closed:
            raise ClientClosedError(f"LLM client for model {self._model or '(unnamed)'} is closed (the run is stopping); no further calls")

    def _client(self) -> httpx.Client:
        from core.llm.abortable import AbortableHTTP

        self.refuse_if_closed()
        if self._http is None:
            self._http = AbortableHTTP(
                timeout=self.timeout_s, headers={"Authorization": f"Bearer {self.api_key}"}, trust_env=False
            )
            if self.health_timeout_s > 0:
                self.wait_until_healthy(self.health_timeout_s)
        return self._http

    def wait_until_healthy(self, timeout_s: float) -> None:
        """Poll ``/health`` (vLLM and llama.cpp) or ``/v1/models`` until the server answers."""
        import httpx

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
            import httpx

            url = self.api_base + "/models"
            try:
                response = self._client().get(url)
                response.raise_for_status()
                self._model = str(response.json()["data"][0]["id"])
            except httpx.HTTPError as err:
                raise LLMError(f"cannot read the served model id from {url}: {err}; check the server, or set llm.model") from err
            except (ValueError, KeyError, IndexError, TypeError) as err:
                raise LLMError(f"{url} did not list a model ({response.text[:200]!r}); check the server, or set llm.model") from err
            log.info("served model id: %s", self._model)
        return self._model

    @property
    def usage(self) -> LLMUsage:
        return self.meter.snapshot()

    # -- calls ------------------------------------------------------------------------
    def _post(self, payload: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """POST one chat completion; retry transport faults, 5xx/429 and unusable 200s within patience_s."""
        from tenacity import Retrying, retry_if_exception, stop_after_attempt, stop_after_delay, wait_exponential

        client = self._client()
        url = self.api_base + "/chat/completions"
        deadline = time.monotonic() + self.patience_s
        answered = 0  # requests the server answered 200 (an empty reply is still a call it served)
        try:
            for attempt in Retrying(
                stop=stop_after_attempt(self.max_retries) | stop_after_delay(self.patience_s),
                wait=wait_exponential(multiplier=self.retry_wait_s, min=self.retry_wait_s, max=30),
                retry=retry_if_exception(lambda err: _retryable(err) and not self._closed),
                reraise=True,
            ):
                with attempt:
                    self.refuse_if_closed()  # a retry never starts after close()
                    timeout = max(1.0, min(self.timeout_s, deadline - time.monotonic()))
                    response = client.post(url, json=payload, timeout=timeout)
                    response.raise_for_status()
                    answered += 1
                    return completion_choice(response, url)
        except BadResponseError as err:
            err.answered = answered
            raise
        raise AssertionError("unreachable")

    @staticmethod
    def _usable(result: ChatResult, schema_request: bool) -> str | None:
        """Why a response must not be used or cached (None: fine)."""
        if not result.text.strip():
            return "empty content"
        if schema_request:
            try:
                result.json()
            except LLMOutputError:
                return "output is not valid JSON for the requested schema"
        return None

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
        import httpx

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
        self.refuse_if_closed()
        key = ResponseCache.key(payload)
        hit = self.cache.get(key) if self.cache else None
        if hit is not None and OUTPUT_FAULT in hit:
            if self.remember_output_faults:
                remembered = ChatResult(**{**{k: v for k, v in hit.items() if k != OUTPUT_FAULT}, "cached": True})
                self.meter.record(purpose, remembered)
                raise LLMOutputError(f"{hit[OUTPUT_FAULT]} (remembered from an identical earlier request): {remembered.text[:200]!r}")
            hit = None  # remembering is off: ask again
        if hit is not None and self._usable(ChatResult(**{**hit, "cached": True}), response_schema is not None) is None:
            result = ChatResult(**{**hit, "cached": True})
        else:  # a miss, or an entry cached before responses were validated: asked again
            started = time.perf_counter()
            url = self.api_base + "/chat/completions"
            try:
                body, choice = self._post(payload)
            except httpx.HTTPError as err:
                if self._closed:  # aborted by close(): the generation was abandoned, nothing to record
                    raise ClientClosedError(f"LLM call to {url} aborted: the client was closed while it ran (the run is stopping)") from err
                if isinstance(err, httpx.HTTPStatusError):
                    raise LLMError(
                        f"LLM server {url} answered {err.response.status_code}: {err.response.text[:300]!r}; check the server and llm.model"
                    ) from err
                raise LLMError(
                    f"LLM server {url} unreachable after {self.max_retries} tries within llm.patience_s={self.patience_s:g}s: {err!r}; check the server"
                ) from err
            except EmptyContentError as err:
                empty = ChatResult(text="", prompt_tokens=0, completion_tokens=0, latency_s=time.perf_counter() - started, cached=False, model=self.model_id)
                for _ in range(max(1, err.answered)):  # each empty reply was a call the server served: counted
                    self.meter.record(purpose, empty)
                raise LLMOutputError(f"{err} after {self.max_retries} tries") from err
            except BadResponseError as err:
                raise LLMError(f"{err} (after {self.max_retries} tries); check the server") from err
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
            problem = self._usable(result, response_schema is not None)
            if response_schema is not None and choice.get("finish_reason") == "length":
                problem = f"generation cut off at max_tokens={max_tokens} (finish_reason length)"
            entry = {k: v for k, v in result.__dict__.items() if k != "cached"}
            if problem:  # a model fault: counted by the caller (chat_json retries with another seed), never served from the cache
                self.meter.record(purpose, result)
                if self.cache and self.remember_output_faults and temperature == 0 and result.text.strip():
                    self.cache.put(key, {**entry, OUTPUT_FAULT: problem})
                raise LLMOutputError(f"{problem}: {result.text[:200]!r}")
            if self.cache:
                self.cache.put(key, entry)
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
        retry: RetryPolicy | None = None,
    ) -> Any:
        """Structured call: json_schema output, parsed; retried as ``retry`` says if it breaks (default: ``attempts``
        tries at temperature 0 with seeds 0, 1, ..., the schedule of every call that passes no policy)."""
        policy = retry or RetryPolicy(attempts=attempts, temperature=0.0, seed=1)
        return chat_json_with_retry(self.chat, messages, schema, max_tokens=max_tokens, purpose=purpose, policy=policy)

    def close(self) -> None:
        """Stop for good: refuse every later call and abort the calls in flight (their threads get a
        ClientClosedError at once instead of waiting for the server's reply). Safe from any thread, twice."""
        self._closed = True
        http, self._http = self._http, None
        if http is not None:
            http.abort()
            http.close()
