"""The tool-call layer (core.llm.tool_calls) with a scripted backend: schema, prompt, parsing, HTTP."""

from __future__ import annotations

import json
import time

import jsonschema
import numpy as np
import pytest

from core.api import LLMOutputError
from core.llm.tool_calls import (
    TEXT_REPLY,
    ToolCallServer,
    cap_strings,
    flatten_messages,
    parse_tool_call,
    tool_call_schema,
)
from tests.fakes import FakeLLM

TOOLS = [
    {"type": "function", "function": {"name": "send_message", "description": "Reply to the user.", "parameters": {
        "type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}}},
    {"type": "function", "function": {"name": "archival_memory_insert", "description": "Store a passage.", "parameters": {
        "type": "object", "properties": {"content": {"type": "string"}, "request_heartbeat": {"type": "boolean"}},
        "required": ["content", "request_heartbeat"]}}},
]
MESSAGES = [{"role": "system", "content": "You are MemGPT."}, {"role": "user", "content": "I moved to Berlin."}]


class FakeEmbedder:
    dim = 4
    model_id = "fake-minilm"

    def encode(self, texts):
        return np.array([[len(t), 1.0, 0.0, 0.5] for t in texts], dtype=np.float32)


def test_schema_accepts_exactly_calls_of_listed_tools():
    schema = tool_call_schema(TOOLS, allow_text=False)
    jsonschema.validate({"name": "send_message", "arguments": {"message": "hi"}}, schema)
    jsonschema.validate({"name": "archival_memory_insert", "arguments": {"content": "x", "request_heartbeat": True}}, schema)
    for bad in ({"name": "rm_rf", "arguments": {}}, {"name": "send_message", "arguments": {}},
                {"name": "send_message"}, {"name": TEXT_REPLY, "arguments": {"text": "hi"}}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    jsonschema.validate({"name": TEXT_REPLY, "arguments": {"text": "hi"}}, tool_call_schema(TOOLS, allow_text=True))


def test_string_cap_reaches_every_string_and_keeps_a_tighter_one():
    nested = {"type": "object", "properties": {
        "note": {"type": "string"}, "code": {"type": "string", "maxLength": 5}, "maybe": {"type": ["string", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}}, "n": {"type": "integer"},
        "either": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {"deep": {"type": "string"}}}]}}}
    capped = cap_strings(nested, 8)
    props = capped["properties"]
    assert [props[k]["maxLength"] for k in ("note", "code", "maybe")] == [8, 5, 8]
    assert props["tags"]["items"]["maxLength"] == 8 and "maxLength" not in props["n"]
    assert props["either"]["anyOf"][0]["maxLength"] == 8
    assert props["either"]["anyOf"][1]["properties"]["deep"]["maxLength"] == 8
    assert "maxLength" not in nested["properties"]["note"]  # the tool's own schema is not modified
    assert cap_strings(nested, None) is nested


def test_capped_schema_refuses_overlong_arguments_and_text():
    schema = tool_call_schema(TOOLS, allow_text=True, string_max_chars=10)
    jsonschema.validate({"name": "send_message", "arguments": {"message": "x" * 10}}, schema)
    for too_long in ({"name": "send_message", "arguments": {"message": "x" * 11}},
                     {"name": TEXT_REPLY, "arguments": {"text": "y" * 11}}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(too_long, schema)
    llm = FakeLLM(lambda m, s: {"name": "send_message", "arguments": {"message": "ok"}})
    ToolCallServer(llm, model_name="m", string_max_chars=10).complete({"messages": MESSAGES, "tools": TOOLS})
    assert llm.requests[0]["schema"] == tool_call_schema(TOOLS, allow_text=True, string_max_chars=10)


def test_flatten_turns_tool_history_into_plain_messages_and_adds_instruction():
    history = MESSAGES + [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "archival_memory_insert", "arguments": json.dumps({"content": "Berlin", "request_heartbeat": True})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "OK"},
    ]
    flat = flatten_messages(history, "TOOLS HERE")
    assert [m["role"] for m in flat] == ["system", "user", "assistant", "user"]
    assert flat[0]["content"].endswith("TOOLS HERE")
    assert json.loads(flat[2]["content"]) == {"name": "archival_memory_insert", "arguments": {"content": "Berlin", "request_heartbeat": True}}
    assert flat[3]["content"] == "[result of tool archival_memory_insert]\nOK"
    assert all(isinstance(m["content"], str) for m in flat)


def test_parse_rejects_unknown_tool_and_schema_breaking_arguments():
    assert parse_tool_call('{"name": "send_message", "arguments": {"message": "hi"}}', TOOLS, False) == ("send_message", {"message": "hi"})
    with pytest.raises(LLMOutputError, match="unknown tool"):
        parse_tool_call('{"name": "nope", "arguments": {}}', TOOLS, False)
    with pytest.raises(LLMOutputError, match="break its schema"):
        parse_tool_call('{"name": "archival_memory_insert", "arguments": {"content": 3, "request_heartbeat": true}}', TOOLS, False)
    with pytest.raises(LLMOutputError, match="not JSON"):
        parse_tool_call("```json\n{}", TOOLS, False)


def test_tool_request_becomes_one_constrained_call_returned_as_tool_calls():
    llm = FakeLLM(lambda messages, schema: {"name": "archival_memory_insert", "arguments": {"content": "Lives in Berlin", "request_heartbeat": True}})
    server = ToolCallServer(llm, model_name="m")
    body = server.complete({"messages": MESSAGES, "tools": TOOLS, "tool_choice": "required", "max_tokens": 64})
    call = body["choices"][0]["message"]["tool_calls"][0]
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert call["function"]["name"] == "archival_memory_insert"
    assert json.loads(call["function"]["arguments"]) == {"content": "Lives in Berlin", "request_heartbeat": True}
    assert body["usage"] == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    sent = llm.requests[0]
    assert sent["schema"] == tool_call_schema(TOOLS, allow_text=False)  # "required": no text option
    assert "- archival_memory_insert(content: string, request_heartbeat: boolean): Store a passage." in sent["messages"][0]["content"]
    assert server.stats.well_formed_first_try == 1 and server.stats.by_tool == {"archival_memory_insert": 1}


def test_bad_reply_is_retried_then_reported_as_error():
    replies = iter(['{"name": "nope", "arguments": {}}', '{"name": "send_message", "arguments": {"message": "ok"}}'])
    server = ToolCallServer(FakeLLM(lambda m, s: next(replies)), model_name="m")
    body = server.complete({"messages": MESSAGES, "tools": TOOLS})
    assert body["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "send_message"
    assert server.stats.well_formed_after_retry == 1

    server = ToolCallServer(FakeLLM(lambda m, s: "not json"), model_name="m", attempts=2)
    with pytest.raises(LLMOutputError):
        server.complete({"messages": MESSAGES, "tools": TOOLS})
    assert server.stats.malformed == 1 and server.stats.tool_requests == 1


def test_reply_cut_off_by_the_client_is_retried_with_the_next_seed():
    """A greedy reply that loops to max_tokens comes back the same at temperature 0 whatever the seed (and,
    remembered as a fault, fails at once): the layer asks once more as the system's RetryPolicy says, at a small
    temperature with a fixed seed, instead of failing the agent's step."""
    from core.llm import RetryPolicy

    tries: list[tuple[float, int]] = []

    def reply(request):
        tries.append((request["temperature"], request["seed"]))
        if request["temperature"] == 0:  # greedy: loops whatever the seed
            raise LLMOutputError("generation cut off at max_tokens=512 (finish_reason length)")
        return '{"name": "send_message", "arguments": {"message": "ok"}}'

    llm = FakeLLM(lambda m, s: reply(llm.requests[-1]))
    server = ToolCallServer(llm, model_name="m", retry=RetryPolicy(attempts=2, temperature=0.3, seed=11))
    body = server.complete({"messages": MESSAGES, "tools": TOOLS, "seed": 7})
    assert body["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "send_message"
    assert tries == [(0.0, 7), (0.3, 11)] and server.stats.well_formed_after_retry == 1

    tries.clear()  # without a policy the old schedule (greedy, another seed) loops again: the retry cannot help
    with pytest.raises(LLMOutputError):
        ToolCallServer(llm, model_name="m", attempts=2).complete({"messages": MESSAGES, "tools": TOOLS, "seed": 7})
    assert tries == [(0.0, 7), (0.0, 1)]

    def always_cut(m, s):
        raise LLMOutputError("generation cut off at max_tokens=512 (finish_reason length)")

    server = ToolCallServer(FakeLLM(always_cut), model_name="m", attempts=2)
    with pytest.raises(LLMOutputError, match="cut off"):
        server.complete({"messages": MESSAGES, "tools": TOOLS})
    assert server.stats.malformed == 1 and server.stats.tool_requests == 1


def test_auto_choice_may_answer_in_text_and_forced_choice_narrows_tools():
    server = ToolCallServer(FakeLLM(lambda m, s: {"name": TEXT_REPLY, "arguments": {"text": "hello"}}), model_name="m")
    body = server.complete({"messages": MESSAGES, "tools": TOOLS, "tool_choice": "auto"})
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "hello"}
    llm = FakeLLM(lambda m, s: {"name": "send_message", "arguments": {"message": "x"}})
    ToolCallServer(llm, model_name="m").complete(
        {"messages": MESSAGES, "tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "send_message"}}})
    assert llm.requests[0]["schema"]["properties"]["name"] == {"const": "send_message"}


def test_plain_request_passes_through_without_schema():
    llm = FakeLLM(lambda m, s: "just text")
    body = ToolCallServer(llm, model_name="m").complete({"messages": MESSAGES, "max_tokens": 5})
    assert body["choices"][0]["message"]["content"] == "just text" and llm.requests[0]["schema"] is None


def test_over_http_with_the_openai_client():
    import openai

    llm = FakeLLM(lambda m, s: {"name": "send_message", "arguments": {"message": "hi there"}})
    with ToolCallServer(llm, embedder=FakeEmbedder(), model_name="m") as server:
        client = openai.OpenAI(base_url=server.api_base, api_key="none")
        reply = client.chat.completions.create(model="m", messages=MESSAGES, tools=TOOLS, tool_choice="required")
        call = reply.choices[0].message.tool_calls[0]
        assert call.function.name == "send_message" and json.loads(call.function.arguments) == {"message": "hi there"}
        assert reply.usage.prompt_tokens == 10
        # the openai client asks for base64 by default and decodes it
        vectors = client.embeddings.create(model="fake-minilm", input=["ab", "abcd"])
        assert [d.embedding for d in vectors.data] == [[2.0, 1.0, 0.0, 0.5], [4.0, 1.0, 0.0, 0.5]]
        floats = client.embeddings.create(model="fake-minilm", input="abc", encoding_format="float")
        assert floats.data[0].embedding == [3.0, 1.0, 0.0, 0.5]
        assert [m.id for m in client.models.list().data] == ["m", "fake-minilm"]
    assert server._server is None


def test_an_identical_request_in_flight_is_waited_for_not_run_again():
    import threading

    release = threading.Event()

    def slow(messages, schema):
        release.wait(5)
        return {"name": "send_message", "arguments": {"message": "once"}}

    llm = FakeLLM(slow)
    server = ToolCallServer(llm, model_name="m")
    request = {"messages": MESSAGES, "tools": TOOLS}
    bodies = []
    threads = [threading.Thread(target=lambda: bodies.append(server.complete(dict(request)))) for _ in range(2)]
    threads[0].start()
    while not server._in_flight:  # the first request is running (blocked in the backend)
        time.sleep(0.01)
    threads[1].start()
    time.sleep(0.5)  # the retry arrives while the first is still running
    release.set()
    for t in threads:
        t.join(5)
    assert len(llm.requests) == 1 and len(bodies) == 2 and bodies[0] is bodies[1]
    assert server._in_flight == {}
