"""Mem0's library wired onto the harness (baselines/mem0_library.py): the config points at the harness's endpoint,
the local MiniLM and the run folder; the session date reaches Mem0's prompt."""

from __future__ import annotations

from pathlib import Path

import pytest

from baselines.mem0_library import SESSION_DATE, install_session_date_patch, mem0_config


def test_config_points_at_harness_endpoint_local_minilm_and_run_folder(tmp_path: Path):
    cfg = mem0_config("http://127.0.0.1:1234/v1", "qwen", "sk-x", "/models/minilm", tmp_path, max_tokens=2000)
    assert cfg["llm"] == {
        "provider": "vllm",
        "config": {"model": "qwen", "vllm_base_url": "http://127.0.0.1:1234/v1", "api_key": "sk-x", "max_tokens": 2000},
    }
    assert cfg["embedder"]["provider"] == "huggingface"
    assert cfg["embedder"]["config"]["model"] == "/models/minilm"
    assert cfg["embedder"]["config"]["embedding_dims"] == 384
    assert cfg["vector_store"]["provider"] == "faiss"
    assert cfg["vector_store"]["config"]["embedding_model_dims"] == 384
    assert cfg["vector_store"]["config"]["path"].startswith(str(tmp_path))
    assert cfg["history_db_path"].startswith(str(tmp_path))
    assert mem0_config("u", "m", "k", "e", tmp_path, 10, llm_provider="openai")["llm"]["config"]["openai_base_url"] == "u"
    with pytest.raises(ValueError, match="llm_provider"):
        mem0_config("u", "m", "k", "e", tmp_path, 10, llm_provider="ollama")


def test_session_date_reaches_mem0_prompt_as_observation_date():
    """Runs Mem0's real prompt builder (skipped where mem0ai is not installed)."""
    pytest.importorskip("mem0")
    import mem0.memory.main as mem0_main

    install_session_date_patch()
    token = SESSION_DATE.set("2023-05-08T13:56:00")
    try:
        prompt = mem0_main.generate_additive_extraction_prompt(existing_memories=[], new_messages="user: hi")
    finally:
        SESSION_DATE.reset(token)
    assert "## Observation Date\n2023-05-08T13:56:00" in prompt
    assert "## Current Date\n2023-05-08T13:56:00" in prompt
    undated = mem0_main.generate_additive_extraction_prompt(existing_memories=[], new_messages="user: hi")
    assert "2023-05-08" not in undated
