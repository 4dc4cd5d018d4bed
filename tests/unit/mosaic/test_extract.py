"""Extraction: relative dates resolved in Python against the session date; model output cleaned and counted."""

from __future__ import annotations

import json

import pytest

from mosaic.extract import EntityExtractor, prerequisite_pairs
from core.api import Turn
from tests.fakes import FakeLLM
from core.config_check import check_kwargs
from mosaic.settings import combination_problems

def _turn(text: str = "I went to a support group yesterday. It was powerful.") -> Turn:
    return Turn("D1:3", "Caroline", text)


def test_output_is_cleaned_resolved_and_counted():
    facts = {"facts": [
        {"fact": "Caroline went to an LGBTQ support group yesterday", "type": "event", "who": "I", "attr": "activity",
         "value": "support group", "when": "yesterday", "cert": "stated", "spec": "exact"},
        {"fact": "Caroline went to an LGBTQ support group yesterday", "type": "event", "who": "Caroline", "attr": "",
         "value": "", "when": "", "cert": "stated", "spec": "exact"},
        {"fact": "  ", "type": "persona", "who": "Caroline", "attr": "", "value": "", "when": "", "cert": "stated", "spec": "exact"},
        {"fact": "Caroline found it powerful", "type": "feeling", "who": "Caroline", "attr": "opinion",
         "value": "powerful", "when": "", "cert": "sure", "spec": "vague"},
    ]}
    llm = FakeLLM(lambda messages, schema: facts)
    ex = EntityExtractor(llm, max_entities=3)
    result = ex.extract(_turn(), "1:56 pm on 8 May, 2023")
    assert [e.text for e in result.entities] == ["Caroline went to an LGBTQ support group on 7 May 2023", "Caroline found it powerful"]
    first, second = result.entities
    assert first.subject == "Caroline" and first.time == "2023-05-07" and first.source_turn_ids == ["D1:3"]
    assert first.evidence == "I went to a support group yesterday." and first.session_time == "2023-05-08T13:56:00"
    assert second.type == "event" and second.directness == 0.6 and second.specificity == 0.3
    assert ex.stats["dropped_duplicate"] == 1 and ex.stats["dropped_empty"] == 1
    assert ex.stats["fixed_subject"] == 1 and ex.stats["fixed_label"] == 1 and ex.stats["times_resolved"] == 1
    assert llm.requests[0]["purpose"] == "extraction" and llm.requests[0]["schema"]["properties"]["facts"]["maxItems"] == 3
    assert llm.requests[0]["messages"][:-1] == ex.messages(_turn("other"), "2023-01-01", None)[:-1]  # fixed prefix for the prompt cache


def test_broken_output_is_a_counted_failure_not_a_crash():
    ex = EntityExtractor(FakeLLM(lambda m, s: "{not json"))
    result = ex.extract(_turn(), None)
    assert result.entities == [] and result.failures == 1 and ex.stats["calls_failed"] == 1


def test_prerequisites_follow_subject_anchors():
    facts = {"facts": [
        {"fact": "Mel took the kids camping", "type": "event", "who": "Mel", "attr": "", "value": "", "when": "", "cert": "stated", "spec": "exact"},
        {"fact": "Mel has three kids", "type": "persona", "who": "Mel", "attr": "kids", "value": "3", "when": "", "cert": "stated", "spec": "exact"},
        {"fact": "Caroline is Mel's friend", "type": "relationship", "who": "Caroline", "attr": "", "value": "", "when": "", "cert": "stated", "spec": "exact"},
    ]}
    result = EntityExtractor(FakeLLM(lambda m, s: facts)).extract(Turn("D2:1", "Mel", "x"), None)
    assert result.prerequisites == [(1, 0)]
    assert prerequisite_pairs([]) == []


def test_a_fact_restating_the_previous_message_is_dropped():
    from mosaic.extract import copied_from_previous

    # invented text: a library's lending rules, one message after the other
    previous = "The library lends books for three weeks, and members can renew a loan once online."
    message = "Late returns cost 20 cents a day, capped at 5 dollars per book, and renewals are free."
    assert copied_from_previous("The library lends books for three weeks", message, previous)
    assert not copied_from_previous("Late returns cost 20 cents a day, capped at 5 dollars per book", message, previous)
    assert not copied_from_previous("Caroline went to a support group", "I went to a support group yesterday.", "")
    # the margin decides: 4 of 5 content words from the previous message, 1 from this one (0.8 - 0.2 = 0.6)
    mixed = "Members renew a loan online for cents"
    assert copied_from_previous(mixed, message, previous, margin=0.6) and not copied_from_previous(mixed, message, previous, margin=0.61)


