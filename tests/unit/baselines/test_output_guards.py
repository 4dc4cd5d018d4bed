"""Every system's output guard, as its conf/system/*.yaml sets it, checked with fake LLMs.

The fault in every case is the one seen on the quickstarts: at temperature 0 a small model repeats itself until
``max_tokens`` cuts the reply off. A greedy retry writes the same loop again (llama.cpp ignores the seed at
temperature 0), so each fake loops whenever it is asked greedily and answers well when sampled: a guard passes only
if its retry samples. The caps (max_tokens, maxItems, maxLength) are checked on the request the system sends.
And every system counts failed *turns* in ``AddReport.failures`` (what ``metrics.json`` sums per run).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from core.api import LLMOutputError, Turn
from tests.conftest import REPO
from tests.fake_openai_server import FakeOpenAIServer
from tests.fakes import FakeLLM, served_llm_stub

CONF = REPO / "conf" / "system"


def _system_conf(name: str) -> dict[str, Any]:
    conf = OmegaConf.to_container(OmegaConf.load(CONF / f"{name}.yaml"), resolve=False)
    assert isinstance(conf, dict)
    return {k: v for k, v in conf.items() if not k.startswith("_")}


def _array_caps(schema: Any) -> list[Any]:
    """maxItems of every array in a JSON schema (None where an array has none)."""
    if isinstance(schema, dict):
        own = [schema.get("maxItems")] if schema.get("type") == "array" else []
        return own + [cap for value in schema.values() for cap in _array_caps(value)]
    if isinstance(schema, list):
        return [cap for value in schema for cap in _array_caps(value)]
    return []


@pytest.mark.parametrize("name", ["mosaic", "mem0", "amem", "zep", "memgpt"])
def test_every_system_retries_by_sampling_with_a_fixed_seed(name: str):
    """The retry block is in every system's conf and its retries sample (a greedy retry cannot help)."""
    retry = _system_conf(name)["retry"]
    assert retry["attempts"] >= 2 and 0 < retry["temperature"] <= 0.5 and isinstance(retry["seed"], int)


# ------------------------------------------------------------------------- MOSAIC
def test_mosaic_extraction_loop_is_rescued_by_the_sampled_retry(tmp_path: Path):
    from hydra.utils import instantiate

    from tests.unit.mosaic.test_graph import BowEmbedder

    def extract(messages, schema):
        request = llm.requests[-1]
        if request["purpose"] == "extraction" and request["temperature"] == 0:
            raise LLMOutputError("generation cut off at max_tokens=320 (finish_reason length)")
        return {"facts": []} if request["purpose"] == "extraction" else {}

    llm = FakeLLM(extract)
    conf = OmegaConf.load(CONF / "mosaic.yaml")
    conf.retrieval.seed = conf.communities.seed = 0
    memory = instantiate(conf, llm=llm, embedder=BowEmbedder(), workdir=str(tmp_path))
    report = memory.add("ns", [Turn("D1:1", "Caroline", "I moved to Berlin last May.")], session_time="2023-05-08T13:56:00")
    tries = [(r["temperature"], r["seed"]) for r in llm.requests if r["purpose"] == "extraction"]
    assert tries == [(0.0, 0), (conf.retry.temperature, conf.retry.seed)] and report.failures == 0
    assert llm.requests[0]["schema"]["properties"]["facts"]["maxItems"] == conf.extract.max_entities
    assert llm.requests[0]["max_tokens"] == conf.extract.max_tokens


def test_mosaic_counts_a_turn_whose_extraction_failed_once(tmp_path: Path):
    from hydra.utils import instantiate

    from tests.unit.mosaic.test_graph import BowEmbedder

    def broken(messages, schema):  # every try loops: the turn is lost, and counted once
        raise LLMOutputError("generation cut off at max_tokens=320 (finish_reason length)")

    llm = FakeLLM(broken)
    conf = OmegaConf.load(CONF / "mosaic.yaml")
    conf.retrieval.seed = conf.communities.seed = 0
    memory = instantiate(conf, llm=llm, embedder=BowEmbedder(), workdir=str(tmp_path))
    turns = [Turn("D1:1", "Caroline", "I moved to Berlin."), Turn("D1:2", "Melanie", "Nice!")]
    report = memory.add("ns", turns, session_time="2023-05-08T13:56:00")
    assert report.failures == 2 and len([r for r in llm.requests if r["purpose"] == "extraction"]) == 2 * conf.retry.attempts


# ------------------------------------------------------------------------- the library tap: Mem0 and A-Mem
def _loops_when_greedy(good: str, loop: str):
    def script(payload: dict, n: int) -> tuple[str, str]:
        return (loop, "length") if payload["temperature"] == 0 else (good, "stop")

    return script


