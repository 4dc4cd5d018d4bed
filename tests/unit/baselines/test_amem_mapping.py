"""A-Mem adapter: evolution -> AddReport mapping and the adapter's wiring, on hand-made library behaviour."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from baselines.amem import (
    AMemMemory,
    NeighbourUpdate,
    _Space,
    _temporary_env,
    evolution_to_events,
    note_content,
    note_id_for,
)
from core.api import MemorySystem, Turn
from tests.fakes import served_llm_stub

# the output guard has no defaults (conf/system/amem.yaml decides): the old code defaults, which these tests were written for
NO_GUARD = {"max_tokens": 1024, "retry": None, "max_items": None}


def _update(memory_id: str, changes: dict[str, Any]) -> NeighbourUpdate:
    return NeighbourUpdate(memory_id, f"content of {memory_id}", "Living in Paris", ["home", "city"], changes, [f"T-{memory_id}"])


def test_only_real_rewrites_of_held_notes_become_update_events():
    updates = [
        _update("same", {"context": "Living in Paris", "tags": ["home", "city"]}),  # rewritten with equal values
        _update("ctx", {"context": "Moved from Paris to Berlin", "tags": ["home", "city"]}),
        _update("tags", {"context": "Living in Paris", "tags": ["home", "relocation"]}),
    ]
    events = evolution_to_events("Speaker user says : I moved to Berlin", ["P:2"], updates)
    assert [e.old_memory_id for e in events] == ["ctx", "tags"]
    assert all(e.verdict == "update" and e.new_source_turn_ids == ["P:2"] for e in events)
    assert events[0].old_text == "content of ctx" and events[0].old_source_turn_ids == ["T-ctx"]
    assert "context" in events[0].reason and "tags" in events[1].reason
    assert all("evolution" in e.reason for e in events)


def test_note_content_follows_amem_locomo_script():
    assert note_content(Turn("D1:1", "Caroline", "Hi")) == "Speaker Caroline says : Hi"


def test_temporary_env_restores_previous_values():
    os.environ["MOSAIC_T_A"] = "old"
    os.environ.pop("MOSAIC_T_B", None)
    with _temporary_env({"MOSAIC_T_A": "new", "MOSAIC_T_B": "set"}):
        assert os.environ["MOSAIC_T_A"] == "new" and os.environ["MOSAIC_T_B"] == "set"
    assert os.environ["MOSAIC_T_A"] == "old" and "MOSAIC_T_B" not in os.environ
    del os.environ["MOSAIC_T_A"]


class _ScriptedAMem:
    """Stands in for AgenticMemorySystem: each add_note 'evolves' the previous note like A-Mem does."""

    def __init__(self) -> None:
        self.notes: dict[str, SimpleNamespace] = {}
        self.cache = SimpleNamespace(clear=lambda: None)
        self.retriever = SimpleNamespace(count=lambda: len(self.notes))

    def read(self, memory_id):
        return self.notes.get(memory_id)

    def update(self, memory_id, **changes):
        for key, value in changes.items():
            setattr(self.notes[memory_id], key, value)
        return True

    def analyze_content(self, content):
        return {"keywords": [], "context": "ctx", "tags": ["t"]}

    def add_note(self, content, time=None, id=None):
        self.analyze_content(content)
        previous = list(self.notes)
        note_id = id or f"n{len(self.notes) + 1}"
        if previous:
            self.process_memory(previous[-1])
        self.notes[note_id] = SimpleNamespace(content=content, context="ctx", tags=["t"], timestamp=time)
        return note_id

    def process_memory(self, neighbour_id):  # mimics evolution: rewrites the neighbour's context
        self.update(neighbour_id, context=f"evolved by note {len(self.notes) + 1}", tags=["t"])

    def search(self, query, k):
        return [{"id": i, "score": 0.5 * n} for n, i in enumerate(list(self.notes)[:k])]


def test_adapter_reports_stored_notes_and_evolution_of_existing_notes(tmp_path: Path):
    adapter = AMemMemory(llm=served_llm_stub(), embedder=object(), workdir=str(tmp_path), **NO_GUARD)
    assert isinstance(adapter, MemorySystem)
    fake = _ScriptedAMem()
    space = _Space(fake, tmp_path, {})
    adapter._instrument(space)
    adapter._spaces["conv"] = space

    turns = [Turn("D1:1", "Caroline", "I live in Paris"), Turn("D1:2", "Caroline", "I moved to Berlin")]
    report = adapter.add("conv", turns, session_time="2023-05-08T13:56:00")
    n1, n2 = note_id_for("conv", turns[0], 0), note_id_for("conv", turns[1], 1)

    assert [(s.memory_id, s.source_turn_ids) for s in report.stored] == [(n1, ["D1:1"]), (n2, ["D1:2"])]
    assert len(report.updated) == 1
    event = report.updated[0]
    assert (event.old_memory_id, event.old_text, event.old_source_turn_ids) == (n1, "Speaker Caroline says : I live in Paris", ["D1:1"])
    assert event.new_source_turn_ids == ["D1:2"]
    assert fake.notes[n1].timestamp == "2023-05-08T13:56:00"

    hits = adapter.search("conv", "where", 2)
    assert [(h.memory_id, h.text, h.source_turn_ids) for h in hits] == [
        (n1, "Speaker Caroline says : I live in Paris", ["D1:1"]),
        (n2, "Speaker Caroline says : I moved to Berlin", ["D1:2"]),
    ]
    assert hits[0].score == 1.0 and hits[1].score == 1.0 / 1.5  # distance -> higher-is-better
    assert json.loads((tmp_path / "turn_ids.json").read_text()) == {n1: ["D1:1"], n2: ["D1:2"]}


def test_note_ids_are_reproducible_uuids_unique_per_namespace_turn_and_position():
    turn = Turn("D1:1", "Caroline", "hi")
    first = note_id_for("conv-0", turn, 0)
    assert first == note_id_for("conv-0", turn, 0)
    assert str(uuid.UUID(first)) == first  # still looks like the uuid A-Mem would show the LLM
    assert len({first, note_id_for("conv-1", turn, 0), note_id_for("conv-0", turn, 1),
                note_id_for("conv-0", Turn("D1:2", "Caroline", "hi"), 0)}) == 4  # fmt: skip


def test_snapshot_and_restore_bring_back_the_notes_on_real_chromadb(tmp_path: Path):
    """Real AgenticMemorySystem and ChromaDB, notes written without the LLM (add_document)."""
    llm = served_llm_stub()
    adapter = AMemMemory(llm=llm, embedder=object(), workdir=str(tmp_path), **NO_GUARD)
    space = adapter._space("ns")
    retriever = space.system.retriever
    for n, text in enumerate(["Caroline lives in Paris.", "Melanie paints on Sundays."]):
        retriever.add_document(text, {"id": f"a{n}", "content": text, "context": "General", "tags": ["t"]}, f"a{n}")
        space.turn_ids[f"a{n}"] = [f"D1:{n}"]
    state = adapter.snapshot("ns")
    before = sorted((i.memory_id, i.text, tuple(i.source_turn_ids)) for i in adapter.stored_items("ns"))

    retriever.add_document("Caroline moved to Berlin.", {"id": "b", "content": "Caroline moved to Berlin."}, "b")
    space.turn_ids["b"] = ["D2:1"]
    adapter.restore("ns", state)

    assert sorted((i.memory_id, i.text, tuple(i.source_turn_ids)) for i in adapter.stored_items("ns")) == before
    assert adapter.search("ns", "Where does Caroline live?", 1)[0].memory_id == "a0"  # stored embeddings searchable
    assert json.loads((space.path / "turn_ids.json").read_text()) == {"a0": ["D1:0"], "a1": ["D1:1"]}


def _openai_client(sent: list[dict[str, Any]], content: str, prompt_tokens: int, completion_tokens: int) -> Any:
    """A stand-in for an ``openai.OpenAI`` client: records each request, answers ``content``."""
    from openai.types.chat import ChatCompletion

    def create(**request):
        sent.append(dict(request))
        return ChatCompletion.model_validate({
            "id": "c1", "object": "chat.completion", "created": 0, "model": request["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        })  # fmt: skip

    return SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=create)))


def test_library_tap_meters_caches_and_fixes_sampling(tmp_path: Path):
    """The wrapper both adapters put on the library's OpenAI client (core/llm/library_tap.py)."""
    from core.llm.library_tap import LibraryLLMTap
    from core.llm import ResponseCache, UsageMeter

    sent: list[dict[str, Any]] = []
    client = _openai_client(sent, '{"a": 1}', prompt_tokens=120, completion_tokens=7)
    harness = served_llm_stub(cache=ResponseCache(tmp_path / "cache.sqlite"))
    tap = LibraryLLMTap("a-mem", harness, purpose="amem.analyze", temperature=0.0, max_tokens=64)
    tap.install(client)
    tap.install(client)  # idempotent: no double wrapping

    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 1.0}
    first = client.chat.completions.create(**request)
    tap.purpose = "amem.evolution"
    second = client.chat.completions.create(**request)

    assert len(sent) == 1  # the repeat came from the response cache
    assert sent[0]["temperature"] == 0.0 and sent[0]["seed"] == 0 and sent[0]["max_tokens"] == 64
    assert first.choices[0].message.content == second.choices[0].message.content == '{"a": 1}'
    usage = tap.usage
    assert (usage.calls, usage.cached_calls, usage.prompt_tokens, usage.completion_tokens) == (2, 1, 240, 14)
    assert usage.by_purpose["amem.analyze"]["calls"] == 1 and usage.by_purpose["amem.evolution"]["calls"] == 1
    assert harness.meter.snapshot().calls == 2  # the run's totals include the library's calls
    assert tap.last_text == '{"a": 1}'


