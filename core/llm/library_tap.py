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
  when the library sends no ``max_tokens``, with a cap so a looping small model stops.

The request the library builds (prompt, ``response_format``, sampling) is otherwise sent as is.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from core.api import ChatResult, LLMUsage, ResponseStore, ServedLLM, UsageRecorder
from core.llm.cache import request_key
from core.llm.meter import UsageMeter

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
            json.loads(content.strip().removeprefix("```json").removeprefix("```").removesuffix("```"))
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
    ) -> None:
        self.library = library
        self.purpose = purpose
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens  # a default cap, for libraries that send none (A-Mem)
        self.meter = UsageMeter()
        self._harness_meter: UsageRecorder = harness_llm.meter
        self._cache: ResponseStore | None = harness_llm.cache
        # the harness's own patience, not the openai client's 600 s: on a slow CPU server Mem0's first
        # ~8.4k-token prompt can take longer, and the client's retry would start it again from scratch
        self.timeout_s: float | None = timeout_s or harness_llm.timeout_s
        self.invalid_responses = 0  # responses not cached: no choices, empty, truncated or broken JSON
        self.last_text = ""  # the latest response text, for adapters that check the library's parsing

    @property
    def usage(self) -> LLMUsage:
        return self.meter.snapshot()

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
        from openai.types.chat import ChatCompletion

        if self.temperature is not None:
            request["temperature"] = self.temperature
        if self.seed is not None:
            request.setdefault("seed", self.seed)
        if self.max_tokens is not None and "max_tokens" not in request and "max_completion_tokens" not in request:
            request["max_tokens"] = self.max_tokens
        key = request_key({"library": self.library, **request}) if self._cache else None
        hit = self._cache.get(key) if self._cache and key else None
        hit_problem = unusable(hit, request) if hit is not None else None
        if hit is not None and (hit_problem is None or replayable_cut_off(hit, request)):
            response = ChatCompletion.model_validate(hit)
            latency = 0.0
            if hit_problem:  # a cached greedy cut-off: the library fails on it as it did live
                self.invalid_responses += 1
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
                self.invalid_responses += 1
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
        self.last_text = result.text
        self.meter.record(self.purpose, result)
        self._harness_meter.record(self.purpose, result)
        return response
