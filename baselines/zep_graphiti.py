"""graphiti wiring for the Zep row: graphiti's LLM, embedder and reranker clients on the harness's parts.

``baselines.zep`` (the MemorySystem adapter) builds one Graphiti per namespace from these. What they do:

* ``HarnessGraphitiLLM``: graphiti's OpenAI-compatible generic client in ``json_schema`` mode, with a
  purpose per prompt, a ``max_tokens`` cap and no sleeping retries; its requests go through a tapped sync
  ``openai`` client (``AsyncCompletions``), so the harness meters, caches and retries them (``LibraryLLMTap``);
* ``HarnessEmbedder``: the harness's MiniLM embedder (384 dims) behind graphiti's embedder interface;
* ``CosineReranker``: cosine on that embedder in place of graphiti's hub-downloading BGE cross-encoder.

graphiti reads ``EMBEDDING_DIM`` when it is imported, so its classes are imported in ``graphiti_clients()``,
after ``graphiti_environment()`` has set it.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
from types import SimpleNamespace
from typing import Any

import numpy as np

from core.llm.library_tap import LibraryLLMTap

MINILM_DIMS = 384

# The purpose of the graphiti call in flight (its prompt name), per asyncio task.
PURPOSE: contextvars.ContextVar[str] = contextvars.ContextVar("zep_purpose", default="zep.other")


def graphiti_environment() -> None:
    """Settings graphiti reads at import time: MiniLM's dimension (default 1024) and telemetry off."""
    os.environ["EMBEDDING_DIM"] = str(MINILM_DIMS)
    os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"


def graphiti_clients() -> SimpleNamespace:
    """graphiti classes, imported after its environment is set (it reads EMBEDDING_DIM on import)."""
    graphiti_environment()
    from graphiti_core.cross_encoder.client import CrossEncoderClient
    from graphiti_core.embedder.client import EmbedderClient
    from graphiti_core.llm_client.config import LLMConfig
    from graphiti_core.llm_client.errors import EmptyResponseError
    from graphiti_core.llm_client.openai_generic_client import OpenAIGenericClient

    class HarnessEmbedder(EmbedderClient):
        """The harness's MiniLM embedder behind graphiti's embedder interface."""

        def __init__(self, embedder: Any) -> None:
            self.embedder = embedder

        async def create(self, input_data: Any) -> list[float]:
            text = input_data if isinstance(input_data, str) else " ".join(map(str, input_data))
            return [float(x) for x in np.asarray(self.embedder.encode([text]))[0]]

        async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
            if not input_data_list:
                return []
            return np.asarray(self.embedder.encode(list(input_data_list)), dtype=float).tolist()

    class CosineReranker(CrossEncoderClient):
        """Ranks passages by cosine similarity to the query on the local embedder (no hub model)."""

        def __init__(self, embedder: Any) -> None:
            self.embedder = embedder

        async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
            if not passages:
                return []
            vectors = np.asarray(self.embedder.encode([query, *passages]), dtype=float)
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
            scores = vectors[1:] @ vectors[0]
            return sorted(zip(passages, map(float, scores)), key=lambda pair: pair[1], reverse=True)

    class HarnessGraphitiLLM(OpenAIGenericClient):
        """graphiti's generic client with a purpose per prompt, a max_tokens cap and no sleeping retries.

        graphiti's own retry is 4 attempts with 5-120 s random-exponential sleeps. Here each call is made
        once: the harness tap under it already asks again, as the system's ``retry`` policy says, when a
        reply is cut off or is not JSON; a reply that is still bad after that is counted here and ends the
        episode (graphiti raises). Transport errors are the openai client's (``max_retries``) and the tap's timeout.
        """

        def __init__(self, config: Any, client: Any, max_tokens: int) -> None:
            super().__init__(config=config, client=client, max_tokens=max_tokens, structured_output_mode="json_schema")
            self.schema_failures = 0  # calls whose reply stayed unusable after the tap's retries

        async def generate_response(self, messages: Any, response_model: Any = None, max_tokens: int | None = None, *args: Any, **kwargs: Any) -> dict[str, Any]:
            capped = min(max_tokens or self.max_tokens, self.max_tokens)  # extract_edges asks for 16384
            token = PURPOSE.set(f"zep.{kwargs.get('prompt_name') or 'other'}")
            try:
                return await super().generate_response(messages, response_model, capped, *args, **kwargs)
            finally:
                PURPOSE.reset(token)

        async def _generate_response_with_retry(self, messages: Any, response_model: Any = None, max_tokens: int = 0, model_size: Any = None, *, model: str | None = None) -> dict[str, Any]:
            try:
                extra = {"model": model} if model is not None else {}
                return await self._generate_response(messages, response_model, max_tokens, model_size, **extra)
            except (json.JSONDecodeError, EmptyResponseError):
                self.schema_failures += 1
                raise

    return SimpleNamespace(
        HarnessEmbedder=HarnessEmbedder, CosineReranker=CosineReranker, HarnessGraphitiLLM=HarnessGraphitiLLM, LLMConfig=LLMConfig
    )


class AsyncCompletions:
    """What graphiti awaits (``client.chat.completions.create``), answered by the tapped sync client in a thread
    (``asyncio.to_thread``), so the event loop goes on with other namespaces' episodes while a call waits on the
    server. The thread gets the task's context: its purpose (``PURPOSE``), the adapter's usage scope. Within one
    episode graphiti's calls stay in the order it awaits them (``max_coroutines``), so cache keys do not change.
    """

    def __init__(self, sync_client: Any, tap: LibraryLLMTap) -> None:
        self._sync = sync_client
        self._tap = tap
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self._create))

    async def _create(self, **request: Any) -> Any:
        request["seed"] = 0  # the first try's seed (the tap's retries bring their own)
        return await asyncio.to_thread(self._call, request)

    def _call(self, request: dict[str, Any]) -> Any:
        self._tap.purpose = PURPOSE.get()
        return self._sync.chat.completions.create(**request)


def graphiti_llm_client(classes: SimpleNamespace, llm: Any, tap: LibraryLLMTap, max_tokens: int, transport_retries: int) -> Any:
    """graphiti's LLM client on the harness endpoint: a sync ``openai`` client with ``tap`` installed (meter, cache,
    retry policy), answered through ``AsyncCompletions``, at temperature 0 with every call capped at ``max_tokens``."""
    import openai

    sync_client = openai.OpenAI(base_url=llm.api_base, api_key=llm.api_key, max_retries=transport_retries)
    tap.install(sync_client)
    config = classes.LLMConfig(
        api_key=llm.api_key, model=llm.model_id, small_model=llm.model_id, base_url=llm.api_base,
        temperature=0.0, max_tokens=max_tokens,
    )  # fmt: skip
    return classes.HarnessGraphitiLLM(config, AsyncCompletions(sync_client, tap), max_tokens)