def test_library_tap_sends_its_timeout_outside_the_cache_key(tmp_path: Path):
    from core.llm.library_tap import LibraryLLMTap
    from core.llm import ResponseCache, UsageMeter

    sent: list[dict[str, Any]] = []
    cache = ResponseCache(tmp_path / "cache.sqlite")
    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    for timeout in (1800.0, 60.0):
        client = _openai_client(sent, "ok", prompt_tokens=3, completion_tokens=1)
        tap = LibraryLLMTap("mem0", served_llm_stub(cache=cache), purpose="p", timeout_s=timeout)
        tap.install(client)
        client.chat.completions.create(**request)
    assert [r["timeout"] for r in sent] == [1800.0]  # second tap: same request, answered from the cache


def test_library_tap_replays_a_greedy_cut_off_output_but_asks_again_otherwise(tmp_path: Path):
    """A structured output cut off at max_tokens at temperature 0 is cached (the server would write it again),
    so a resumed run replays the library's failure instead of repaying it; at temperature 1 it is asked again."""
    from openai.types.chat import ChatCompletion

    from core.llm import ResponseCache
    from core.llm.library_tap import LibraryLLMTap

    def client(sent: list[dict[str, Any]]) -> Any:
        def create(**request):
            sent.append(dict(request))
            return ChatCompletion.model_validate({
                "id": "c1", "object": "chat.completion", "created": 0, "model": request["model"],
                "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": '{"edges": [{"a": "b"}, {"a": "b"'}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 2048, "total_tokens": 2058},
            })  # fmt: skip

        return SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=create)))

    request = {"model": "m", "messages": [{"role": "user", "content": "extract"}], "response_format": {"type": "json_object"}}
    for temperature, expected_sends in ((0.0, 1), (1.0, 2)):
        sent: list[dict[str, Any]] = []
        cache = ResponseCache(tmp_path / f"cache_{temperature}.sqlite")
        for _ in range(2):  # the second tap stands for a resumed run with the same cache
            tap = LibraryLLMTap("graphiti", served_llm_stub(cache=cache), purpose="zep.extract_edges", temperature=temperature)
            the_client = client(sent)
            tap.install(the_client)
            response = the_client.chat.completions.create(**dict(request))
            assert response.choices[0].finish_reason == "length" and tap.invalid_responses == 1
        assert len(sent) == expected_sends
