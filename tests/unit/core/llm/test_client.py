"""LLM client control flow against a tiny canned OpenAI-style HTTP server (no model needed)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from core.llm import LLMError, LLMOutputError, OpenAICompatClient, ResponseCache, free_port, usage_since


class _Handler(BaseHTTPRequestHandler):
    replies: list[tuple[int, str]] = []
    seen: list[dict] = []

    def log_message(self, *args):  # keep test output clean
        pass

    def do_GET(self):
        body = json.dumps({"data": [{"id": "served-model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(payload)
        status, content = type(self).replies.pop(0) if type(self).replies else (200, "ok")
        body = json.dumps(
            {"choices": [{"message": {"content": content}}], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}
        ).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server():
    _Handler.replies = []
    _Handler.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()


def test_cache_key_covers_whole_request():
    base = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0}
    assert ResponseCache.key(base) == ResponseCache.key(dict(reversed(list(base.items()))))
    assert ResponseCache.key(base) != ResponseCache.key({**base, "model": "other"})
    assert ResponseCache.key(base) != ResponseCache.key({**base, "temperature": 0.5})
    assert ResponseCache.key(base) != ResponseCache.key({**base, "response_format": {"type": "json_schema"}})
    assert ResponseCache.key(base) != ResponseCache.key({**base, "messages": [{"role": "user", "content": "hi!"}]})


def test_reads_served_model_id_and_counts(server, tmp_path):
    client = OpenAICompatClient(base_url=server, cache_path=str(tmp_path / "c.sqlite"), health_timeout_s=5)
    assert client.model_id == "served-model"
    _Handler.replies = [(200, "first")]
    before = client.usage
    first = client.chat([{"role": "user", "content": "q"}], purpose="answer")
    second = client.chat([{"role": "user", "content": "q"}], purpose="answer")
    assert (first.text, first.cached) == ("first", False)
    assert (second.text, second.cached) == ("first", True)
    assert len(_Handler.seen) == 1  # the second came from the cache
    spent = usage_since(before, client.usage)
    assert spent.calls == 2 and spent.cached_calls == 1
    assert spent.by_purpose["answer"] == {"calls": 2, "prompt_tokens": 14, "completion_tokens": 6}


def test_retries_transient_errors_then_succeeds(server):
    client = OpenAICompatClient(base_url=server, model="m", max_retries=3)
    _Handler.replies = [(503, "busy"), (200, "fine")]
    assert client.chat([{"role": "user", "content": "x"}]).text == "fine"
    assert len(_Handler.seen) == 2


def test_dead_server_gives_clear_error_after_bounded_retries():
    client = OpenAICompatClient(base_url=f"http://127.0.0.1:{free_port()}", model="m", max_retries=2, timeout_s=2)
    with pytest.raises(LLMError, match="unreachable after 2 tries"):
        client.chat([{"role": "user", "content": "x"}])


def test_schema_breaking_output_is_retried_then_raised(server):
    client = OpenAICompatClient(base_url=server, model="m")
    _Handler.replies = [(200, "not json"), (200, '{"label": "ok"}')]
    assert client.chat_json([{"role": "user", "content": "x"}], {"type": "object"}) == {"label": "ok"}
    _Handler.replies = [(200, "nope"), (200, "still nope")]
    with pytest.raises(LLMOutputError):
        client.chat_json([{"role": "user", "content": "y"}], {"type": "object"})
    assert _Handler.seen[-1]["seed"] == 1  # the retry asked with a new seed


def test_api_key_comes_from_environment_and_is_not_cached(server, tmp_path, monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-secret-value")
    client = OpenAICompatClient(base_url=server, model="m", api_key_env="MY_KEY", cache_path=str(tmp_path / "c.sqlite"))
    client.chat([{"role": "user", "content": "x"}])
    assert b"sk-secret-value" not in (tmp_path / "c.sqlite").read_bytes()
    monkeypatch.delenv("MY_KEY")
    fresh = OpenAICompatClient(base_url=server, model="m", api_key_env="MY_KEY")
    with pytest.raises(LLMError, match="MY_KEY"):
        fresh.chat([{"role": "user", "content": "z"}])


def test_json_tolerates_code_fence(server):
    client = OpenAICompatClient(base_url=server, model="m")
    _Handler.replies = [(200, '```json\n{"a": 1}\n```')]
    assert client.chat([{"role": "user", "content": "x"}]).json() == {"a": 1}


def test_local_flash_attn_setting_is_checked_and_takes_yaml_booleans():
    from core.llm import LocalLLM

    assert LocalLLM(model="x.gguf", flash_attn=False).flash_attn == "off"  # YAML reads a bare `off` as false
    assert LocalLLM(model="x.gguf", flash_attn="on").flash_attn == "on"
    with pytest.raises(ValueError, match="flash_attn"):
        LocalLLM(model="x.gguf", flash_attn="fast")


def test_greedy_schema_fault_is_remembered_so_a_replay_pays_nothing(server, tmp_path):
    client = OpenAICompatClient(base_url=server, model="m", cache_path=str(tmp_path / "c.sqlite"))
    messages = [{"role": "user", "content": "x"}]
    _Handler.replies = [(200, "not json"), (200, '{"label": "ok"}')]
    assert client.chat_json(messages, {"type": "object"}) == {"label": "ok"}
    assert len(_Handler.seen) == 2
    before = client.usage
    assert client.chat_json(messages, {"type": "object"}) == {"label": "ok"}  # seed 0 fails again from the cache
    assert len(_Handler.seen) == 2
    spent = usage_since(before, client.usage)
    assert spent.calls == 2 and spent.cached_calls == 2
    with pytest.raises(LLMOutputError, match="remembered"):  # the fault is never served as a response
        client.chat(messages, response_schema={"type": "object"}, seed=0)


def test_fault_memory_off_or_sampling_asks_again(server, tmp_path):
    messages = [{"role": "user", "content": "x"}]
    remembering = OpenAICompatClient(base_url=server, model="m", cache_path=str(tmp_path / "c.sqlite"))
    _Handler.replies = [(200, "not json")]
    with pytest.raises(LLMOutputError):
        remembering.chat(messages, response_schema={"type": "object"})
    forgetting = OpenAICompatClient(base_url=server, model="m", cache_path=str(tmp_path / "c.sqlite"), remember_output_faults=False)
    _Handler.replies = [(200, '{"label": "ok"}')]
    assert forgetting.chat(messages, response_schema={"type": "object"}).json() == {"label": "ok"}
    assert len(_Handler.seen) == 2
    assert remembering.chat(messages, response_schema={"type": "object"}).json() == {"label": "ok"}  # the good reply replaced the fault
    _Handler.replies = [(200, "not json"), (200, "not json")]
    for _ in range(2):  # sampled replies differ when asked again: a fault at temperature > 0 is not remembered
        with pytest.raises(LLMOutputError):
            remembering.chat(messages, response_schema={"type": "object"}, temperature=0.7)
    assert len(_Handler.seen) == 4


def _change_one_byte(path, old: str, new: str) -> None:
    """Edit a stored reply in place, as disk damage or a stray edit would, keeping it valid JSON."""
    import sqlite3

    conn = sqlite3.connect(path)
    changed = conn.execute("UPDATE responses SET value = replace(value, ?, ?)", (old, new)).rowcount
    conn.commit()
    conn.close()
    assert changed == 1


def test_changed_byte_in_cached_reply_is_a_miss_with_a_warning_and_is_replaced(server, tmp_path, caplog):
    path = tmp_path / "c.sqlite"
    client = OpenAICompatClient(base_url=server, model="m", cache_path=str(path))
    _Handler.replies = [(200, "Paris")]
    assert client.chat([{"role": "user", "content": "capital?"}]).text == "Paris"
    _change_one_byte(path, "Paris", "Parus")
    _Handler.replies = [(200, "Paris")]
    with caplog.at_level("WARNING"):
        again = client.chat([{"role": "user", "content": "capital?"}])
    assert (again.text, again.cached) == ("Paris", False)  # asked again, not served "Parus"
    assert len(_Handler.seen) == 2
    assert any(str(path) in r.getMessage() and "checksum" in r.getMessage() for r in caplog.records)
    third = client.chat([{"role": "user", "content": "capital?"}])  # the fresh reply replaced the entry
    assert (third.text, third.cached) == ("Paris", True) and len(_Handler.seen) == 2


def test_cache_entries_from_before_checksums_stay_hits_and_are_checksummed_on_first_read(tmp_path, caplog):
    import sqlite3

    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)  # the schema every cache file had before checksums
    old.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    old.execute("INSERT INTO responses VALUES (?, ?)", ("k", json.dumps({"text": "kept"})))
    old.commit()
    old.close()
    cache = ResponseCache(path)
    assert cache.get("k") == {"text": "kept"}
    cache.close()
    _change_one_byte(path, "kept", "kepT")  # now that it carries a checksum, a change is caught
    cache = ResponseCache(path)
    with caplog.at_level("WARNING"):
        assert cache.get("k") is None
    assert cache.items() == []  # an export leaves the changed entry out
    cache.close()
    assert any(str(path) in r.getMessage() for r in caplog.records)


def test_retry_policy_samples_a_new_reproducible_attempt_and_a_replay_pays_nothing(server, tmp_path):
    """At temperature 0 llama.cpp decodes greedily, so a retry with only another seed writes the same
    loop again. A RetryPolicy's retry keeps the first request as it was (cached replies replay) and asks again at a
    small temperature with a fixed seed; the first try's fault is remembered, so a resumed run pays for neither try."""
    from core.llm import GuardedLLM, RetryPolicy

    client = OpenAICompatClient(base_url=server, model="m", cache_path=str(tmp_path / "c.sqlite"))
    guarded = GuardedLLM(client, RetryPolicy(attempts=2, temperature=0.3, seed=5))
    messages = [{"role": "user", "content": "x"}]
    _Handler.replies = [(200, '{"facts": ["a", "a", "a"'), (200, '{"facts": ["a"]}')]
    assert guarded.chat_json(messages, {"type": "object"}, max_tokens=32, purpose="extraction") == {"facts": ["a"]}
    assert [(r["temperature"], r["seed"]) for r in _Handler.seen] == [(0.0, 0), (0.3, 5)]
    assert {k: v for k, v in _Handler.seen[0].items() if k not in ("temperature", "seed")} == {
        k: v for k, v in _Handler.seen[1].items() if k not in ("temperature", "seed")}
    before = client.usage
    assert guarded.chat_json(messages, {"type": "object"}, max_tokens=32, purpose="extraction") == {"facts": ["a"]}
    assert len(_Handler.seen) == 2 and usage_since(before, client.usage).cached_calls == 2
    assert guarded.model_id == "m" and guarded.usage.calls == client.usage.calls  # the rest is the client's


def test_retry_policy_default_is_the_old_greedy_schedule_and_values_are_checked():
    from core.llm import RetryPolicy, retry_policy

    old = RetryPolicy(attempts=3, temperature=0.0, seed=1)
    assert [old.sampling(n, 0.0, 0) for n in range(3)] == [(0.0, 0), (0.0, 1), (0.0, 2)]
    sampled = RetryPolicy(attempts=3, temperature=0.3, seed=10)
    assert [sampled.sampling(n, 0.0, 0) for n in range(3)] == [(0.0, 0), (0.3, 10), (0.3, 11)]
    assert sampled.sampling(1, 0.7, 0) == (0.7, 10)  # a caller that already samples keeps its temperature
    assert retry_policy(None).attempts == 1 and retry_policy({"attempts": 2, "temperature": 0.3}).temperature == 0.3
    for bad in ({"attempts": 0}, {"temperature": 3}, {"seed": -1}, {"tries": 2}):
        with pytest.raises(ValueError, match="system.retry"):
            retry_policy(bad)
