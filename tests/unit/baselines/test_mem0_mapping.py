"""Mem0 adapter: event -> AddReport mapping and ingestion layout, on hand-made library outputs."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from baselines.mem0 import Mem0Memory, mem0_results_to_report, mem0_user_id, speaker_messages
from core.api import MemorySystem, Turn
from tests.fakes import served_llm_stub

# the constructor has no default for these (conf/system/mem0.yaml decides): Mem0's own extraction prompt, one attempt
LIBRARY_PROMPT = {"custom_instructions": None, "retry": None, "assistant_speakers": ["assistant"]}


def test_add_update_delete_none_map_to_stored_and_update_events():
    results = [
        {"id": "m1", "memory": "Caroline lives in Berlin", "event": "ADD"},
        {"id": "m2", "memory": "Caroline works as a nurse", "event": "UPDATE", "previous_memory": "Caroline works as a teacher"},
        {"id": "m3", "memory": "Caroline lives in Paris", "event": "DELETE"},
        {"id": "m4", "memory": "Caroline likes tea", "event": "NONE"},
    ]
    held_sources = {"m2": ["D1:1"], "m3": ["D1:2"]}
    report = mem0_results_to_report(results, "Caroline: I moved to Berlin", ["D2:1", "D2:2"], lambda i: held_sources.get(i, []))

    assert [(s.memory_id, s.text, s.source_turn_ids) for s in report.stored] == [
        ("m1", "Caroline lives in Berlin", ["D2:1", "D2:2"]),
        ("m2", "Caroline works as a nurse", ["D2:1", "D2:2"]),
    ]
    update, delete = report.updated
    assert (update.old_text, update.new_text, update.verdict, update.old_memory_id) == (
        "Caroline works as a teacher", "Caroline works as a nurse", "update", "m2")
    assert update.old_source_turn_ids == ["D1:1"]
    # DELETE: the held memory loses to the new input, so the new information wins: "update", not "reject"
    assert (delete.old_text, delete.new_text, delete.verdict, delete.old_memory_id) == (
        "Caroline lives in Paris", "Caroline: I moved to Berlin", "update", "m3")
    assert delete.old_source_turn_ids == ["D1:2"]
    assert report.rejected == [] and report.flagged == []
    assert len(report.conflict_events) == 2
    assert report.failures == 0


def test_unknown_event_is_counted_not_dropped():
    report = mem0_results_to_report([{"id": "x", "memory": "y", "event": "MERGE"}], "t", ["D1:1"])
    assert report.failures == 1 and report.stored == [] and report.conflict_events == []


def test_speaker_namespace_roles_follow_mem0_locomo_convention():
    turns = [Turn("D1:1", "Caroline", "Hi Mel"), Turn("D1:2", "Melanie", "Hi!")]
    assert speaker_messages(turns, "Caroline") == [
        {"role": "user", "content": "Caroline: Hi Mel"},
        {"role": "assistant", "content": "Melanie: Hi!"},
    ]
    assert [m["role"] for m in speaker_messages(turns, "Melanie")] == ["assistant", "user"]


def test_user_ids_have_no_whitespace_and_change_with_generation():
    assert mem0_user_id("conv 0", "Mary Ann", 0) == "conv_0--Mary_Ann--g0"
    assert mem0_user_id("c", "s", 0) != mem0_user_id("c", "s", 1)


class _ScriptedMem0:
    """Stands in for mem0.Memory to check the adapter's control flow (calls, scopes, merging)."""

    def __init__(self) -> None:
        self.adds: list[dict[str, Any]] = []
        self.n = 0

    def add(self, messages, *, user_id, metadata):
        self.adds.append({"messages": messages, "user_id": user_id, "metadata": metadata})
        self.n += 1
        return {"results": [{"id": f"m{self.n}", "memory": f"fact {self.n}", "event": "ADD"}]}

    def search(self, query, *, filters, top_k, threshold):
        user = filters["user_id"]
        hits = [a for a in self.adds if a["user_id"] == user]
        return {
            "results": [
                {"id": f"{user}-{i}", "memory": f"hit {i}", "score": 0.9 - 0.1 * i - (0.05 if "Melanie" in user else 0),
                 "metadata": a["metadata"]}
                for i, a in enumerate(hits)
            ][:top_k]
        }

    def delete_all(self, user_id):
        self.adds = [a for a in self.adds if a["user_id"] != user_id]


def _adapter(tmp_path: Path) -> tuple[Mem0Memory, _ScriptedMem0]:
    adapter = Mem0Memory(llm=served_llm_stub(), embedder=object(), workdir=str(tmp_path), batch_turns=2, **LIBRARY_PROMPT)
    fake = _ScriptedMem0()
    adapter._new_memory = lambda store_dir: fake
    return adapter, fake


