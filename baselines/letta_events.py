"""What a Letta agent did with one message, read from its response and its archival memory before and after.

MemGPT has no contradiction verdict of its own: it revises what it holds by rewriting core memory or deleting
archival passages. ``add_events`` turns those into the harness's stored items and ``update`` events; the other
helpers read the tool calls and the reply out of Letta's messages. Kept apart from ``baselines.memgpt`` (the
adapter, which fetches what these read) so the mapping is unit-tested without a server.
"""

from __future__ import annotations

import json
from typing import Any

from core.api import ConflictEvent, StoredItem, Turn

# Tool calls that rewrite core memory (Letta's v1 and v2 memory tools): the old text they replace.
CORE_REWRITES = {"core_memory_replace": ("old_content", "new_content"), "memory_replace": ("old_str", "new_str")}
CORE_ADDS = {"core_memory_append": "content", "memory_insert": "new_str"}


def tool_calls_in(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(name, arguments) of each tool call in a Letta response's messages."""
    calls = []
    for message in messages:
        if message.get("message_type") != "tool_call_message":
            continue
        call = message.get("tool_call") or {}
        try:
            arguments = json.loads(call.get("arguments") or "{}")
        except json.JSONDecodeError:
            arguments = {}
        calls.append((str(call.get("name")), arguments if isinstance(arguments, dict) else {}))
    return calls


def assistant_text(messages: list[dict[str, Any]]) -> str:
    """What the agent said to the user (send_message, as Letta's assistant messages)."""
    texts = [m.get("content") for m in messages if m.get("message_type") == "assistant_message"]
    return "\n".join(t if isinstance(t, str) else json.dumps(t) for t in texts if t)


def add_events(
    turn: Turn,
    calls: list[tuple[str, dict[str, Any]]],
    passages_before: dict[str, str],
    passages_after: dict[str, str],
    passage_turns: dict[str, list[str]],
) -> tuple[list[StoredItem], list[ConflictEvent]]:
    """Stored items and update events of one turn's add.

    New archival passages and core-memory additions are stored items; core-memory replacements
    and archival passages that disappeared are ``update`` events (MemGPT's only way of revising
    what it holds; it has no contradiction verdict of its own).
    """
    stored = [StoredItem(pid, text, [turn.turn_id]) for pid, text in passages_after.items() if pid not in passages_before]
    events: list[ConflictEvent] = []
    for name, arguments in calls:
        label = str(arguments.get("label", "core"))
        if name in CORE_REWRITES:
            old_key, new_key = CORE_REWRITES[name]
            new_text = str(arguments.get(new_key, ""))
            stored.append(StoredItem(f"core:{label}", new_text, [turn.turn_id]))
            events.append(ConflictEvent(
                new_text=new_text, old_text=str(arguments.get(old_key, "")), verdict="update",
                reason=f"memgpt {name}: replaced text in core memory block {label!r}",
                new_source_turn_ids=[turn.turn_id], old_memory_id=f"core:{label}"))
        elif name == "memory_rethink":
            stored.append(StoredItem(f"core:{label}", str(arguments.get("new_memory", "")), [turn.turn_id]))
            events.append(ConflictEvent(
                new_text=str(arguments.get("new_memory", "")), old_text="", verdict="update",
                reason=f"memgpt memory_rethink: rewrote core memory block {label!r}",
                new_source_turn_ids=[turn.turn_id], old_memory_id=f"core:{label}"))
        elif name in CORE_ADDS:
            stored.append(StoredItem(f"core:{label}", str(arguments.get(CORE_ADDS[name], "")), [turn.turn_id]))
    for pid, old_text in passages_before.items():
        if pid not in passages_after:
            events.append(ConflictEvent(
                new_text=turn.text, old_text=old_text, verdict="update",
                reason="memgpt: archival passage deleted during this add",
                new_source_turn_ids=[turn.turn_id], old_source_turn_ids=list(passage_turns.get(pid, [])), old_memory_id=pid))
    return stored, events
