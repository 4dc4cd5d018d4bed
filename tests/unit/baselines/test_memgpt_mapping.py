"""MemGPT adapter's pure parts: Letta's SQLite schema fix, what an add changed, usage, messages."""

from __future__ import annotations

import json
import sqlite3

import httpx
import pytest

from baselines.memgpt import (
    add_events,
    assistant_text,
    fix_archives_agents_default,
    message_for,
    send_over_fresh_connection_if_reset,
    tool_calls_in,
    usage_from,
)
from core.api import Turn

# The table as Letta 0.11.7 creates it on SQLite (copied from a fresh server's sqlite.db)
LETTA_DDL = """CREATE TABLE archives_agents (
\tagent_id VARCHAR NOT NULL,
\tarchive_id VARCHAR NOT NULL,
\tcreated_at DATETIME DEFAULT 'now()' NOT NULL,
\tis_owner BOOLEAN NOT NULL,
\tPRIMARY KEY (agent_id, archive_id),
\tCONSTRAINT unique_agent_archive UNIQUE (agent_id)
)"""


def test_schema_fix_rebuilds_the_table_with_a_real_default_and_keeps_rows(tmp_path):
    db = tmp_path / "sqlite.db"
    with sqlite3.connect(db) as con:
        con.execute(LETTA_DDL)
        con.execute("INSERT INTO archives_agents VALUES ('a1', 'r1', '2024-01-01 00:00:00', 1)")
        con.execute("INSERT INTO archives_agents (agent_id, archive_id, is_owner) VALUES ('a2', 'r2', 1)")
        broken = con.execute("SELECT created_at FROM archives_agents WHERE agent_id='a2'").fetchone()[0]
    assert broken == "now()"  # the bug: a literal string that Letta cannot parse as a date

    assert fix_archives_agents_default(db) is True
    with sqlite3.connect(db) as con:
        sql = con.execute("SELECT sql FROM sqlite_master WHERE name='archives_agents'").fetchone()[0]
        con.execute("INSERT INTO archives_agents (agent_id, archive_id, is_owner) VALUES ('a3', 'r3', 1)")
        rows = dict(con.execute("SELECT agent_id, created_at FROM archives_agents").fetchall())
        with pytest.raises(sqlite3.IntegrityError):  # the UNIQUE constraint survived the rebuild
            con.execute("INSERT INTO archives_agents (agent_id, archive_id, is_owner) VALUES ('a3', 'r4', 1)")
    assert "CURRENT_TIMESTAMP" in sql and "now()" not in sql
    assert rows["a1"] == "2024-01-01 00:00:00" and set(rows) == {"a1", "a2", "a3"}
    assert rows["a3"][:2] == "20" and rows["a3"] != "now()"
    assert fix_archives_agents_default(db) is False  # idempotent


def test_schema_fix_names_the_missing_table(tmp_path):
    sqlite3.connect(tmp_path / "empty.db").close()
    with pytest.raises(RuntimeError, match="archives_agents"):
        fix_archives_agents_default(tmp_path / "empty.db")


def _call(name, **arguments):
    return {"message_type": "tool_call_message", "tool_call": {"name": name, "arguments": json.dumps(arguments)}}


def test_core_replacements_and_archival_deletions_become_update_events():
    turn = Turn("D2:3", "Ann", "I moved to Berlin.", "2024-03-02T10:00:00")
    messages = [
        {"message_type": "reasoning_message", "reasoning": "she moved"},
        _call("core_memory_replace", label="human", old_content="Lives in Paris", new_content="Lives in Berlin"),
        {"message_type": "tool_return_message", "tool_return": "None"},
        _call("archival_memory_insert", content="Ann moved to Berlin in March 2024"),
        _call("core_memory_append", label="human", content="Likes cafes"),
        _call("send_message", message="Noted!"),
        {"message_type": "assistant_message", "content": "Noted!"},
    ]
    before = {"p1": "Ann lives in Paris", "p2": "Ann is a teacher"}
    after = {"p2": "Ann is a teacher", "p3": "Ann moved to Berlin in March 2024"}
    stored, events = add_events(turn, tool_calls_in(messages), before, after, {"p1": ["D1:1"]})

    assert [(s.memory_id, s.text, s.source_turn_ids) for s in stored] == [
        ("p3", "Ann moved to Berlin in March 2024", ["D2:3"]),
        ("core:human", "Lives in Berlin", ["D2:3"]),
        ("core:human", "Likes cafes", ["D2:3"]),
    ]
    assert [(e.old_text, e.new_text, e.verdict, e.old_memory_id) for e in events] == [
        ("Lives in Paris", "Lives in Berlin", "update", "core:human"),
        ("Ann lives in Paris", "I moved to Berlin.", "update", "p1"),
    ]
    assert events[1].old_source_turn_ids == ["D1:1"] and all(e.new_source_turn_ids == ["D2:3"] for e in events)
    assert assistant_text(messages) == "Noted!"


def test_an_add_that_only_appends_raises_no_event():
    turn = Turn("D1:1", "Ann", "Hi", None)
    stored, events = add_events(turn, tool_calls_in([_call("send_message", message="hi")]), {"p1": "x"}, {"p1": "x"}, {})
    assert stored == [] and events == []


def test_usage_is_read_from_letta_steps_and_messages_carry_the_session_date():
    usage = usage_from({"step_count": 2, "prompt_tokens": 7000, "completion_tokens": 90, "total_tokens": 7090})
    assert (usage.calls, usage.prompt_tokens, usage.completion_tokens) == (2, 7000, 90)
    assert usage.by_purpose == {"memgpt.step": {"calls": 2, "prompt_tokens": 7000, "completion_tokens": 90}}
    assert usage_from(None).calls == 0
    text = message_for(Turn("D1:1", "Caroline", "Hey Mel!", "2023-05-08T13:56:00"), "[{date}] {speaker}: {text}")
    assert text == "[08 May 2023, 13:56] Caroline: Hey Mel!"
    assert message_for(Turn("x", "A", "t"), "[{date}] {speaker}: {text}") == "[unknown date] A: t"


