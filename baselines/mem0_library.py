"""Mem0's library wired onto the harness: the ``Memory.from_config`` dict (the harness's LLM endpoint, the local
MiniLM, FAISS and the history DB in the run folder), the session date put into Mem0's prompt, and Mem0's own
JSON parsing mirrored so that output it silently drops is counted.

Kept apart from ``baselines.mem0`` (the MemorySystem adapter: speakers, namespaces, snapshots) the way
``baselines.zep_graphiti`` is from ``baselines.zep``: what reaches into mem0ai's internals is in one place.
"""

from __future__ import annotations

import contextvars
import json
from pathlib import Path
from typing import Any

MINILM_DIMS = 384

# The session date the patched prompt builder gives Mem0 as "Observation Date"/"Current Date".
SESSION_DATE: contextvars.ContextVar[str | None] = contextvars.ContextVar("mem0_session_date", default=None)


def mem0_config(
    api_base: str,
    model_id: str,
    api_key: str,
    embedder_dir: str,
    store_dir: Path,
    max_tokens: int,
    llm_provider: str = "vllm",
    custom_instructions: str | None = None,
) -> dict[str, Any]:
    """The ``Memory.from_config`` dict: harness LLM endpoint, local MiniLM, FAISS + history under ``store_dir``."""
    if llm_provider == "vllm":
        llm = {"model": model_id, "vllm_base_url": api_base, "api_key": api_key, "max_tokens": max_tokens}
    elif llm_provider == "openai":
        llm = {"model": model_id, "openai_base_url": api_base, "api_key": api_key, "max_tokens": max_tokens}
    else:
        raise ValueError(f"system.llm_provider must be 'vllm' or 'openai', got {llm_provider!r}")
    return {
        "llm": {"provider": llm_provider, "config": llm},
        "embedder": {
            "provider": "huggingface",
            "config": {"model": embedder_dir, "embedding_dims": MINILM_DIMS, "model_kwargs": {"device": "cpu"}},
        },
        "vector_store": {
            "provider": "faiss",
            "config": {
                "collection_name": "mem0",
                "path": str(store_dir / "faiss"),
                "distance_strategy": "cosine",
                "embedding_model_dims": MINILM_DIMS,
            },
        },
        "history_db_path": str(store_dir / "history.db"),
        "custom_instructions": custom_instructions or None,
    }


def install_session_date_patch() -> None:
    """Give Mem0's prompt the session date instead of today's date.

    mem0ai 2.x's open-source ``add`` refuses a ``timestamp`` ("platform only") and fills the
    prompt's Observation/Current Date with the wall clock. For LoCoMo the session date is the
    right "now" (relative dates like "last week" resolve against it), and a fixed date keeps
    the request, and so the response cache, stable from day to day.
    """
    import mem0.memory.main as mem0_main

    original = mem0_main.generate_additive_extraction_prompt
    if getattr(original, "_mosaic_session_date", False):
        return

    def build(*args: Any, **kwargs: Any) -> str:
        date = SESSION_DATE.get()
        if date:
            kwargs.setdefault("timestamp", date)
            kwargs.setdefault("current_date", date)
        return original(*args, **kwargs)

    build._mosaic_session_date = True  # type: ignore[attr-defined]
    mem0_main.generate_additive_extraction_prompt = build


def parses_as_mem0_json(text: str) -> bool:
    """Mirror Mem0's own parsing so that output it silently drops is counted as a failure here."""
    from mem0.memory.utils import extract_json, remove_code_blocks

    body = remove_code_blocks(text or "")
    if not body.strip():
        return True  # Mem0 treats an empty answer as "nothing to extract"
    for candidate in (body, extract_json(body)):
        try:
            return isinstance(json.loads(candidate, strict=False), dict)
        except (json.JSONDecodeError, TypeError):
            continue
    return False


def local_embedder_dir(embedder: Any) -> str:
    """The harness embedder's local model folder (the packaged all-MiniLM-L6-v2 by default)."""
    path = getattr(embedder, "model_path", None)
    if path and Path(path).exists():
        return str(path)
    from core.embed import packaged_model_dir

    return str(packaged_model_dir())
