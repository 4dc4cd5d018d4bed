"""MOSAIC write path with the real default local LLM (Qwen2.5-Coder-1.5B Q4_K_M), the real embedder
and the real conflict detector: a numeric contradiction is caught and resolved per the policy,
and a paraphrase of a held fact raises no conflict."""

from __future__ import annotations

from functools import partial

import pytest

from core.api import Turn
from mosaic.conflict import ConflictDetector
from mosaic.memory import MosaicMemory
from mosaic.retrieval import Retriever

pytestmark = pytest.mark.integration

EARLY = "2:10 pm on 3 March, 2023"
LATE = "4:30 pm on 20 June, 2023"


@pytest.fixture(scope="module")
def ingested(default_llm, embedder, tmp_path_factory):
    mem = MosaicMemory(retry=None, llm=default_llm, embedder=embedder, workdir=tmp_path_factory.mktemp("mosaic"),
                       conflict=partial(ConflictDetector, k=5), retrieval=partial(Retriever, mode="exact"))
    first = mem.add("ana", [
        # the turn says only the count: this test is about the numeric rule, not about which of several
        # facts (the dogs' names) the model chooses to write
        Turn("S1:1", "Ana", "We have two dogs at home."),
        Turn("S1:2", "Ana", "I work as a nurse at St. Mary's hospital."),
        Turn("S1:3", "Ana", "My daughter Lily started first grade this year."),
    ], session_time=EARLY)
    paraphrase = mem.add("ana", [Turn("S2:1", "Ana", "As you know, I'm a nurse at St. Mary's hospital.")], session_time=LATE)
    contradiction = mem.add("ana", [Turn("S2:2", "Ana", "We have three dogs at home now.")], session_time=LATE)
    return mem, first, paraphrase, contradiction


def test_held_facts_were_extracted(ingested):
    mem, first, _, _ = ingested
    assert first.n_turns == 3 and first.usage.by_purpose["extraction"]["calls"] == 3
    sources = {tid for item in first.stored for tid in item.source_turn_ids}
    assert {"S1:1", "S1:2"} <= sources, [s.text for s in first.stored]


def test_paraphrase_of_a_held_fact_is_not_flagged(ingested):
    _, _, paraphrase, _ = ingested
    assert paraphrase.conflict_events == [], [(e.verdict, e.new_text, e.old_text, e.reason) for e in paraphrase.conflict_events]


def test_numeric_contradiction_is_caught_and_resolved_per_policy(ingested):
    mem, _, _, contradiction = ingested
    events = [e for e in contradiction.conflict_events if "S1:1" in e.old_source_turn_ids]
    held = [s.text for s in mem.stored_items("ana") if "S1:1" in s.source_turn_ids]
    assert events, ("the two-dogs fact was not caught", [(e.verdict, e.new_text, e.old_text) for e in contradiction.conflict_events],
                    contradiction.queued, [s.text for s in contradiction.stored], "held from S1:1:", held)
    event = events[0]
    assert event.new_source_turn_ids == ["S2:2"] and event.reason
    space = mem._spaces["ana"]
    old = space.graph.entity(event.old_memory_id)
    candidates = [e for e in space.graph.entities(include_inactive=True) if e.source_turn_ids == ["S2:2"]] + mem.rejected_entities("ana")
    new = next(e for e in candidates if e.text == event.new_text)
    # policy: newer evidence that is as direct and exact as the held one updates it, history kept
    assert new.session_time > old.session_time and new.directness >= old.directness and new.specificity >= old.specificity, (new, old)
    assert event.verdict == "update", event
    assert old.status == "superseded" and any(h.get("entity_id") == old.entity_id for h in new.history)
    assert old.entity_id not in {s.memory_id for s in mem.stored_items("ana")}
    assert new.entity_id in {s.memory_id for s in mem.stored_items("ana")}
    assert contradiction.usage.by_purpose["extraction"]["calls"] == 1