class _ScriptedLetta:
    """The Letta side of MemGPTMemory's add path, in memory: agents, passages, message replies."""

    def __init__(self):
        self.sent: list[tuple[str, str]] = []
        self.deleted: list[str] = []
        self.passages: dict[str, dict[str, str]] = {}
        self.n_agents = 0

    def adapter(self, workdir):
        from baselines.memgpt import MemGPTMemory
        from tests.fakes import FakeLLM

        letta = self

        class Scripted(MemGPTMemory):
            def _create_agent(self, namespace):
                letta.n_agents += 1
                agent_id = f"agent-{letta.n_agents}"
                letta.passages[agent_id] = {}
                return agent_id

            def _delete_agent(self, agent_id):
                letta.deleted.append(agent_id)

            def _passages(self, agent_id):
                return dict(letta.passages[agent_id])

            def _send(self, agent_id, text):
                letta.sent.append((agent_id, text))
                letta.passages[agent_id][f"p{len(letta.sent)}"] = text
                return {"messages": [_call("archival_memory_insert", content=text)],
                        "usage": {"step_count": 2, "prompt_tokens": 100, "completion_tokens": 10}}

        return Scripted(FakeLLM(lambda m, s: ""), embedder=None, workdir=str(workdir), retry=None)


def test_a_killed_run_resumes_the_agent_without_resending_finished_turns(tmp_path):
    letta = _ScriptedLetta()
    turns = [Turn(f"D1:{i}", "Ann", f"turn {i}", "2024-01-01T10:00:00") for i in (1, 2, 3)]
    first = letta.adapter(tmp_path)
    first.reset("conv")
    report = first.add("conv", turns[:2])
    assert len(letta.sent) == 2 and report.usage.calls == 4 and report.usage.prompt_tokens == 200
    assert [s.source_turn_ids for s in report.stored] == [["D1:1"], ["D1:2"]]

    resumed = letta.adapter(tmp_path)  # a new process on the same run folder, after a kill
    resumed.reset("conv")
    report = resumed.add("conv", turns)
    assert [text for _, text in letta.sent[2:]] == ["[01 January 2024, 10:00] Ann: turn 3"]
    assert {agent for agent, _ in letta.sent} == {"agent-1"} and letta.deleted == []
    assert resumed.resumed_turns_skipped == 2 and report.usage.calls == 2

    resumed.reset("conv")  # a different conversation under the same namespace: a fresh agent
    resumed.add("conv", [Turn("X:1", "Bo", "hello", None)])
    assert letta.deleted == ["agent-1"] and letta.sent[-1][0] == "agent-2"
    costs = [json.loads(line) for line in (tmp_path / "turn_costs.jsonl").read_text().splitlines()]
    assert [(c["namespace"], c["turn_id"]) for c in costs] == [("conv", "D1:1"), ("conv", "D1:2"), ("conv", "D1:3"), ("conv", "X:1")]
    assert all(c["usage"]["calls"] == 2 and c["usage"]["prompt_tokens"] == 100 and c["mode"] == "messages" for c in costs)


class _Server:
    """A stand-in for Letta's HTTP side: resets the first request on a client, or answers 500 once."""

    def __init__(self, reset_first: bool = False, fail_first_post: bool = False) -> None:
        self.reset_first, self.fail_first_post = reset_first, fail_first_post
        self.seen: list[str] = []
        self.clients = 0

    def client(self) -> httpx.Client:
        self.clients += 1
        generation = self.clients

        def handle(request: httpx.Request) -> httpx.Response:
            self.seen.append(f"{generation}:{request.method}")
            if self.reset_first and generation == 1:
                raise httpx.ReadError("[Errno 104] Connection reset by peer", request=request)
            if self.fail_first_post and request.method == "POST" and generation == 1:
                return httpx.Response(500, json={"detail": "An internal server error occurred"})
            return httpx.Response(200, json={"ok": generation})

        return httpx.Client(base_url="http://letta.test", transport=httpx.MockTransport(handle))


def test_a_reset_get_is_sent_once_more_on_a_new_connection() -> None:
    server = _Server(reset_first=True)
    http, response = send_over_fresh_connection_if_reset(server.client(), server.client, "GET", "/v1/agents/a/archival-memory")
    assert response.json() == {"ok": 2}
    assert server.seen == ["1:GET", "2:GET"]
    assert http.request("GET", "/x").json() == {"ok": 2}  # later requests go through the new client


def test_a_reset_post_is_never_sent_twice() -> None:
    server = _Server(reset_first=True)
    with pytest.raises(httpx.ReadError):
        send_over_fresh_connection_if_reset(server.client(), server.client, "POST", "/v1/agents/a/messages", json={})
    assert server.seen == ["1:POST"]


def test_after_a_server_error_the_next_request_uses_a_new_connection() -> None:
    server = _Server(fail_first_post=True)
    http, response = send_over_fresh_connection_if_reset(server.client(), server.client, "POST", "/v1/agents/a/messages", json={})
    assert response.status_code == 500  # returned to the caller, which reports the failed turn
    http, response = send_over_fresh_connection_if_reset(http, server.client, "GET", "/v1/agents/a/archival-memory")
    assert response.json() == {"ok": 2}
    assert server.seen == ["1:POST", "2:GET"]
