"""Letta's requests made canonical: a MemGPT request is a function of the benchmark and the configuration.

Two things in Letta's requests vary from run to run although nothing the agent knows has changed:

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

The response cache keys on the whole request, so before this no MemGPT call could ever be replayed and two runs
of one slice were two different runs; the clock line ~1,700 tokens into the system prompt also cut the server's
prefix cache there on every step. ``LettaRequests.canonical`` is the tool-call layer's ``canonical_request`` hook:
it runs before the cache key and the prompt are made. The patterns are Letta 0.11.7's formats
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
    """``text`` with its memory blocks sorted by label and its tool rules by text (each keeps its own spacing)."""
    def sort_blocks(match: re.Match[str]) -> str:
        # Letta 0.11.7 opens the section with a line of plain text ("The following memory blocks are currently
        # engaged ...") before the blocks: it stays where it is, only the blocks after it are sorted.
        found = list(BLOCK.finditer(match.group(2)))
        preamble = match.group(2)[: found[0].start()] if found else match.group(2)
        blocks = [m.group(0) for m in found]
        if not blocks or "<" in preamble or preamble + "".join(blocks) != match.group(2):  # not the shape this was written for
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


class LettaRequests:
    """The tool-call layer's ``canonical_request`` hook for Letta: clock set to the agent's "now", blocks, rules
    and tools in a fixed order (copies; the request as Letta sent it stays in the request log)."""

    def __init__(self, clock: LettaClock) -> None:
        self.clock = clock

    def canonical(self, request: dict[str, Any]) -> dict[str, Any]:
        messages = [{**m, "content": in_canonical_order(m["content"])} if m.get("role") == "system" and isinstance(m.get("content"), str) else m
                    for m in self.clock.rewrite(list(request.get("messages", [])))]
        out = {**request, "messages": messages}
        if request.get("tools"):
            out["tools"] = sorted(request["tools"], key=lambda t: str((t.get("function") or t).get("name")))
        return out
