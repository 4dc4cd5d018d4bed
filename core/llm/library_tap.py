"""Meter and cache the LLM calls that outside libraries (Mem0, A-Mem) make on their own.

Those libraries build their own ``openai.OpenAI`` client and call the server directly, past
the harness's ``LLMClient``. ``LibraryLLMTap.install`` wraps that client's
``chat.completions.create`` so that every call

* is counted (calls, prompt/completion tokens as the server reports them, latency) in the
  tap's own meter and in the harness LLM's meter, under ``purpose`` (e.g. ``mem0.extract``);
* is answered from the harness's SQLite response cache when the identical request was made
  before, so re-running a table costs nothing, as for every other system (unusable responses are
  not cached, except a greedy request's cut-off output, which the server would write again);
* optionally runs at a fixed temperature/seed (the harness default is temperature 0) and,
  when the library sends no ``max_tokens``, with a cap so a looping small model stops;
* carries the system's output guard (conf/system/*.yaml): ``maxItems`` on every list of a json_schema
  request (``max_items``), and a structured reply that is cut off or is not JSON asked again as the
  harness's ``RetryPolicy`` says (a small temperature with a fixed seed: a greedy retry writes the same
  loop again); the library gets the first usable reply, or the last bad one, which it handles as before.

The request the library builds (prompt, ``response_format``, sampling) is otherwise sent as is.

One tap serves every namespace of a system, and with ``run.workers`` > 1 several namespaces call through it at
once: ``purpose`` and ``last_text`` are per context (thread or asyncio task), and ``scoped()`` meters the calls
made inside one ``with`` block (one add) whatever other threads do meanwhile.
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from core.api import ChatResult, LLMUsage, ResponseStore, ServedLLM, UsageRecorder
from core.llm.cache import request_key
from core.llm.client import RetryPolicy
from core.llm.meter import UsageMeter
from core.llm.schema_caps import cap_items, longest_list

log = logging.getLogger(__name__)


def unusable(response: dict[str, Any], request: dict[str, Any]) -> str | None:
    """Why a completion (as a JSON dict) must not be cached: the same rules as the harness's own client."""
    choices = response.get("choices") or []
    if not choices:
        return "response without choices"
    choice = choices[0] or {}
    message = choice.get("message") or {}
    content = message.get("content") or ""
    if not content.strip() and not message.get("tool_calls"):
        return "empty content"
    if request.get("response_format") and not message.get("tool_calls"):
        if choice.get("finish_reason") == "length":
            return "structured output cut off (finish_reason length)"
        try:
            json.loads(_fenceless(content))
        except json.JSONDecodeError:
            return "structured output is not valid JSON"
    return None


def replayable_cut_off(response: dict[str, Any], request: dict[str, Any]) -> bool:
    """A structured output cut off at max_tokens by a greedy (temperature 0) request: the server writes the
    same tokens again when asked again, so the failure is cached and replayed instead of repaid. On a
    2-core machine one such call (a small model looping to graphiti's 2,048-token cap) costs ~7 minutes,
    and a resumed run would otherwise pay it again for nothing. Other unusable responses (empty, broken
    JSON that stopped on its own) may be transient and are still asked again."""
    choice = (response.get("choices") or [{}])[0] or {}
    content = (choice.get("message") or {}).get("content") or ""
    return (
        bool(request.get("response_format"))
        and choice.get("finish_reason") == "length"
        and bool(content.strip())
        and request.get("temperature") == 0
    )


