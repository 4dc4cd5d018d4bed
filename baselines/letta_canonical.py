"""Letta's requests made canonical: a MemGPT request is a function of the benchmark and the configuration.

Four things in Letta's requests vary from run to run although nothing the agent knows has changed:

* **The clock.** Letta stamps its prompts with the machine's clock: the system prompt's memory block ("The
  current system date is: <date>", "Memory blocks were last modified: <time>"), the ``"time"`` of every packaged
  message (login event, tool results, heartbeats, system alerts), and the ``timestamp`` / ``time_ago`` of search
  results. ``LettaClock`` replaces each reading by ``now``: the session time of the turn the agent is processing
  (the adapter sets it before each message). Old messages read "now" too rather than their own time: the time
  each turn was said is in its own text (``[<session date>] <speaker>: <text>``, never rewritten), and within a
  session "now" is one value, so the prompt only changes at its end; at a session boundary the system prompt's
  date must change in any design.
* **The order.** Letta lists the agent's memory blocks, its tool rules and its tools in database order, which
  differs between two agents made the same way (random ids): ``in_canonical_order`` sorts the blocks by label
  and the rules by text, and ``LettaRequests.canonical`` sorts the tools by name.
* **The store counts.** The memory metadata ends with ``- <n> previous messages between you and the user are
  stored in recall memory`` and, once the agent has archived something, ``- <m> total memories you created are
  stored in archival memory``. Letta recounts n at every step (messages stored minus messages in context, which
  Letta 0.11.7 gets negative while a step's messages are unsaved) and m at every archival insert, so the system
  prompt changed between steps and the server's prefix cache broke at its end: the step re-read the whole history
  after it. ``without_store_counts`` keeps both sentences and drops the numbers, so the system prompt changes only
  when a memory block changes, when the archival line first appears, or at a new session's date. The agent loses
  the exact counts (the recall one was wrong here, see above) and keeps what they told it: that earlier messages
  and its own archived memories are stored, to be searched with ``conversation_search`` and
  ``archival_memory_search``; after an eviction Letta's summary message says that earlier messages were hidden and
  sums them up (Letta 0.11.7's summariser, services/summarizer/summarizer.py, gives no count there either).
* **The ids.** Tool-call ids are random (Letta's, the tool-call layer's); the prompt never shows them, except where
  Letta writes messages out as JSON text: its summariser sends the evicted messages that way, ids included.
  ``with_numbered_ids`` renames every ``"id"`` / ``"tool_call_id"`` value in message text to ``call-<n>`` in order of
  first appearance, so the links between calls and results stay and the text is the same in every run.

The response cache keys on the whole request, so before this no MemGPT call could ever be replayed and two runs
of one slice were two different runs; the clock line and the store counts, ~1,700 tokens into the prompt at the
end of the system message, also cut the server's prefix cache there on every step. ``LettaRequests.canonical``
is the tool-call layer's ``canonical_request`` hook: it runs before the cache key and the prompt are made. The patterns are Letta 0.11.7's formats
(letta/helpers/datetime_helpers.py, letta/system.py, letta/prompts/prompt_generator.py,
letta/services/tool_executor/core_tool_executor.py, letta/schemas/memory.py).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

# get_local_time / format_datetime: "%Y-%m-%d %I:%M:%S %p %Z%z", e.g. "2026-12-03 08:51:28 AM UTC+0000"
STAMP = re.compile(r"\b\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} [AP]M [A-Za-z]{1,6}[+-]\d{4}\b")
# get_local_time_fast in the memory metadata block: "%B %d, %Y", e.g. "December 03, 2026"
SYSTEM_DATE = re.compile(r"(The current system date is: )[A-Z][a-z]+ \d{2}, \d{4}")
# search results (archival and conversation): an ISO time after a "timestamp" key, quoted or escaped-quoted
ISO_AFTER_KEY = re.compile(r"(timestamp\\*['\"]\s*:\s*\\*['\"])\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[+-]\d{2}:?\d{2}|Z)?")
TIME_AGO = re.compile(r"(time_ago\\*['\"]\s*:\s*\\*['\"])\d+[smhd] ago")
# the system prompt's memory blocks (``<label>...</label>`` sections inside <memory_blocks>) and tool rules
MEMORY_BLOCKS = re.compile(r"(<memory_blocks>\n)(.*?)(</memory_blocks>)", re.S)
BLOCK = re.compile(r"<(\w+)>\n.*?\n</\1>\n*", re.S)
TOOL_RULE = re.compile(r"<tool_rule>\n.*?\n</tool_rule>", re.S)
# prompt_generator.py's memory metadata: "- {n} previous messages between you and the user are stored in recall memory
# (use tools to access them)" (n may be negative, see the module docstring) and "- {m} total memories you created are
# stored in archival memory (use tools to access them)"
RECALL_COUNT = re.compile(r"^- -?\d+ previous (messages between you and the user are stored in recall memory)", re.M)
# an id in JSON text ("id": "...", "tool_call_id": "..."), as Letta's summariser writes the evicted messages
TEXT_ID = re.compile(r'("(?:id|tool_call_id)": ")([^"\\]+)(")')
ARCHIVAL_COUNT = re.compile(r"^- \d+ total (memories you created are stored in archival memory)", re.M)


def parse_now(value: str | datetime) -> datetime:
    """A session time as an aware UTC datetime (Letta's agents run in UTC; a naive time is taken as UTC)."""
    when = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)


