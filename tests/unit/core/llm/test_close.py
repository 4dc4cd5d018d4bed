"""Closing stops at once: a closed LLM client refuses calls and aborts the one in flight, a LocalLLM never
starts its model again, and the tool-call layer answers its requests in flight with 503 instead of waiting.

The backend is tests/fake_openai_server.py in ``hang`` mode: a generation that would take 30 s."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from core.llm import LocalLLM, OpenAICompatClient
from core.llm.client import ClientClosedError
from core.llm.tool_calls import ToolCallServer, ToolServerClosedError
from tests.fake_openai_server import MODEL_ID, FakeOpenAIServer

TOOLS = [{"type": "function", "function": {"name": "send_message", "description": "Reply to the user.", "parameters": {
    "type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}}}]
HANG_S = 30.0


def _client(url: str, tmp_path) -> OpenAICompatClient:
    return OpenAICompatClient(base_url=url, model=MODEL_ID, cache_path=str(tmp_path / "cache.sqlite"), timeout_s=60,
                              max_retries=4, retry_wait_s=0.01)


def _in_thread(fn) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def run() -> None:
        started = time.monotonic()
        try:
            out["result"] = fn()
        except BaseException as err:  # noqa: BLE001 - the test reads it
            out["error"] = err
        out["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def _wait_for_call(server: FakeOpenAIServer, n: int = 1, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while server.calls < n and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.calls >= n, "the request never reached the fake server"


def test_close_aborts_the_call_in_flight_and_refuses_every_later_one(tmp_path):
    with FakeOpenAIServer(mode="hang", hang_s=HANG_S) as slow:
        llm = _client(slow.url, tmp_path)
        thread, out = _in_thread(lambda: llm.chat([{"role": "user", "content": "a long story"}], purpose="probe"))
        _wait_for_call(slow)
        started = time.monotonic()
        llm.close()
        assert time.monotonic() - started < 1.0  # close never waits for the generation
        thread.join(5)
        assert not thread.is_alive() and isinstance(out["error"], ClientClosedError), out
        assert out["seconds"] < 5 and "closed while it ran" in str(out["error"])
        with pytest.raises(ClientClosedError, match="is closed") as refused:
            llm.chat([{"role": "user", "content": "another"}])
        assert "\n" not in str(refused.value)  # one line
        time.sleep(0.3)
        assert slow.calls == 1  # no retry of the aborted call, nothing sent after close
    assert llm.usage.calls == 0  # nothing metered for the abandoned call
    llm.close()  # twice is harmless


def test_a_closed_local_llm_never_starts_its_model(monkeypatch):
    import core.model_files

    def no_model(*args, **kwargs):
        raise AssertionError("the model was resolved (a start) after close")

    monkeypatch.setattr(core.model_files, "resolve_model", no_model)
    llm = LocalLLM(model="no-such-model.gguf")
    llm.close()
    with pytest.raises(ClientClosedError):
        _ = llm.base_url
    with pytest.raises(ClientClosedError):
        llm.chat([{"role": "user", "content": "hi"}])


def test_tool_call_server_answers_its_requests_in_flight_with_503_when_it_closes(tmp_path):
    """Letta's shape: a step waits on the tool-call layer, whose worker thread waits on the LLM. Closing the
    layer answers the step at once (Letta stops stepping), closing the client aborts the generation, and no
    request reaches the LLM afterwards."""
    with FakeOpenAIServer(mode="hang", hang_s=HANG_S) as slow:
        llm = _client(slow.url, tmp_path)
        tools = ToolCallServer(llm, model_name="m")
        tools.start()
        url = tools.api_base + "/chat/completions"
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS, "tool_choice": "required"}
        thread, out = _in_thread(lambda: httpx.post(url, json=body, timeout=60))
        _wait_for_call(slow)
        started = time.monotonic()
        tools.close()
        llm.close()
        closing_s = time.monotonic() - started
        thread.join(5)
        assert not thread.is_alive() and out["result"].status_code == 503, out
        assert out["seconds"] < 5 and closing_s < 4
        with pytest.raises(httpx.TransportError):  # nothing listens any more
            httpx.post(url, json=body, timeout=5)
        with pytest.raises(ToolServerClosedError):
            tools.complete(body)  # and the layer itself refuses before any LLM call
        time.sleep(0.3)
        assert slow.calls == 1
        assert tools.stats.model_replies == 0 and tools.stats.refused_while_closing >= 1
