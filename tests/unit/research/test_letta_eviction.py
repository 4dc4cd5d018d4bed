"""research.letta_eviction's scripted model and its per-turn accounting (no Letta, no model)."""

from __future__ import annotations

import json

from research.letta_eviction import analyse, latest_turn, scripted_reply, tool_options


def _packed(text: str) -> dict:
    return {"role": "user", "content": json.dumps({"type": "user_message", "message": text, "time": "2023-05-08 01:56:00 PM UTC+0000"})}


def _tool_request(*messages: dict) -> dict:
    options = [{"type": "object", "properties": {"name": {"const": name}, "arguments": {"type": "object"}}} for name in ("send_message", "core_memory_append")]
    return {"messages": list(messages), "response_format": {"type": "json_schema", "json_schema": {"schema": {"anyOf": options}}}}


def test_a_step_sends_one_message_about_the_latest_turn():
    request = _tool_request({"role": "system", "content": "You are MemGPT. [note] x: y"}, _packed('[1:56 pm on 8 May, 2023] Ann: I moved to "Oslo".'),
                            {"role": "assistant", "content": "ok"}, _packed("[2:00 pm on 8 May, 2023] Bo: Nice, when?"))
    assert tool_options(request) == ["send_message", "core_memory_append"]
    assert latest_turn(request["messages"]) == ("Bo", "Nice, when?")
    kind, content = scripted_reply(request)
    call = json.loads(content)
    assert kind == "step" and call["name"] == "send_message" and "Nice, when?" in call["arguments"]["thinking"]


def test_letta_summary_request_gets_a_summary_within_its_word_limit():
    transcript = "\n".join(f'user: {{"type": "user_message", "message": "[1:{i:02d} pm on 8 May, 2023] Ann: {"word " * 30}"}}' for i in range(20))
    kind, content = scripted_reply({"messages": [{"role": "system", "content": "Your job is to summarize a history of previous messages in a"},
                                                 {"role": "user", "content": transcript}]})
    assert kind == "summary" and content.startswith("I talked with the user. Ann: word") and len(content.split()) <= 100


def test_requests_are_mapped_to_turns_by_their_call_counts(tmp_path):
    (tmp_path / "system").mkdir()
    # Letta's usage report counts the steps only (calls 1); the tool-call layer's count has the summary too
    turns = [{"turn_id": f"D1:{i}", "usage": {"calls": 1}, "model_replies": replies, "cache_replies": 0, "prompt_messages": 3, "seconds": 1.0}
             for i, replies in enumerate([1, 2, 1], start=1)]
    (tmp_path / "system" / "turn_costs.jsonl").write_text("".join(json.dumps(t) + "\n" for t in turns))
    requests = [{"kind": "step", "prompt_tokens": 7000, "completion_tokens": 100, "messages": 80},
                {"kind": "step", "prompt_tokens": 8200, "completion_tokens": 90, "messages": 83},
                {"kind": "summary", "prompt_tokens": 3000, "completion_tokens": 80, "messages": 3},
                {"kind": "step", "prompt_tokens": 5000, "completion_tokens": 70, "messages": 30},
                {"kind": "other", "prompt_tokens": 400, "completion_tokens": 10, "messages": 2}]
    result = analyse(tmp_path, requests, context_window=8192)
    assert result["eviction_turns"] == [2] and result["requests_mapped"] == 4 and result["summary_requests"] == 1
    assert result["evictions"][0]["total_tokens"] == 8290 and result["evictions"][0]["messages_next_turn"] == 30
    assert result["evictions"][0]["summary_prompt_tokens"] == 3000 and result["per_turn"][2]["prompt_tokens"] == 5000
