"""Letta's requests made canonical (baselines.letta_canonical): its clock readings become the session time of the
turn the agent processes and its lists a fixed order, so a request is the same whenever and in whichever agent it
is made, and a repeated run replays from the cache.

The request shapes are Letta 0.11.7's, as its requests to the tool-call layer look (system prompt with the
memory metadata block, the boot exchange, the login event, tool results, search results), written by hand."""

from __future__ import annotations

import json
import re

from baselines.letta_canonical import LettaClock, LettaRequests, in_canonical_order
from core.api import Turn
from core.llm import OpenAICompatClient
from core.llm.tool_calls import ToolCallServer, flatten_messages
from tests.fake_openai_server import MODEL_ID, FakeOpenAIServer

TURN_TEXT = "[08 May 2023, 13:56] Ann: I moved to Berlin in March."


PERSONA = "<persona>\n<description>\nThe persona block.\n</description>\n<value>\nI am a memory assistant.\n</value>\n</persona>\n\n"
HUMAN = "<human>\n<description>\nThe human block.\n</description>\n<value>\n\n</value>\n</human>\n\n"
# Letta 0.11.7 opens the memory blocks with this line (the shape check once missed it, so real prompts kept
# their database order)
PREAMBLE = "The following memory blocks are currently engaged in your core memory unit:\n\n"
RULES = ["<tool_rule>\nsend_message ends your response (yields control) when called\n</tool_rule>",
         "<tool_rule>\nconversation_search requires continuing your response when called\n</tool_rule>"]


def letta_request(wall: str, wall_iso: str, wall_date: str, blocks: str = PERSONA + HUMAN, rules: list[str] = RULES,
                  recall: int = 3, archival: int = 0) -> list[dict]:
    """One Letta step's messages, with the machine's clock at ``wall`` (three formats Letta writes), its memory
    blocks and tool rules in the order given (Letta's database order, which differs between agents), and the
    memory metadata's recall and archival counts (Letta leaves the archival line out at 0)."""
    system = (f"You are MemGPT.\n<memory_blocks>\n{PREAMBLE}{blocks}</memory_blocks>\n\n<tool_usage_rules>\n" + "\n".join(rules)
              + "\n</tool_usage_rules>\n\n<memory_metadata>\n"
              f"- The current system date is: {wall_date}\n"
              f"- Memory blocks were last modified: {wall}\n"
              f"- {recall} previous messages between you and the user are stored in recall memory (use tools to access them)\n"
              + (f"- {archival} total memories you created are stored in archival memory (use tools to access them)\n" if archival else "")
              + "</memory_metadata>")
    search = json.dumps([{"timestamp": wall_iso, "time_ago": "42s ago", "role": "user", "message": "an earlier turn"}])
    return [
        {"role": "system", "content": system},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "boot-1", "type": "function", "function": {
            "name": "send_message", "arguments": json.dumps({"message": "More human than human is our motto."})}}]},
        {"role": "tool", "tool_call_id": "boot-1", "content": json.dumps({"status": "OK", "message": None, "time": wall}, indent=2)},
        {"role": "user", "content": json.dumps({"type": "login", "last_login": "Never (first login)", "time": wall}, indent=2)},
        {"role": "user", "content": TURN_TEXT},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call-2", "type": "function", "function": {
            "name": "conversation_search", "arguments": json.dumps({"query": "Berlin"})}}]},
        {"role": "tool", "tool_call_id": "call-2", "content": [{"type": "text", "text": json.dumps(
            {"status": "OK", "message": search, "time": wall}, indent=2)}]},
    ]


MONDAY = letta_request("2026-12-03 08:51:28 AM UTC+0000", "2026-12-03T08:51:28.123456+00:00", "December 03, 2026")
TUESDAY = letta_request("2026-12-04 05:02:09 PM UTC+0000", "2026-12-04T17:02:09.987654+00:00", "December 04, 2026",
                        blocks=HUMAN + PERSONA, rules=RULES[::-1])
