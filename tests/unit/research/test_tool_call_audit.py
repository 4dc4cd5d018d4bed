"""research/tool_call_audit: well-formed and malformed tool calls, steps per agent message, loops, from the layer's log."""

from __future__ import annotations

import json

import pytest

from research.tool_call_audit import audit, main


def _entry(turn: str, tool: str | None, arguments: dict | None = None, heartbeats: int = 0) -> dict:
    messages = [{"role": "system", "content": "You are MemGPT."}, {"role": "user", "content": json.dumps({"type": "user_message", "message": turn})}]
    for _ in range(heartbeats):
        messages += [{"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {"name": "x", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": "c", "content": "ok"},
                     {"role": "user", "content": json.dumps({"type": "heartbeat", "reason": "continue"})}]  # fmt: skip
    reply = json.dumps({"name": tool, "arguments": arguments or {}}) if tool else "not json"
    return {"request": {"messages": messages}, "reply": reply, "tool": tool}


def test_steps_are_grouped_by_message_and_loops_and_endings_are_counted(tmp_path):
    entries = [
        _entry("Hi Mel!", "send_message", {"message": "Hi!"}),
        *[_entry("I adopted a dog", "conversation_search", {"query": "dog"}, heartbeats=i) for i in range(3)],  # a search loop
        _entry("My sister moved", "archival_memory_insert", {"content": "sister moved"}),
        _entry("My sister moved", None, heartbeats=1),  # the layer gave up on this step
    ]
    report = audit(entries)
    assert report["tool_requests"] == 6 and report["well_formed"] == 5 and report["malformed"] == 1
    assert report["by_tool"] == {"conversation_search": 3, "send_message": 1, "archival_memory_insert": 1}
    assert report["chains"] == 3 and report["steps_per_chain"] == pytest.approx(2.0)
    assert report["repeated_calls"] == 2 and report["chains_ending_with_reply"] == 1
    log = tmp_path / "system" / "tool_requests.jsonl"
    log.parent.mkdir()
    log.write_text("".join(json.dumps(e) + "\n" for e in entries) + '{"torn')
    assert main([str(tmp_path), "--out", str(tmp_path / "audit.json")])["well_formed_share"] == pytest.approx(5 / 6)
    with pytest.raises(SystemExit, match="tool_requests.jsonl is missing"):
        main([str(tmp_path / "nothing")])
