"""The two reference systems: RAG (FAISS top-k) and full context, against the protocol."""

from __future__ import annotations

import numpy as np
import pytest

from baselines.full_context import FullContextMemory
from baselines.rag import RagMemory
from core.api import Inspectable, MemorySystem, Snapshottable, Turn
from tests.fakes import HashEmbedder


def BagOfWordsEmbedder() -> HashEmbedder:  # noqa: N802 (the tests build it like a class)
    """Hashed bag of words, unit-normalised: shared words -> higher cosine. Test stand-in only."""
    return HashEmbedder(dim=256, model_id="bow-test", token_pattern=r"[^\s:]+")


TURNS = [
    Turn("D1:1", "Ann", "I adopted a dog named Rex", "2023-05-08T13:56:00"),
    Turn("D1:2", "Bob", "Nice, I bought a red bicycle", "2023-05-08T13:56:00"),
    Turn("D1:3", "Ann", "I plan to visit Paris in June", "2023-05-08T13:56:00"),
]


@pytest.fixture()
def rag(tmp_path):
    return RagMemory(llm=None, embedder=BagOfWordsEmbedder(), workdir=str(tmp_path))


def test_rag_implements_protocols(rag):
    assert isinstance(rag, MemorySystem) and isinstance(rag, Snapshottable) and isinstance(rag, Inspectable)


def test_rag_top1_is_the_matching_turn_with_its_source(rag):
    report = rag.add("c", TURNS, "2023-05-08T13:56:00")
    assert report.n_turns == 3 and len(report.stored) == 3 and not report.conflict_events
    hits = rag.search("c", "what bicycle did Bob buy", k=2)
    assert len(hits) == 2
    assert hits[0].source_turn_ids == ["D1:2"] and hits[0].timestamp == "2023-05-08T13:56:00"
    assert hits[0].score >= hits[1].score
    assert len(rag.search("c", "anything", k=10)) == 3  # k beyond what is held


def test_rag_chunks_windows_of_turns(tmp_path):
    rag = RagMemory(llm=None, embedder=BagOfWordsEmbedder(), workdir=str(tmp_path), chunk_turns=2)
    report = rag.add("c", TURNS)
    assert [s.source_turn_ids for s in report.stored] == [["D1:1", "D1:2"], ["D1:3"]]
    assert "Ann: I adopted" in report.stored[0].text and "Bob: Nice" in report.stored[0].text
    with pytest.raises(ValueError, match="chunk_turns"):
        RagMemory(llm=None, embedder=BagOfWordsEmbedder(), workdir=str(tmp_path), chunk_turns=0)


def test_rag_namespaces_reset_snapshot_restore(rag):
    rag.add("a", TURNS[:1])
    rag.add("b", TURNS[1:])
    assert [i.source_turn_ids for i in rag.stored_items("a")] == [["D1:1"]]
    state = rag.snapshot("b")
    rag.add("b", [Turn("D2:1", "Bob", "I sold the bicycle")])
    assert len(rag.stored_items("b")) == 3
    rag.restore("b", state)
    assert len(rag.stored_items("b")) == 2
    assert {tid for h in rag.search("b", "bicycle", 5) for tid in h.source_turn_ids} == {"D1:2", "D1:3"}
    rag.reset("b")
    assert rag.search("b", "bicycle", 5) == [] and len(rag.stored_items("a")) == 1


def test_full_context_keeps_newest_in_order(tmp_path):
    memory = FullContextMemory(llm=None, embedder=None, workdir=str(tmp_path), max_context_tokens=20)
    memory.add("c", TURNS[:2], "2023-05-08T13:56:00")
    memory.add("c", [Turn("D2:1", "Ann", "Rex learned to sit")], "2023-06-01T10:00:00")
    everything = FullContextMemory(llm=None, embedder=None, workdir=str(tmp_path), max_context_tokens=10_000)
    everything.add("c", TURNS[:2])
    assert [h.source_turn_ids[0] for h in everything.search("c", "q", 1)] == ["D1:1", "D1:2"]  # k ignored
    # costs: 'Ann: I adopted a dog named Rex' 30 chars -> 8, 'Bob: Nice, ...' 33 -> 9, 'Ann: Rex learned to sit' 23 -> 6
    kept = memory.search("c", "q", 5)
    assert [h.source_turn_ids[0] for h in kept] == ["D1:2", "D2:1"]
    assert kept[-1].timestamp == "2023-06-01T10:00:00"
    assert kept[0].score < kept[1].score  # recency-ordered scores: the answerer drops oldest first
    assert isinstance(memory, Snapshottable) and isinstance(memory, Inspectable)
    state = memory.snapshot("c")
    memory.reset("c")
    assert memory.search("c", "q", 5) == []
    memory.restore("c", state)
    assert len(memory.stored_items("c")) == 3