def test_each_batch_goes_to_every_speaker_namespace_with_metadata(tmp_path: Path):
    adapter, fake = _adapter(tmp_path)
    assert isinstance(adapter, MemorySystem)
    turns = [Turn(f"D1:{i}", "Caroline" if i % 2 else "Melanie", f"text {i}") for i in range(1, 4)]
    report = adapter.add("conv-0", turns, session_time="2023-05-08T13:56:00")

    assert report.n_turns == 3
    assert [a["user_id"] for a in fake.adds] == ["conv-0--Caroline--g0", "conv-0--Melanie--g0"] * 2
    assert [a["metadata"]["source_turn_ids"] for a in fake.adds] == [["D1:1", "D1:2"]] * 2 + [["D1:3"]] * 2
    assert all(a["metadata"]["session_time"] == "2023-05-08T13:56:00" for a in fake.adds)
    assert len(report.stored) == 4 and report.conflict_events == []
    assert report.stored[2].source_turn_ids == ["D1:3"]


def test_an_assistant_speaker_is_context_in_the_user_namespace_without_one_of_its_own(tmp_path: Path):
    """HaluMem: one Mem0 user per person; the assistant's turns reach it as role assistant, never as a namespace."""
    adapter, fake = _adapter(tmp_path)
    turns = [Turn("0:1:user", "Avery", "u1"), Turn("0:1:assistant", "assistant", "a1"), Turn("0:2:user", "Avery", "u2")]
    adapter.add("halumem-x", turns, session_time="2025-01-01T10:00:00")

    assert [a["user_id"] for a in fake.adds] == ["halumem-x--Avery--g0"] * 2
    assert [m["role"] for m in fake.adds[0]["messages"]] == ["user", "assistant"]
    assert adapter._user_ids("halumem-x") == [("Avery", "halumem-x--Avery--g0")]
    assert all(h.text.startswith("(Avery's memory)") for h in adapter.search("halumem-x", "q", k=5))


def test_search_merges_speaker_namespaces_by_score_within_k(tmp_path: Path):
    adapter, _ = _adapter(tmp_path)
    turns = [Turn("D1:1", "Caroline", "a"), Turn("D1:2", "Melanie", "b"), Turn("D1:3", "Caroline", "c")]
    adapter.add("conv-0", turns, session_time="2023-05-08T13:56:00")
    hits = adapter.search("conv-0", "q", k=3)
    assert len(hits) == 3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].text.startswith("(Caroline's memory)")
    assert hits[0].timestamp == "2023-05-08T13:56:00" and hits[0].source_turn_ids == ["D1:1", "D1:2"]
    assert adapter.search("conv-0", "q", k=0) == []


def test_reset_empties_namespace_and_starts_a_new_scope_that_survives_restart(tmp_path: Path):
    adapter, fake = _adapter(tmp_path)
    adapter.add("conv-0", [Turn("D1:1", "Caroline", "a")])
    adapter.reset("conv-0")
    assert fake.adds == [] and adapter.search("conv-0", "q", 5) == []
    adapter.add("conv-0", [Turn("D1:2", "Caroline", "b")])
    assert fake.adds[-1]["user_id"] == "conv-0--Caroline--g1"
    reopened = Mem0Memory(llm=served_llm_stub(), embedder=object(), workdir=str(tmp_path), **LIBRARY_PROMPT)
    assert reopened._user_ids("conv-0") == [("Caroline", "conv-0--Caroline--g1")]


def test_bad_config_values_are_named():
    with pytest.raises(ValueError, match="batch_turns"):
        Mem0Memory(llm=served_llm_stub(), embedder=object(), workdir="/tmp/x", batch_turns=0, **LIBRARY_PROMPT)
    with pytest.raises(ValueError, match="search_threshold"):
        Mem0Memory(llm=served_llm_stub(), embedder=object(), workdir="/tmp/x", search_threshold=1.5, **LIBRARY_PROMPT)


def test_snapshot_and_restore_bring_back_the_store_on_real_mem0(tmp_path: Path):
    """Real mem0.Memory (FAISS + history DB); memories written without the LLM (infer=False)."""
    from types import SimpleNamespace

    llm = served_llm_stub()
    adapter = Mem0Memory(llm=llm, embedder=object(), workdir=str(tmp_path), **LIBRARY_PROMPT)
    adapter._entry("ns")["speakers"] = ["Caroline"]  # what add() records before it calls Mem0
    user_id = adapter._user_ids("ns")[0][1]
    adapter.memory_for("ns").add([{"role": "user", "content": "Caroline lives in Paris."}], user_id=user_id, infer=False,
                       metadata={"source_turn_ids": ["D1:1"]})  # fmt: skip
    state = adapter.snapshot("ns")
    before = sorted((i.memory_id, i.text, tuple(i.source_turn_ids)) for i in adapter.stored_items("ns"))
    assert len(before) == 1

    adapter.memory_for("ns").add([{"role": "user", "content": "Caroline moved to Berlin."}], user_id=user_id, infer=False,
                       metadata={"source_turn_ids": ["D2:1"]})  # fmt: skip
    adapter.reset("other")
    assert len(adapter.stored_items("ns")) == 2
    adapter.restore("ns", state)

    assert sorted((i.memory_id, i.text, tuple(i.source_turn_ids)) for i in adapter.stored_items("ns")) == before
    assert adapter.search("ns", "Where does Caroline live?", 3)[0].source_turn_ids == ["D1:1"]
    assert adapter._registry["ns"]["speakers"] == ["Caroline"] and "other" in adapter._registry  # other namespaces untouched
    shutil.rmtree(state.path)
    with pytest.raises(FileNotFoundError, match="re-ingest"):
        adapter.restore("ns", state)
