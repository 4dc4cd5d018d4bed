"""A scripted LLM for unit tests of control flow only (never used where an issue asks for a real LLM)."""

from __future__ import annotations

import json
from typing import Any, Callable

from core.llm import ChatResult, LLMOutputError, UsageMeter
from core.api import LLMUsage

Responder = Callable[[list[dict[str, str]], dict[str, Any] | None], str | dict | list]


class FakeLLM:
    """Answers each chat with ``responder(messages, schema)``; counts calls like the real client."""

    def __init__(self, responder: Responder, model_id: str = "fake") -> None:
        self.responder = responder
        self.model_id = model_id
        self.meter = UsageMeter()
        self.requests: list[dict[str, Any]] = []

    @property
    def usage(self) -> LLMUsage:
        return self.meter.snapshot()

    def chat(self, messages, *, response_schema=None, max_tokens=256, temperature=0.0, seed=0, purpose="other", top_logprobs=0):
        self.requests.append({"messages": messages, "schema": response_schema, "purpose": purpose, "max_tokens": max_tokens,
                              "top_logprobs": top_logprobs})
        out = self.responder(messages, response_schema)
        text = out if isinstance(out, str) else json.dumps(out)
        result = ChatResult(text=text, prompt_tokens=10, completion_tokens=5, latency_s=0.0, cached=False, model=self.model_id)
        self.meter.record(purpose, result)
        return result

    def chat_json(self, messages, schema, *, max_tokens=256, purpose="other", attempts=2):
        last = None
        for seed in range(attempts):
            try:
                return self.chat(messages, response_schema=schema, max_tokens=max_tokens, seed=seed, purpose=purpose).json()
            except LLMOutputError as err:
                last = err
        raise last


def served_llm_stub(cache: Any = None, timeout_s: float = 600.0) -> Any:
    """What an adapter of an outside library needs of the harness LLM (core.api.ServedLLM), never called."""
    from types import SimpleNamespace

    return SimpleNamespace(
        api_base="http://127.0.0.1:9/v1", api_key="none", model_id="m", meter=UsageMeter(), cache=cache, timeout_s=timeout_s
    )
