"""The batched write path with the real default local LLM: a two-message extraction call attributes
facts to both messages, and a batched conflict call yields one label distribution per check, read from the
server's log-probabilities (so the parser matches llama.cpp's tokens, not only a scripted reply)."""

from __future__ import annotations

import pytest

from core.api import Turn
from mosaic.conflict import ConflictDetector
from mosaic.entity import Entity
from mosaic.extract import EntityExtractor
from mosaic.graph import MemoryGraph

pytestmark = pytest.mark.integration

WHEN = "2:10 pm on 3 March, 2023"


def test_two_messages_are_extracted_in_one_call(default_llm):
    extractor = EntityExtractor(default_llm, max_tokens=320, context_chars=200, turns_per_call=2)
    before = default_llm.usage.calls
    turns = [Turn("S1:1", "Ana", "I just started a new job as a pharmacist in Leeds."),
             Turn("S1:2", "Ben", "Congrats! I finally bought a red road bike last weekend.")]  # fmt: skip
    first, second = extractor.extract_group(turns, WHEN)
    assert default_llm.usage.calls - before == 1 and extractor.stats["group_calls"] == 1
    assert first.entities and second.entities, (first, second, extractor.stats)
    assert all(e.source_turn_ids == ["S1:1"] for e in first.entities) and all(e.source_turn_ids == ["S1:2"] for e in second.entities)
    assert any("pharmacist" in e.text.lower() for e in first.entities) and any("bike" in e.text.lower() for e in second.entities)


def test_a_batched_judgement_reads_one_label_per_check(default_llm, embedder):
    graph = MemoryGraph(embedder, assoc_threshold=0.5)
    held = ["Ana is allergic to cats.", "The reading club meets every Tuesday evening at the library."]
    for i, text in enumerate(held):
        graph.add_entity(Entity(f"h{i}", text, "persona", session_time="2023-01-01"), embedder.encode([text])[0])
    news = [Entity("n0", "Ana adopted two cats and keeps them in her bedroom.", "event", session_time="2023-03-03"),
            Entity("n1", "The reading club now meets on Thursdays at the cafe.", "event", session_time="2023-03-03")]  # fmt: skip
    vectors = embedder.encode([e.text for e in news])
    detector = ConflictDetector(default_llm, batch=True)
    before = default_llm.usage.calls
    detector.check_group([(e, v, []) for e, v in zip(news, vectors)], graph)
    assert default_llm.usage.calls - before == 1 and detector.stats["batched_checks"] == 2
    assert detector.stats["batch_unparsed"] == 0, detector.last_group_traces
    for trace in detector.last_group_traces:
        assert trace["batched"] == 2 and sum(trace["labels"].values()) == pytest.approx(1.0, abs=1e-3), trace
