"""MemGPT adapter (baselines/memgpt.py) without a Letta server: usage, messages, and a killed run resuming its agent.
(The server and the schema fix: test_letta_server.py; what an add changed: test_letta_events.py.)"""

from __future__ import annotations

import json

from baselines.memgpt import message_for, usage_from
from core.api import Turn
from tests.unit.baselines.test_letta_events import _call


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