def test_held_facts_are_shown_and_clash_proposals_parsed():
    """Write-cost variant (extract.held_facts): the held facts appear numbered in the prompt, the schema asks
    for a clash number, a valid number becomes a proposal, 0 / out of range / junk do not, and a fact
    copied from the held facts rather than said in the message is dropped. Invented text (a bakery)."""
    held = ["Lio bakes rye bread on Saturdays", "Lio's bakery opens at 7am"]
    reply = {"facts": [
        {"fact": "Lio bakes rye bread on Sundays now", "type": "persona", "who": "Lio", "attr": "rye day", "value": "Sunday",
         "when": "", "cert": "stated", "spec": "exact", "clash": 1},
        {"fact": "Lio hired an apprentice named Tova", "type": "event", "who": "Lio", "attr": "staff", "value": "Tova",
         "when": "", "cert": "stated", "spec": "exact", "clash": 7},
        {"fact": "Lio's bakery opens at 7am", "type": "persona", "who": "Lio", "attr": "opening", "value": "7am",
         "when": "", "cert": "stated", "spec": "exact", "clash": 0},
    ]}
    llm = FakeLLM(lambda m, s: reply)
    ex = EntityExtractor(llm, max_entities=3, held_facts=2)
    turn = Turn("D3:1", "Lio", "I bake the rye on Sundays now, and I hired an apprentice, Tova.")
    result = ex.extract(turn, "2023-05-08", held=[*held, "a third held fact beyond the cap"])
    prompt = llm.requests[0]["messages"][-1]["content"]
    assert "Memory:\n1. Lio bakes rye bread on Saturdays\n2. Lio's bakery opens at 7am\nMessage from Lio:" in prompt
    assert "third held fact" not in prompt  # at most held_facts are shown
    item = llm.requests[0]["schema"]["properties"]["facts"]["items"]
    assert "clash" in item["required"] and item["properties"]["clash"]["maximum"] == 2
    assert [e.text for e in result.entities] == ["Lio bakes rye bread on Sundays now", "Lio hired an apprentice named Tova"]
    assert result.proposed_clashes == {0: 0}  # clash 7 is out of range: no proposal
    assert ex.stats["dropped_from_memory"] == 1 and ex.stats["proposed_clashes"] == 1 and ex.stats["turns_with_held_facts"] == 1


def test_default_extraction_has_no_held_facts_or_clash_field():
    llm = FakeLLM(lambda m, s: {"facts": []})
    ex = EntityExtractor(llm)
    ex.extract(_turn(), None, held=["ignored: held_facts is 0"])
    assert "Memory" not in llm.requests[0]["messages"][-1]["content"] and "Memory" not in ex.system_prompt
    assert "clash" not in llm.requests[0]["schema"]["properties"]["facts"]["items"]["properties"]
    with pytest.raises(ValueError, match="held_facts"):
        check_kwargs(EntityExtractor, {"held_facts": -1}, "system.extract")


# ----------------------------------------------------------------------------- rows output format
def test_rows_format_yields_the_same_entities_as_the_object_format_from_the_same_facts():
    """output_format=rows asks for each fact as a positional list; parsed back, the same facts give the same
    entities, counts and drops as the object format (the list order is FIELDS), and a list of the wrong
    length is dropped and counted like any malformed fact. Invented text (a pottery class)."""
    from mosaic.extract_prompts import FIELDS, as_row

    objects = [
        {"fact": "Ines started a pottery class yesterday", "type": "event", "who": "I", "attr": "hobby",
         "value": "pottery", "when": "yesterday", "cert": "stated", "spec": "exact"},
        {"fact": "Ines owns two kilns", "type": "persona", "who": "Ines", "attr": "number of kilns",
         "value": "2", "when": "", "cert": "hedged", "spec": "vague"},
    ]
    turn = Turn("D4:2", "Ines", "I started a pottery class yesterday, and I think I own two kilns now.")
    by_objects = EntityExtractor(FakeLLM(lambda m, s: {"facts": objects}))
    rows_llm = FakeLLM(lambda m, s: {"facts": [*(as_row(fact) for fact in objects), ["too", "short"]]})
    by_rows = EntityExtractor(rows_llm, output_format="rows")
    expected = by_objects.extract(turn, "2023-05-08")
    got = by_rows.extract(turn, "2023-05-08")
    assert [vars(e) for e in got.entities] == [vars(e) for e in expected.entities] and len(got.entities) == 2
    assert got.failures == 1 and by_rows.stats["dropped_empty"] == 1  # the two-item list
    row = rows_llm.requests[0]["schema"]["properties"]["facts"]["items"]
    assert row["type"] == "array" and len(row["prefixItems"]) == len(FIELDS) == row["minItems"] == row["maxItems"]
    assert row["prefixItems"][1]["enum"] == ["event", "persona", "relationship"]
    assert '"fact"' not in rows_llm.requests[0]["messages"][2]["content"]  # the example reply names no fields
    assert json.loads(rows_llm.requests[0]["messages"][2]["content"])["facts"][0][0] == "Jon adopted a second cat last week"


