"""Shared fixtures. Integration fixtures start the real local LLM server (xllamacpp) once per session."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CACHE_DIR = Path(os.environ.get("MOSAIC_CACHE_DIR", REPO / ".cache"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("MEM0_TELEMETRY", "False")


def _guarded_connect(original):
    def connect(self, address):  # noqa: ANN001
        if isinstance(address, tuple) and address and address[0] not in ("127.0.0.1", "localhost", "::1", "0.0.0.0"):
            raise RuntimeError(f"network access outside loopback attempted in a test: {address!r}")
        return original(self, address)

    return connect


@pytest.fixture(autouse=True, scope="session")
def loopback_only():
    """Socket guard: any connection outside loopback fails the test that made it."""
    original = socket.socket.connect
    socket.socket.connect = _guarded_connect(original)  # type: ignore[method-assign]
    yield
    socket.socket.connect = original  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def small_llm():
    """The real 0.5B model on the in-process llama.cpp server (fast checks of wiring)."""
    from core.llm import LocalLLM

    client = LocalLLM(model="qwen2.5-coder-0.5b-instruct", cache_path=str(CACHE_DIR / "llm_cache.sqlite"), context_tokens=8192)
    yield client
    client.close()


@pytest.fixture(scope="session")
def default_llm():
    """The real default model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M) on the local server, with the
    16k context `llm=local` runs with (one Mem0 add sends an ~8.4k-token system prompt)."""
    from core.llm import LocalLLM

    client = LocalLLM(model="qwen2.5-coder-1.5b-instruct-q4_k_m", cache_path=str(CACHE_DIR / "llm_cache.sqlite"), context_tokens=16384)
    yield client
    client.close()


@pytest.fixture(scope="session")
def embedder():
    from core.embed import SentenceEmbedder

    return SentenceEmbedder(model="packaged", cache_path=str(CACHE_DIR / "embed_cache.sqlite"))