class LettaClock:
    """The agent's "now", and the rewrite of Letta's clock readings to it (``undated``: "now" for turns that
    carry no session time, a fixed value so that such requests are reproducible too)."""

    def __init__(self, undated: str) -> None:
        self.undated = parse_now(undated)
        self.now = self.undated

    def set(self, session_time: str | None) -> None:
        """Called by the adapter before each message it sends: the time of the turn (or question) it carries
        (a time that is not ISO 8601 counts as no time: ``undated``, so the request stays reproducible)."""
        try:
            self.now = parse_now(session_time) if session_time else self.undated
        except ValueError:
            self.now = self.undated

    def rewrite_text(self, text: str) -> str:
        now = self.now
        text = STAMP.sub(now.strftime("%Y-%m-%d %I:%M:%S %p %Z%z"), text)
        text = SYSTEM_DATE.sub(lambda m: m.group(1) + now.strftime("%B %d, %Y"), text)
        text = ISO_AFTER_KEY.sub(lambda m: m.group(1) + now.isoformat(), text)
        return TIME_AGO.sub(lambda m: m.group(1) + "0s ago", text)

    def rewrite(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` (OpenAI chat format) with every clock reading in their text set to ``now`` (copies)."""
        out = []
        for message in messages:
            content = message.get("content")
            if isinstance(content, str):
                message = {**message, "content": self.rewrite_text(content)}
            elif isinstance(content, list):
                message = {**message, "content": [
                    {**part, "text": self.rewrite_text(part["text"])} if isinstance(part, dict) and isinstance(part.get("text"), str) else part
                    for part in content]}
            out.append(message)
        return out


def in_canonical_order(text: str) -> str:
    """``text`` with its memory blocks sorted by label and its tool rules by text (each keeps its own spacing; the
    line Letta 0.11.7 writes before the first block, "The following memory blocks are currently engaged ...", stays)."""
    def sort_blocks(match: re.Match[str]) -> str:
        first = BLOCK.search(match.group(2))
        if first is None:
            return match.group(0)
        preamble, rest = match.group(2)[: first.start()], match.group(2)[first.start():]
        blocks = [m.group(0) for m in BLOCK.finditer(rest)]
        if "".join(blocks) != rest or "<" in preamble:  # not the shape this was written for: leave it as it is
            return match.group(0)
        body = sorted((b.rstrip("\n") for b in blocks), key=lambda b: BLOCK.match(b + "\n").group(1))  # type: ignore[union-attr]
        separators = [b[len(b.rstrip("\n")):] for b in blocks]
        return match.group(1) + preamble + "".join(b + sep for b, sep in zip(body, separators)) + match.group(3)

    text = MEMORY_BLOCKS.sub(sort_blocks, text)
    rules = sorted(TOOL_RULE.findall(text))
    if rules:
        queue = iter(rules)
        text = TOOL_RULE.sub(lambda _: next(queue), text)
    return text


def with_numbered_ids(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` (copies) with each id written in their text renamed ``call-<n>`` by first appearance (why: the
    module docstring); the structured ``tool_calls`` ids are left alone (the prompt does not show them)."""
    names: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        return match.group(1) + names.setdefault(match.group(2), f"call-{len(names) + 1}") + match.group(3)

    return [{**m, "content": TEXT_ID.sub(rename, m["content"])} if isinstance(m.get("content"), str) else m for m in messages]


def without_store_counts(text: str) -> str:
    """``text`` with the memory metadata's counts dropped: "- Previous messages between you and the user are stored
    in recall memory (...)", "- Memories you created are stored in archival memory (...)" (why: the module docstring)."""
    text = RECALL_COUNT.sub(lambda m: "- Previous " + m.group(1), text)
    return ARCHIVAL_COUNT.sub(lambda m: "- M" + m.group(1)[1:], text)


class LettaRequests:
    """The tool-call layer's ``canonical_request`` hook for Letta: clock set to the agent's "now", blocks, rules
    and tools in a fixed order, the store counts dropped, ids in text numbered (copies; the request as Letta sent it stays in the request
    log)."""

    def __init__(self, clock: LettaClock) -> None:
        self.clock = clock

    def canonical(self, request: dict[str, Any]) -> dict[str, Any]:
        messages = [{**m, "content": without_store_counts(in_canonical_order(m["content"]))}
                    if m.get("role") == "system" and isinstance(m.get("content"), str) else m
                    for m in with_numbered_ids(self.clock.rewrite(list(request.get("messages", []))))]
        out = {**request, "messages": messages}
        if request.get("tools"):
            out["tools"] = sorted(request["tools"], key=lambda t: str((t.get("function") or t).get("name")))
        return out