def test_rows_format_is_refused_where_a_prompt_names_fields_and_unknown_formats_are_refused():
    llm = FakeLLM(lambda m, s: {"facts": []})
    with pytest.raises(ValueError, match="output_format"):
        check_kwargs(EntityExtractor, {"output_format": "csv"}, "system.extract")
    assert "held_facts=2 / turns_per_call=1" in combination_problems({"extract": {"output_format": "rows", "held_facts": 2}})[-1]
    assert "held_facts=0 / turns_per_call=2" in combination_problems({"extract": {"output_format": "rows", "turns_per_call": 2}})[-1]


# ----------------------------------------------------------------------------- oracle extractor
def _no_llm(messages, schema):
    raise AssertionError("the oracle extractor must not call the LLM")


def test_oracle_source_builds_entities_from_the_turns_gold_facts_without_an_llm_call():
    from core.api import OracleFact

    facts = (
        OracleFact("2:p1", "Martin Mark  works as a   program manager.", subject="Martin Mark", memory_type="Persona Memory"),
        OracleFact("2:p2", "Martin Mark's sister Anna is a nurse.", subject="Martin Mark", memory_type="Relationship Memory"),
        OracleFact("2:p3", "Martin Mark went hiking near Hangzhou.", subject="Martin Mark", memory_type="Event Memory"),
        OracleFact("2:p4", "Martin Mark likes tea.", subject="Martin Mark", memory_type="Preference"),  # not a MOSAIC type
    )
    extractor = EntityExtractor(FakeLLM(_no_llm), max_entities=2, source="oracle")
    turn = Turn("2:7:assistant", "assistant", "Good luck with the new job!", oracle_facts=facts)
    result = extractor.extract(turn, session_time="2029-01-15T16:15:20")
    assert [e.text for e in result.entities] == [
        "Martin Mark works as a program manager.", "Martin Mark's sister Anna is a nurse.",
        "Martin Mark went hiking near Hangzhou.", "Martin Mark likes tea.",
    ]  # verbatim (whitespace normalised), in order, and no max_entities cap on gold facts
    assert [e.type for e in result.entities] == ["persona", "relationship", "event", "event"]
    assert [e.fact_id for e in result.entities] == ["2:p1", "2:p2", "2:p3", "2:p4"]
    first = result.entities[0]
    assert (first.subject, first.attribute, first.value, first.time, first.evidence) == ("Martin Mark", "", "", None, "")
    assert (first.directness, first.specificity, first.source_turn_ids, first.session_time) == (1.0, 1.0, ["2:7:assistant"], "2029-01-15T16:15:20")
    assert len({e.entity_id for e in result.entities}) == 4
    assert extractor.stats["oracle_facts"] == 4 and result.failures == 0
    assert extractor.extract(Turn("2:8:user", "Martin Mark", "Thanks!"), session_time="2029-01-15T16:15:20").entities == []


def test_oracle_fact_that_cites_its_turn_keeps_the_evidence_ids_and_the_turn_sentence():
    from core.api import OracleFact

    fact = OracleFact("session_1:obs0", "Caroline went to a support group.", subject="Caroline", source_turn_ids=("D1:3",))
    turn = Turn("D1:3", "Caroline", "Hi Mel! I went to a support group yesterday. It was great.", oracle_facts=(fact,))
    [entity] = EntityExtractor(FakeLLM(_no_llm), source="oracle").extract_group([turn], "2023-05-08T13:56:00")[0].entities
    assert entity.type == "event" and entity.subject == "Caroline" and entity.source_turn_ids == ["D1:3"]
    assert entity.evidence == "I went to a support group yesterday."
    elsewhere = OracleFact("session_1:obs1", "Melanie paints.", subject="Melanie", source_turn_ids=("D1:9",))
    [other] = EntityExtractor(FakeLLM(_no_llm), source="oracle").extract(Turn("D1:4", "Melanie", "Nice!", oracle_facts=(elsewhere,))).entities
    assert other.source_turn_ids == ["D1:9"] and other.evidence == ""