def test_mem0_extraction_loop_is_rescued_and_its_json_object_request_is_left_uncapped(tmp_path: Path):
    """Mem0 asks for json_object (no schema to cap): its guard is its max_tokens and the sampled retry."""
    import openai

    from baselines.mem0 import Mem0Memory

    good = '{"memory": [{"text": "Caroline moved to Berlin"}]}'
    loop = '{"memory": [{"text": "Caroline moved"}, {"text": "Caroline moved"}, {"text": "Caroline'
    conf = _system_conf("mem0")
    with FakeOpenAIServer(script=_loops_when_greedy(good, loop)) as server:
        memory = Mem0Memory(llm=served_llm_stub(), embedder=object(), workdir=str(tmp_path), **conf)
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)
        memory.tap.install(client)
        request = {"model": "m", "messages": [{"role": "user", "content": "extract"}], "max_tokens": conf["max_tokens"],
                   "response_format": {"type": "json_object"}}  # what mem0's vllm client sends
        reply = client.chat.completions.create(**request)
    assert reply.choices[0].message.content == good and memory.tap.last_text == good
    first, retry = server.requests
    assert (first["temperature"], first["seed"]) == (0.0, 0)
    assert (retry["temperature"], retry["seed"]) == (conf["retry"]["temperature"], conf["retry"]["seed"])
    assert first["response_format"] == {"type": "json_object"} and first["max_tokens"] == conf["max_tokens"]
    assert memory.metrics()["output_guard"] == {"invalid_responses": 1, "retries": 1, "rescued_by_retry": 1, "list_cap_hits": 0}


def test_mem0_counts_the_turns_of_a_failed_add_once(tmp_path: Path):
    """A Mem0 add is one batch of turns for one speaker; a failed add loses that batch's turns: counted as turns."""
    from baselines.mem0 import Mem0Memory
    from tests.unit.baselines.test_mem0_mapping import _ScriptedMem0

    class OneBadAdd(_ScriptedMem0):
        def add(self, messages, *, user_id, metadata):
            out = super().add(messages, user_id=user_id, metadata=metadata)
            if self.n == 2:  # the first batch, second speaker: an output the adapter cannot map
                out["results"][0]["event"] = "GARBLED"
            return out

    memory = Mem0Memory(llm=served_llm_stub(), embedder=object(), workdir=str(tmp_path), batch_turns=2, custom_instructions=None, retry=None, assistant_speakers=["assistant"])
    bad = OneBadAdd()
    memory._new_memory = lambda store_dir: bad
    turns = [Turn(f"D1:{i}", "Caroline" if i % 2 else "Melanie", f"text {i}") for i in range(1, 4)]
    report = memory.add("conv-0", turns, session_time="2023-05-08T13:56:00")
    assert report.failures == 2 and memory.metrics()["failed_adds"] == 1


def test_amem_analysis_loop_is_rescued_with_lists_and_tokens_capped(tmp_path: Path):
    """A-Mem's real analysis call (its own prompt and json_schema) through the adapter's tap."""
    pytest.importorskip("agentic_memory")
    from baselines.amem import AMemMemory

    good = '{"keywords": ["berlin", "move", "city"], "context": "A move to Berlin.", "tags": ["life", "travel", "place"]}'
    loop = '{"keywords": ["berlin", "berlin", "berlin", "berlin'
    conf = _system_conf("amem")
    with FakeOpenAIServer(script=_loops_when_greedy(good, loop)) as server:
        stub = served_llm_stub()
        stub.api_base = server.url + "/v1"
        memory = AMemMemory(llm=stub, embedder=object(), workdir=str(tmp_path), **conf)
        analysis = memory._space("ns").system.analyze_content("Speaker Caroline says : I moved to Berlin.")
    assert analysis["keywords"] == ["berlin", "move", "city"]
    first, retry = server.requests
    assert (first["temperature"], first["seed"], first["max_tokens"]) == (0.0, 0, conf["max_tokens"])
    assert (retry["temperature"], retry["seed"]) == (conf["retry"]["temperature"], conf["retry"]["seed"])
    caps = _array_caps(first["response_format"]["json_schema"]["schema"])
    assert caps and set(caps) == {conf["max_items"]}
    assert memory.metrics()["output_guard"]["rescued_by_retry"] == 1


# ------------------------------------------------------------------------- MemGPT: the tool-call layer
def test_memgpt_tool_call_loop_is_rescued_with_strings_and_tokens_capped(tmp_path: Path):
    from baselines.memgpt import MemGPTMemory

    def step(messages, schema):
        request = llm.requests[-1]
        if request["temperature"] == 0:
            raise LLMOutputError("generation cut off at max_tokens=512 (finish_reason length)")
        return {"name": "send_message", "arguments": {"message": "Noted."}}

    llm = FakeLLM(step)
    conf = _system_conf("memgpt")
    memory = MemGPTMemory(llm=llm, embedder=None, workdir=str(tmp_path), **conf)
    tools = [{"type": "function", "function": {"name": "send_message", "parameters": {
        "type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}}}]
    body = memory.tools.complete({"messages": [{"role": "user", "content": "hi"}], "tools": tools, "tool_choice": "required",
                                  "max_tokens": 4096})
    assert json.loads(body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]) == {"message": "Noted."}
    assert [(r["temperature"], r["seed"]) for r in llm.requests] == [(0.0, 0), (conf["retry"]["temperature"], conf["retry"]["seed"])]
    assert llm.requests[0]["max_tokens"] == conf["max_tokens"]
    assert llm.requests[0]["schema"]["properties"]["arguments"]["properties"]["message"]["maxLength"] == conf["tool_string_max_chars"]
    assert memory.metrics()["output_guard"]["retry_attempts"] == conf["retry"]["attempts"]
