"""What a Letta agent did with one message (baselines/letta_events.py): core-memory rewrites and deleted archival
passages become update events, new passages and core additions stored items; the reply is read from its messages."""

from __future__ import annotations

import json

from baselines.letta_events import add_events, assistant_text, tool_calls_in
from core.api import Turn


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