def test_model_source_ignores_oracle_facts_and_bad_sources_are_refused():
    from core.api import OracleFact

    llm = FakeLLM(lambda m, s: {"facts": []})
    turn = Turn("D1:1", "Jon", "Hello there.", oracle_facts=(OracleFact("x", "Jon is a spy."),))
    assert EntityExtractor(llm).extract(turn).entities == [] and llm.usage.calls == 1
    with pytest.raises(ValueError, match="extract.source='gold'"):
        check_kwargs(EntityExtractor, {"source": "gold"}, "system.extract")
    assert any("source=oracle with system.extract.held_facts=3" in p for p in combination_problems({"extract": {"source": "oracle", "held_facts": 3}}))


def test_mosaic_with_the_oracle_extractor_runs_the_usual_write_path_and_names_the_gold_facts(tmp_path):
    """Gate, conflict check and graph run as for extracted entities; stored items and conflict events carry fact ids."""
    from functools import partial

    from core.api import OracleFact
    from mosaic.conflict import ConflictDecision, ConflictDetector
    from mosaic.memory import MosaicMemory
    from mosaic.retrieval import Retriever
    from tests.unit.mosaic.test_graph import BowEmbedder

    class DogDetector(ConflictDetector):
        """Scripted: a new fact about dogs updates every held fact about dogs with other words."""

        def check(self, new, graph, proposed=None):
            return [ConflictDecision(new.entity_id, old.entity_id, "update", "semantic", "dogs", 1.0)
                    for old in graph.entities() if "dogs" in old.text and "dogs" in new.text and old.text != new.text]  # fmt: skip

    mem = MosaicMemory(retry=None, llm=FakeLLM(_no_llm), embedder=BowEmbedder(), workdir=tmp_path, extract=partial(EntityExtractor, source="oracle"),
                       retrieval=partial(Retriever, mode="exact", top_k=5), conflict=DogDetector)  # fmt: skip
    said = (OracleFact("0:p1", "Ana has two dogs.", "Ana", "Persona Memory"), OracleFact("0:p2", "Ana works as a nurse.", "Ana", "Persona Memory"))
    first = mem.add("u", [Turn("0:0:user", "Ana", "hi"), Turn("0:0:assistant", "assistant", "hello", oracle_facts=said)], "2029-01-01T10:00:00")
    assert [(s.text, s.fact_id) for s in first.stored] == [("Ana has two dogs.", "0:p1"), ("Ana works as a nurse.", "0:p2")]
    assert first.usage.calls == 0  # no extraction call; no belief call either (gold facts name no slot)
    later = (OracleFact("1:p1", "Ana has three dogs now.", "Ana", "Persona Memory"),)
    second = mem.add("u", [Turn("1:0:user", "Ana", "news", oracle_facts=later)], "2029-02-01T10:00:00")
    [event] = second.updated
    assert (event.new_fact_id, event.old_fact_id, event.old_text) == ("1:p1", "0:p1", "Ana has two dogs.")
    assert sorted((s.text, s.fact_id) for s in mem.stored_items("u")) == [("Ana has three dogs now.", "1:p1"), ("Ana works as a nurse.", "0:p2")]
    assert mem.metrics()["extraction"]["oracle_facts"] == 3 and mem.metrics()["gate"]["committed"] == 3
    assert [h.text for h in mem.search("u", "how many dogs", k=1)] == ["Ana has three dogs now."]


def test_oracle_rows_name_themselves_in_run_metadata(tmp_path):
    from functools import partial

    from baselines.rag import RagMemory
    from eval.tables import row_label
    from mosaic.memory import MosaicMemory
    from mosaic.retrieval import Retriever
    from tests.unit.mosaic.test_graph import BowEmbedder

    oracle = MosaicMemory(retry=None, llm=FakeLLM(_no_llm), embedder=BowEmbedder(), workdir=tmp_path, extract=partial(EntityExtractor, source="oracle"),
                          retrieval=partial(Retriever, mode="exact"))  # fmt: skip
    model = MosaicMemory(retry=None, llm=FakeLLM(_no_llm), embedder=BowEmbedder(), workdir=tmp_path / "m", retrieval=partial(Retriever, mode="exact"))
    rag = RagMemory(llm=None, embedder=BowEmbedder(), workdir=str(tmp_path), source="oracle")
    assert oracle.run_metadata()["row_label"] == "MOSAIC with the oracle extractor" and "row_label" not in model.run_metadata()
    assert row_label({"metadata": {"system": "rag", "ablation": "oracle_facts", "system_metadata": rag.run_metadata()}}) == "rag over oracle facts / oracle_facts"
    assert "row_label" not in RagMemory(llm=None, embedder=BowEmbedder(), workdir=str(tmp_path)).run_metadata()