class LibraryLLMTap:
    """Wraps one OpenAI client's ``chat.completions.create``; ``purpose`` may be changed between calls."""

    def __init__(
        self,
        library: str,
        harness_llm: ServedLLM,
        purpose: str,
        temperature: float | None = 0.0,
        seed: int | None = 0,
        max_tokens: int | None = None,
        timeout_s: float | None = None,
        retry: RetryPolicy | None = None,
        max_items: int | None = None,
    ) -> None:
        self.library = library
        # per context (thread, asyncio task): namespaces written at once each label and check their own calls
        self._purpose: contextvars.ContextVar[str] = contextvars.ContextVar(f"{library}_tap_purpose", default=purpose)
        self._last_text: contextvars.ContextVar[str] = contextvars.ContextVar(f"{library}_tap_last_text", default="")
        self._scopes: contextvars.ContextVar[tuple[UsageMeter, ...]] = contextvars.ContextVar(f"{library}_tap_scopes", default=())
        self._counts_lock = threading.Lock()
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens  # a default cap, for libraries that send none (A-Mem)
        self.meter = UsageMeter()
        self._harness_meter: UsageRecorder = harness_llm.meter
        self._cache: ResponseStore | None = harness_llm.cache
        # the harness's own patience, not the openai client's 600 s: on a slow CPU server Mem0's first
        # ~8.4k-token prompt can take longer, and the client's retry would start it again from scratch
        self.timeout_s: float | None = timeout_s or harness_llm.timeout_s
        self.retry = retry or RetryPolicy(attempts=1)  # default: no retry (the library's own handling)
        self.max_items = max_items  # maxItems on every list of a json_schema request (None: the library's schema)
        self.invalid_responses = 0  # unusable responses: no choices, empty, truncated or broken JSON
        self.retries = 0  # structured requests asked again after an unusable reply
        self.rescued = 0  # ... of which a retry got a usable reply
        self.list_cap_hits = 0  # usable replies whose longest list reached max_items (probably ended by the cap)

    @property
    def purpose(self) -> str:
        """The label of the next call made in this context (thread or asyncio task)."""
        return self._purpose.get()

    @purpose.setter
    def purpose(self, value: str) -> None:
        self._purpose.set(value)

    @property
    def last_text(self) -> str:
        """The latest response text in this context, for adapters that check the library's parsing."""
        return self._last_text.get()

    @property
    def usage(self) -> LLMUsage:
        return self.meter.snapshot()

    @contextmanager
    def scoped(self) -> Iterator[UsageMeter]:
        """A meter of the calls made in this context (and the asyncio tasks and ``to_thread`` calls it starts)
        until the block ends: one add's usage while other namespaces call through the same tap."""
        meter = UsageMeter()
        token = self._scopes.set((*self._scopes.get(), meter))
        try:
            yield meter
        finally:
            self._scopes.reset(token)

    def _counted(self, name: str) -> None:
        with self._counts_lock:
            setattr(self, name, getattr(self, name) + 1)

    def install(self, openai_client: Any) -> None:
        """Replace ``openai_client.chat.completions.create`` (on that instance only)."""
        completions = openai_client.chat.completions
        original = completions.create
        if getattr(original, "_mosaic_tap", None) is not None:
            return

        def create(**request: Any) -> Any:
            return self._call(original, request)

        create._mosaic_tap = self  # type: ignore[attr-defined]
        completions.create = create

    def _call(self, original: Any, request: dict[str, Any]) -> Any:
        if self.temperature is not None:
            request["temperature"] = self.temperature
        if self.seed is not None:
            request.setdefault("seed", self.seed)
        if self.max_tokens is not None and "max_tokens" not in request and "max_completion_tokens" not in request:
            request["max_tokens"] = self.max_tokens
        request = capped_request(request, self.max_items)
        structured = bool(request.get("response_format"))
        attempts = self.retry.attempts if structured else 1
        for attempt in range(attempts):
            temperature, seed = self.retry.sampling(attempt, request.get("temperature"), request.get("seed"))
            asked = request if attempt == 0 else {**request, "temperature": temperature, "seed": seed}
            response, problem = self._ask(original, asked)
            if problem is None:
                if attempt:
                    self._counted("rescued")
                if self.max_items is not None and structured and self._longest_list(response) >= self.max_items:
                    self._counted("list_cap_hits")
                break
            if attempt + 1 < attempts:
                self._counted("retries")
                log.warning("%s: %s; asking again (retry %d of %d, temperature %s, seed %s)", self.library, problem,
                            attempt + 1, attempts - 1, *self.retry.sampling(attempt + 1, request.get("temperature"), request.get("seed")))
        return response

    @staticmethod
    def _longest_list(response: Any) -> int:
        try:
            return longest_list(json.loads(_fenceless(response.choices[0].message.content or "")))
        except (json.JSONDecodeError, IndexError, AttributeError):
            return 0

    def _ask(self, original: Any, request: dict[str, Any]) -> tuple[Any, str | None]:
        """One try: from the cache, or from the server; metered; (response, why it is unusable or None)."""
        from openai.types.chat import ChatCompletion

        key = request_key({"library": self.library, **request}) if self._cache else None
        hit = self._cache.get(key) if self._cache and key else None
        hit_problem = unusable(hit, request) if hit is not None else None
        if hit is not None and (hit_problem is None or replayable_cut_off(hit, request)):
            response = ChatCompletion.model_validate(hit)
            latency = 0.0
            problem = hit_problem
            if hit_problem:  # a cached greedy cut-off: the library fails on it as it did live
                self._counted("invalid_responses")
                log.warning("%s: replaying a cached cut-off output (temperature 0 writes it again)", self.library)
        else:
            started = time.perf_counter()
            send = {**request, "timeout": self.timeout_s} if self.timeout_s and "timeout" not in request else request
            response = original(**send)  # the timeout is not part of the cache key
            latency = time.perf_counter() - started
            dumped = response.model_dump(mode="json")
            problem = unusable(dumped, request)
            replay = bool(problem) and replayable_cut_off(dumped, request)
            if problem:  # handed to the library (it has its own error handling) and counted
                self._counted("invalid_responses")
                log.warning("%s: %s; %s", self.library, problem, "cached for replay (greedy)" if replay else "not cached")
            if (replay or not problem) and self._cache and key:
                self._cache.put(key, dumped)
            hit = None
        usage = response.usage
        result = ChatResult(
            text=(response.choices[0].message.content or "") if response.choices else "",
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            latency_s=latency,
            cached=hit is not None,
            model=str(request.get("model", "")),
            cached_prompt_tokens=int(getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", 0) or 0),
        )
        self._last_text.set(result.text)
        purpose = self.purpose
        self.meter.record(purpose, result)
        self._harness_meter.record(purpose, result)
        for scope in self._scopes.get():
            scope.record(purpose, result)
        return response, problem

    def guard_counts(self) -> dict[str, int]:
        """What the output guard did, for a system's metrics."""
        return {"invalid_responses": self.invalid_responses, "retries": self.retries, "rescued_by_retry": self.rescued,
                "list_cap_hits": self.list_cap_hits}


def _fenceless(content: str) -> str:
    return content.strip().removeprefix("```json").removeprefix("```").removesuffix("```")


def capped_request(request: dict[str, Any], max_items: int | None) -> dict[str, Any]:
    """``request`` with ``maxItems`` <= ``max_items`` on every list of its json_schema (a copy; unchanged when
    ``max_items`` is None or the request has no json_schema: Mem0's json_object has no schema to cap)."""
    response_format = request.get("response_format")
    if max_items is None or not isinstance(response_format, dict) or response_format.get("type") != "json_schema":
        return request
    json_schema = response_format.get("json_schema")
    if not isinstance(json_schema, dict) or not isinstance(json_schema.get("schema"), dict):
        return request
    capped_schema = {**json_schema, "schema": cap_items(json_schema["schema"], max_items)}
    return {**request, "response_format": {**response_format, "json_schema": capped_schema}}
