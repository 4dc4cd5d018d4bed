"""The simulated backend answers every request in a valid shape, from the prompt's own text, deterministically."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import jsonschema
import pytest

from core.llm.simulated_server import (
    MODEL_ID, LatencyModel, PromptText, SimulatedLLM, SimulatedServer, embedding_for, reply_for, schema_instance,
)
from core.llm.tool_calls import tool_call_schema

PROMPT = [{"role": "system", "content": "Extract facts."},
          {"role": "user", "content": "Melanie painted a lake at sunrise with Caroline in Boston last Tuesday."}]

JUDGE = {"type": "object", "properties": {"reasoning": {"type": "string"}, "label": {"type": "string", "enum": ["CORRECT", "WRONG"]}},
         "required": ["reasoning", "label"], "additionalProperties": False}
NOTE = {"type": "object", "properties": {"keywords": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                                         "context": {"type": "string", "minLength": 5}, "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["keywords", "context", "tags"]}
DEFS = {
    "$defs": {"Entity": {"type": "object", "properties": {"name": {"type": "string"}, "entity_type_id": {"type": "integer", "minimum": 0}},
                         "required": ["name", "entity_type_id"]},
              "Edge": {"type": "object", "properties": {
                  "fact": {"type": "string"}, "valid_at": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                  "duplicate_idx": {"type": "integer"}, "score": {"type": "number", "exclusiveMinimum": 0.5, "maximum": 1}},
                  "required": ["fact", "valid_at", "duplicate_idx", "score"]}},
    "type": "object",
    "properties": {"entities": {"type": "array", "items": {"$ref": "#/$defs/Entity"}, "minItems": 2},
                   "edges": {"type": "array", "items": {"$ref": "#/$defs/Edge"}},
                   "mode": {"const": "fast"}, "flag": {"type": ["boolean", "null"]},
                   "nested": {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                                        {"properties": {"b": {"type": "integer", "maximum": -3}}, "required": ["b"]}]}},
    "required": ["entities", "edges", "mode", "flag", "nested"],
}
SEND = {"type": "function", "function": {"name": "send_message", "parameters": {
    "type": "object", "properties": {"message": {"type": "string"}, "request_heartbeat": {"type": "boolean"}}, "required": ["message"]}}}
INSERT = {"type": "function", "function": {"name": "archival_memory_insert", "parameters": {
    "type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"]}}}


def _graphiti_schemas() -> list[dict]:
    pytest.importorskip("graphiti_core")
    from graphiti_core.prompts.dedupe_nodes import NodeResolutions
    from graphiti_core.prompts.extract_edges import ExtractedEdges
    from graphiti_core.prompts.extract_nodes import ExtractedEntities, SummarizedEntities

    return [m.model_json_schema() for m in (ExtractedEntities, ExtractedEdges, NodeResolutions, SummarizedEntities)]


@pytest.mark.parametrize("schema", [JUDGE, NOTE, DEFS, tool_call_schema([SEND["function"], INSERT["function"]], allow_text=True, string_max_chars=40)])
def test_schema_instances_validate(schema):
    request = {"messages": PROMPT, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}
    jsonschema.validate(json.loads(reply_for(request)["message"]["content"]), schema)


def test_graphiti_response_models_get_valid_instances():
    for schema in _graphiti_schemas():
        jsonschema.validate(schema_instance(schema, PromptText(PROMPT)), schema)


def test_strings_are_cut_from_the_prompt():
    instance = schema_instance(DEFS, PromptText(PROMPT))
    words = set(PROMPT[1]["content"].replace(".", "").split())
    assert {e["name"] for e in instance["entities"]} <= {"Melanie", "Caroline", "Boston", "Tuesday"}  # names: capitalised words
    assert set(instance["edges"][0]["fact"].split()) <= words
    assert instance["edges"][0]["duplicate_idx"] == -1 and instance["nested"]["b"] == -3


def test_json_object_follows_the_prompts_example():
    messages = [{"role": "system", "content": 'Return JSON:\n{"memory": [{"id": "0", "text": "First extracted memory", "attributed_to": "user"},'
                                             ' {"id": "1", "text": "Second one", "attributed_to": "assistant"}]}\nor {"memory": []}'},
                PROMPT[1]]
    out = json.loads(reply_for({"messages": messages, "response_format": {"type": "json_object"}})["message"]["content"])
    assert len(out["memory"]) == 1 and out["memory"][0]["id"] == "0" and out["memory"][0]["attributed_to"] == "user"
    assert set(out["memory"][0]["text"].split()) <= set(PROMPT[1]["content"].replace(".", "").split())


def test_tool_calls_parse_and_follow_tool_choice():
    auto = reply_for({"messages": PROMPT, "tools": [SEND, INSERT], "tool_choice": "auto"})
    named = reply_for({"messages": PROMPT, "tools": [SEND, INSERT], "tool_choice": {"type": "function", "function": {"name": "archival_memory_insert"}}})
    assert auto["finish_reason"] == "tool_calls" and auto["message"]["tool_calls"][0]["function"]["name"] == "send_message"
    call = named["message"]["tool_calls"][0]
    assert call["function"]["name"] == "archival_memory_insert"
    jsonschema.validate(json.loads(call["function"]["arguments"]), INSERT["function"]["parameters"])
    assert reply_for({"messages": PROMPT, "tools": [SEND], "tool_choice": "none"})["message"]["content"]


def test_replies_are_deterministic_and_do_not_depend_on_other_requests():
    requests = [{"messages": [{"role": "user", "content": f"Turn {i}: Jon met Gina."}],
                 "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": NOTE}}} for i in range(12)]
    with SimulatedServer(LatencyModel(fixed_s=0.0, decode_s_per_token=0.0, max_in_flight=3)) as server:
        def ask(request):
            return httpx.post(server.base_url + "/v1/chat/completions", json=request, timeout=30).json()["choices"][0]["message"]["content"]
        serial = [ask(r) for r in requests]
        with ThreadPoolExecutor(8) as pool:
            concurrent = list(pool.map(ask, reversed(requests)))[::-1]
        assert serial == concurrent and len(set(serial)) > 1
        assert server.stats.peak_in_flight <= 3 and server.stats.chat == 24
        embedded = httpx.post(server.base_url + "/v1/embeddings", json={"input": ["a", "b"], "model": MODEL_ID}).json()["data"]
    assert [len(e["embedding"]) for e in embedded] == [384, 384] and embedded[0]["embedding"] == embedding_for("a")
    assert abs(sum(v * v for v in embedding_for("a")) - 1) < 1e-9


def test_simulated_llm_serves_the_harness_client():
    llm = SimulatedLLM(latency={"fixed_s": 0.0, "decode_s_per_token": 0.0})
    try:
        assert llm.model_id == MODEL_ID
        assert llm.chat_json(PROMPT, JUDGE, purpose="judge")["label"] == "CORRECT"
        assert llm.server.stats.chat == 1
    finally:
        llm.close()
