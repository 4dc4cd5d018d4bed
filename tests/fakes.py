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
                              "top_logprobs": top_logprobs, "seed": seed, "temperature": temperature})
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


def schema_instance(schema: dict[str, Any], text: str) -> Any:
    """A small value that satisfies ``schema`` (first enum value, one array item, strings from ``text``)."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return schema_instance(schema[key][0], text)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        return {name: schema_instance(sub, text) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        count = max(1, schema.get("minItems", 1))
        count = min(count, schema.get("maxItems", count))
        return [schema_instance(schema.get("items", {"type": "string"}), text) for _ in range(count)]
    if kind == "string":
        value = (text or "x")[: schema.get("maxLength", 120)]
        return value.ljust(schema.get("minLength", 0), "x")
    if kind in ("integer", "number"):
        low, high = schema.get("minimum", 0), schema.get("maximum", None)
        value = low if kind == "integer" else (0.5 if high is None or high >= 0.5 else high)
        return max(low, value)
    if kind == "boolean":
        return False
    return None


class SchemaFakeLLM(FakeLLM):
    """A FakeLLM built by Hydra (``llm._target_=tests.fakes.SchemaFakeLLM``): every JSON request gets a
    schema-valid answer whose strings come from the last user message; free text gets a fixed reply.
    For smoke tests of wiring and control flow only."""

    def __init__(self, model_id: str = "fake-schema", reply: str = "I do not know.") -> None:
        def respond(messages: list[dict[str, str]], schema: dict[str, Any] | None) -> Any:
            last_user = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
            return reply if schema is None else schema_instance(schema, last_user.splitlines()[-1] if last_user else "")

        super().__init__(respond, model_id=model_id)
        # what adapters of outside libraries read (core.api.ServedLLM); an unused port, never called here
        self.api_base, self.api_key, self.cache, self.timeout_s = "http://127.0.0.1:9/v1", "none", None, 600.0

    def close(self) -> None:
        return None


class HashEmbedder:
    """Deterministic bag-of-hashed-words vectors (unit length; texts sharing words get similar vectors); no model,
    built by Hydra in smoke tests. ``token_pattern`` decides what a word is (default: whitespace-separated)."""

    def __init__(self, dim: int = 64, model_id: str = "hash-embedder", token_pattern: str = r"\S+") -> None:
        self.dim = dim
        self.model_id = model_id
        self.token_pattern = token_pattern

    def encode(self, texts: list[str]) -> "np.ndarray":
        import hashlib
        import re

        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(self.token_pattern, text.lower()):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
            out[row] /= max(float(np.linalg.norm(out[row])), 1e-9)
        return out


def fill_vector_cache(cache_dir: Any, vectors: dict[str, Any]) -> None:
    """Write ``key -> float32 vector`` rows into ``cache_dir``'s embedding cache, as a run would have left them."""
    from core.embed import EMBED_CACHE_FILE, open_vector_cache, store_vectors

    cache_dir.mkdir(parents=True, exist_ok=True)
    cache = open_vector_cache(cache_dir / EMBED_CACHE_FILE)
    store_vectors(cache, [(k, v.tobytes()) for k, v in vectors.items()], replace=True)
    cache.commit()
    cache.close()