TOOLS = [{"type": "function", "function": {"name": name, "description": "A tool.", "parameters": {
    "type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}}} for name in ("send_message", "core_memory_append")]


def test_two_requests_made_at_different_wall_times_become_the_same_request():
    clock = LettaClock(undated="2000-01-01T00:00:00")
    clock.set("2023-05-08T13:56:00")
    monday, tuesday = clock.rewrite(MONDAY), clock.rewrite(letta_request(
        "2026-12-04 05:02:09 PM UTC+0000", "2026-12-04T17:02:09.987654+00:00", "December 04, 2026"))
    assert monday != MONDAY and monday == tuesday
    text = json.dumps(monday)
    for wall in ("2026", "42s ago"):
        assert wall not in text  # no machine time is left anywhere
    system = monday[0]["content"]
    assert "- The current system date is: May 08, 2023\n" in system
    assert "- Memory blocks were last modified: 2023-05-08 01:56:00 PM UTC+0000\n" in system
    assert json.loads(monday[3]["content"])["time"] == "2023-05-08 01:56:00 PM UTC+0000"
    search = json.loads(json.loads(monday[6]["content"][0]["text"])["message"])
    assert search[0]["timestamp"] == "2023-05-08T13:56:00+00:00" and search[0]["time_ago"] == "0s ago"
    assert monday[4]["content"] == TURN_TEXT  # the turn's own date is the benchmark's and is left alone
    assert MONDAY[0]["content"].count("2026") == 2  # the caller's messages are not modified


def test_blocks_rules_and_tools_of_two_agents_made_alike_come_in_one_order():
    clock = LettaClock(undated="2000-01-01T00:00:00")
    clock.set("2023-05-08T13:56:00")
    canonical = LettaRequests(clock).canonical
    monday = canonical({"messages": MONDAY, "tools": TOOLS})
    tuesday = canonical({"messages": TUESDAY, "tools": TOOLS[::-1]})
    assert monday == tuesday and MONDAY[0]["content"] != TUESDAY[0]["content"]
    system = monday["messages"][0]["content"]
    assert system.index("<human>") < system.index("<persona>") and system.index("conversation_search") < system.index("send_message ends")
    assert [t["function"]["name"] for t in monday["tools"]] == ["core_memory_append", "send_message"]
    assert in_canonical_order(system) == system and system.count("<persona>") == 1 and system.endswith("</memory_metadata>")
    assert system.index(PREAMBLE) < system.index("<human>")  # the opening line stays first
    odd = "<memory_blocks>\nfree text\n</memory_blocks>"
    assert in_canonical_order(odd) == odd  # a shape it was not written for is left alone


def test_the_store_counts_are_dropped_so_each_step_extends_the_previous_prompt():
    """Letta recounts "<n> previous messages ... in recall memory" at every step (here -1, then -4: 0.11.7 counts
    it negative) and "<m> total memories ... in archival memory" at every insert, which changed the system prompt
    and cut the server's prefix cache there. Canonical, the next step's prompt begins with the whole previous one;
    a real change of what the agent holds still shows (an edited block, a first archived memory, a new date)."""
    clock = LettaClock(undated="2000-01-01T00:00:00")
    clock.set("2023-05-08T13:56:00")
    canonical = LettaRequests(clock).canonical
    wall = ("2026-12-03 08:51:28 AM UTC+0000", "2026-12-03T08:51:28.123456+00:00", "December 03, 2026")
    first = letta_request(*wall, recall=-1)
    step = [{"role": "assistant", "content": None, "tool_calls": [{"id": "call-3", "type": "function", "function": {
                "name": "core_memory_append", "arguments": json.dumps({"label": "human", "content": "Lives in Berlin."})}}]},
            {"role": "tool", "tool_call_id": "call-3", "content": json.dumps({"status": "OK", "message": None, "time": wall[0]})}]
    second = letta_request(*wall, recall=-4) + step
    assert first[0]["content"] != second[0]["content"]  # as Letta sends them: the system prompt differs at each step
    one, two = canonical({"messages": first, "tools": TOOLS}), canonical({"messages": second, "tools": TOOLS})
    assert two["messages"][: len(first)] == one["messages"]
    read_one, read_two = (flatten_messages(r["messages"], "Call one tool.") for r in (one, two))  # what the model reads
    assert read_two[: len(read_one)] == read_one and len(read_two) == len(read_one) + 2
    system = one["messages"][0]["content"]
    assert "\n- Previous messages between you and the user are stored in recall memory (use tools to access them)\n" in system
    assert re.search(r"-?\d+ previous messages", system) is None
    for count in (0, 7, 1234):  # any count Letta writes, in any step
        assert canonical({"messages": letta_request(*wall, recall=count)})["messages"][0] == one["messages"][0]
    # what the agent holds still changes the request: an edited memory block, a first archival passage, the session's date
    edited = letta_request(*wall, blocks=PERSONA + HUMAN.replace("<value>\n\n</value>", "<value>\nLives in Berlin.\n</value>"), recall=-7)
    assert "Lives in Berlin." in canonical({"messages": edited})["messages"][0]["content"]
    archived = canonical({"messages": letta_request(*wall, recall=-7, archival=2)})["messages"][0]["content"]
    assert "\n- Memories you created are stored in archival memory (use tools to access them)\n" in archived and archived != system
    assert canonical({"messages": letta_request(*wall, recall=-9, archival=31)})["messages"][0]["content"] == archived
    clock.set("2023-05-25T13:14:00")
    assert canonical({"messages": first})["messages"][0] != one["messages"][0]


def summary_request(boot_id: str, call_id: str) -> list[dict]:
    """Letta's summariser call: the evicted messages written out as JSON lines (Letta's simple_formatter), with
    the tool-call ids of that run."""
    evicted = [{"role": "assistant", "content": None, "tool_calls": [{"id": boot_id, "type": "function", "function": {
                   "name": "send_message", "arguments": "{}"}}]},
               {"role": "tool", "content": "{\"status\": \"OK\"}", "tool_call_id": boot_id},
               {"role": "user", "content": TURN_TEXT},
               {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": {
                   "name": "conversation_search", "arguments": "{}"}}]},
               {"role": "tool", "content": "{\"status\": \"OK\"}", "tool_call_id": call_id}]
    return [{"role": "system", "content": "Summarise the conversation."}, {"role": "assistant", "content": "Understood."},
            {"role": "user", "content": "\n".join(json.dumps(m) for m in evicted)}]


def test_ids_written_in_message_text_are_numbered_so_a_summary_call_replays():
    """The summariser's transcript carries each run's random tool-call ids: numbered by first appearance, two runs
    send the same text and each result still names its call."""
    clock = LettaClock(undated="2000-01-01T00:00:00")
    canonical = LettaRequests(clock).canonical
    one = canonical({"messages": summary_request("ab5429d4-5e0b-4219-b9e8-84727", "call_0123456789abcdef01234567")})
    two = canonical({"messages": summary_request("f00dbeef-1111-2222-3333-44444", "call_fedcba9876543210fedcba98")})
    assert one == two
    lines = [json.loads(line) for line in one["messages"][2]["content"].splitlines()]
    assert lines[0]["tool_calls"][0]["id"] == lines[1]["tool_call_id"] == "call-1"
    assert lines[3]["tool_calls"][0]["id"] == lines[4]["tool_call_id"] == "call-2"
    assert lines[2]["content"] == TURN_TEXT


def test_the_clock_follows_the_session_and_is_fixed_without_one():
    clock = LettaClock(undated="2000-01-01T00:00:00")
    clock.set("2023-05-08T13:56:00")
    first = clock.rewrite(MONDAY)
    clock.set("2023-05-25T13:14:00")
    assert clock.rewrite(MONDAY) != first and "May 25, 2023" in clock.rewrite(MONDAY)[0]["content"]
    for undated in (None, "", "sometime in spring"):
        clock.set(undated)
        assert "January 01, 2000" in clock.rewrite(TUESDAY)[0]["content"]


def test_a_repeated_letta_request_is_answered_from_the_cache(tmp_path):
    """Through the tool-call layer with the real client and cache: the same step asked at another wall time
    makes no second model call, and the model saw the session time, not the machine's."""
    tools_def = [{"type": "function", "function": {"name": "send_message", "description": "Reply.", "parameters": {
        "type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}}}]
    reply = json.dumps({"name": "send_message", "arguments": {"message": "Noted."}})
    with FakeOpenAIServer(script=lambda payload, n: (reply, "stop")) as fake:
        llm = OpenAICompatClient(base_url=fake.url, model=MODEL_ID, cache_path=str(tmp_path / "cache.sqlite"), retry_wait_s=0.01)
        clock = LettaClock(undated="2000-01-01T00:00:00")
        clock.set("2023-05-08T13:56:00")
        server = ToolCallServer(llm, model_name="m", canonical_request=LettaRequests(clock).canonical)
        for messages in (MONDAY, TUESDAY):
            body = server.complete({"model": "m", "messages": messages, "tools": tools_def, "tool_choice": "required"})
            assert body["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "send_message"
        assert fake.calls == 1 and server.stats.model_replies == 1 and server.stats.cache_replies == 1
        sent = json.dumps(fake.requests[0]["messages"])
        assert "2026" not in sent and "May 08, 2023" in sent
        llm.close()


def test_the_adapter_sets_the_clock_to_each_turns_session_time(tmp_path):
    """MemGPTMemory sets the agent's "now" before each message; what Letta sends during it reads that time."""
    from baselines.memgpt import MemGPTMemory
    from tests.fakes import FakeLLM

    seen: list[str] = []

    class Scripted(MemGPTMemory):
        def _create_agent(self, namespace):
            return "agent-1"

        def _passages(self, agent_id):
            return {}

        def _send(self, agent_id, text):  # Letta asks the tool-call layer during the message
            seen.append(flatten_messages(self.tools.canonical_request({"messages": MONDAY})["messages"], None)[0]["content"])
            return {"messages": [], "usage": {"step_count": 1, "prompt_tokens": 10, "completion_tokens": 1}}

    memory = Scripted(FakeLLM(lambda m, s: ""), embedder=None, workdir=str(tmp_path), retry=None)
    memory.reset("conv")
    memory.add("conv", [Turn("D1:1", "Ann", "hi", "2023-05-08T13:56:00"), Turn("D2:1", "Ann", "again", "2023-05-25T13:14:00")])
    assert "May 08, 2023" in seen[0] and "May 25, 2023" in seen[1]
    turns = memory.metrics()["turns_this_invocation"]
    assert [t["turn_index"] for t in turns] == [0, 1] and memory.metrics()["prefix_reuse"]["turns"] == 2


def test_blocks_after_letta_s_opening_line_are_sorted_too():
    """Letta 0.11.7 opens <memory_blocks> with a line of text before the first block; two agents made alike list
    persona and human in either order there (seen with four agents written at once), and the line must stay first."""
    opening = "The following memory blocks are currently engaged in your core memory unit:\n\n"
    one, other = (f"You are MemGPT.\n<memory_blocks>\n{opening}{blocks}</memory_blocks>\n" for blocks in (PERSONA + HUMAN, HUMAN + PERSONA))
    assert in_canonical_order(one) == in_canonical_order(other) == f"You are MemGPT.\n<memory_blocks>\n{opening}{HUMAN}{PERSONA}</memory_blocks>\n"
    tagged = f"<memory_blocks>\n<b>bold</b> text\n{PERSONA}{HUMAN}</memory_blocks>"
    assert in_canonical_order(tagged) == tagged  # an opening that holds markup is not a shape it knows: left alone
