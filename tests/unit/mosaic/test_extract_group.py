"""Group extraction (write-cost variant): consecutive turns of one session in one LLM call,
each fact naming its message, split back to its turn and cleaned as a single turn's facts are.
Invented text (a bakery and a garden)."""

from __future__ import annotations

from typing import Any

import pytest

from core.api import Turn
from core.llm import LLMError
from mosaic.extract import EntityExtractor, _entity_id
from mosaic.extract_prompts import group_extraction_schema
from tests.fakes import FakeLLM
from core.config_check import check_kwargs
from mosaic.settings import combination_problems

SESSION = "1:56 pm on 8 May, 2023"
LIO = Turn("D5:1", "Lio", "I hired an apprentice, Tova, last week. She starts on the rye.")
MAE = Turn("D5:2", "Mae", "Nice! My tomatoes finally came up after three weeks.")
LIO2 = Turn("D5:3", "Lio", "Great. The bakery opens at 7am now.")


def _fact(msg: Any, text: str, who: str = "Lio", when: str = "") -> dict[str, Any]:
    return {"msg": msg, "fact": text, "type": "event", "who": who, "attr": "", "value": "", "when": when, "cert": "stated", "spec": "exact"}


def test_a_one_turn_group_is_exactly_extract():
    reply = {"facts": [{k: v for k, v in _fact(1, "Lio hired an apprentice named Tova").items() if k != "msg"}]}
    single, grouped = FakeLLM(lambda m, s: reply), FakeLLM(lambda m, s: reply)
    previous = Turn("D4:9", "Mae", "How is the bakery going?")
    expected = EntityExtractor(single, context_chars=200).extract(LIO, SESSION, previous=previous)
    results = EntityExtractor(grouped, context_chars=200, turns_per_call=4).extract_group([LIO], SESSION, previous=previous)
    assert grouped.requests[0]["messages"] == single.requests[0]["messages"]
    assert grouped.requests[0]["schema"] == single.requests[0]["schema"] and grouped.requests[0]["max_tokens"] == 320  # conf/system/mosaic.yaml extract.max_tokens
    assert len(results) == 1 and [e.entity_id for e in results[0].entities] == [e.entity_id for e in expected.entities]
    assert "msg" not in grouped.requests[0]["schema"]["properties"]["facts"]["items"]["properties"]


def test_a_group_is_one_call_and_facts_go_to_their_turn():
    reply = {"facts": [
        _fact(2, "Mae's tomatoes came up after three weeks", who="Mae"),
        _fact(1, "Lio hired an apprentice named Tova last week", when="last week"),
        _fact(3, "Lio's bakery opens at 7am"),
    ]}
    llm = FakeLLM(lambda m, s: reply)
    ex = EntityExtractor(llm, max_tokens=100, context_chars=200, turns_per_call=3)
    previous = Turn("D4:9", "Mae", "How is the bakery going?")
    results = ex.extract_group([LIO, MAE, LIO2], SESSION, previous=previous)
    assert len(llm.requests) == 1 and llm.requests[0]["purpose"] == "extraction" and llm.requests[0]["max_tokens"] == 300
    assert llm.requests[0]["messages"][-1]["content"] == (
        "Session date: 2023-05-08\nPrevious message (Mae): How is the bakery going?\n"
        f"Message 1 from Lio: {LIO.text}\nMessage 2 from Mae: {MAE.text}\nMessage 3 from Lio: {LIO2.text}"
    )
    assert [[e.text for e in r.entities] for r in results] == [
        ["Lio hired an apprentice named Tova in the week of 1 May 2023"],
        ["Mae's tomatoes came up after three weeks"],
        ["Lio's bakery opens at 7am"],
    ]
    assert [r.entities[0].source_turn_ids for r in results] == [["D5:1"], ["D5:2"], ["D5:3"]]
    assert [r.entities[0].entity_id for r in results] == [
        _entity_id(turn, 0, r.entities[0].text) for turn, r in zip([LIO, MAE, LIO2], results)
    ]
    assert results[0].entities[0].time == "week of 2023-05-01" and results[0].entities[0].evidence == "I hired an apprentice, Tova, last week."
    assert results[1].entities[0].subject == "Mae" and results[1].entities[0].session_time == "2023-05-08T13:56:00"
    assert ex.stats["turns"] == 3 and ex.stats["group_calls"] == 1 and ex.stats["entities"] == 3 and ex.stats["calls_failed"] == 0


def test_the_group_prompt_has_a_fixed_prefix_and_differs_from_the_single_prompt():
    llm = FakeLLM(lambda m, s: {"facts": []})
    ex = EntityExtractor(llm, turns_per_call=2)
    ex.extract_group([LIO, MAE], SESSION)
    ex.extract_group([MAE, LIO2], "2024-01-01")
    first, second = (r["messages"] for r in llm.requests)
    assert first[:-1] == second[:-1] and first[-1] != second[-1]
    assert first[0]["content"].startswith("Extract facts worth remembering from numbered chat messages.")
    assert "At most 3 facts per message" in first[0]["content"] and first[0]["content"] != ex.system_prompt
    assert '"msg":3' in first[2]["content"]  # the example shows a fact of a message other than the first
    assert [r.entities for r in ex.extract_group([LIO, MAE], SESSION)] == [[], []]


def test_a_fact_with_a_bad_msg_is_dropped_and_counted():
    reply = {"facts": [
        _fact(0, "Lio hired an apprentice named Tova"),
        _fact(3, "Lio hired an apprentice named Tova"),
        _fact("two", "Mae's tomatoes came up", who="Mae"),
        {k: v for k, v in _fact(1, "Lio's apprentice starts on the rye").items() if k != "msg"},
        "not a fact",
        _fact(2, "Mae's tomatoes came up after three weeks", who="Mae"),
    ]}
    ex = EntityExtractor(FakeLLM(lambda m, s: reply), turns_per_call=2)
    results = ex.extract_group([LIO, MAE], SESSION)
    assert [[e.text for e in r.entities] for r in results] == [[], ["Mae's tomatoes came up after three weeks"]]
    assert ex.stats["dropped_bad_msg"] == 5 and ex.stats["entities"] == 1


def test_the_cap_is_per_message():
    reply = {"facts": [
        _fact(1, "Lio hired an apprentice"), _fact(1, "Lio's apprentice is named Tova"), _fact(1, "Tova starts on the rye"),
        _fact(2, "Mae grows tomatoes", who="Mae"), _fact(2, "Mae's tomatoes came up", who="Mae"),
    ]}
    llm = FakeLLM(lambda m, s: reply)
    ex = EntityExtractor(llm, max_entities=2, turns_per_call=2)
    results = ex.extract_group([LIO, MAE], SESSION)
    assert [len(r.entities) for r in results] == [2, 2]
    assert [e.text for e in results[0].entities] == ["Lio hired an apprentice", "Lio's apprentice is named Tova"]
    assert ex.stats["dropped_over_cap"] == 1
    assert llm.requests[0]["schema"]["properties"]["facts"]["maxItems"] == 4


def test_a_fact_of_message_two_restating_message_one_is_dropped():
    reply = {"facts": [
        _fact(1, "Lio hired an apprentice named Tova"),
        _fact(2, "Lio hired an apprentice named Tova who starts on the rye", who="Lio"),
        _fact(2, "Mae's tomatoes came up after three weeks", who="Mae"),
    ]}
    ex = EntityExtractor(FakeLLM(lambda m, s: reply), turns_per_call=2)
    results = ex.extract_group([LIO, MAE], SESSION)
    assert [[e.text for e in r.entities] for r in results] == [
        ["Lio hired an apprentice named Tova"], ["Mae's tomatoes came up after three weeks"]
    ]
    assert ex.stats["dropped_from_previous"] == 1


def test_the_group_schema_numbers_the_messages():
    llm = FakeLLM(lambda m, s: {"facts": []})
    EntityExtractor(llm, max_entities=3, turns_per_call=3).extract_group([LIO, MAE, LIO2], SESSION)
    schema = llm.requests[0]["schema"]
    item = schema["properties"]["facts"]["items"]
    assert item["properties"]["msg"] == {"type": "integer", "minimum": 1, "maximum": 3}
    assert item["required"][0] == "msg" and next(iter(item["properties"])) == "msg"
    assert schema["properties"]["facts"]["maxItems"] == 9 and schema == group_extraction_schema(3, 3)
    assert group_extraction_schema(2, 5)["properties"]["facts"]["items"]["properties"]["msg"]["maximum"] == 5


def test_an_llm_failure_is_one_failure_per_turn_and_one_failed_call(caplog):
    def broken(messages, schema):
        raise LLMError("server down")

    ex = EntityExtractor(FakeLLM(broken), turns_per_call=3)
    with caplog.at_level("WARNING", logger="mosaic.extract"):
        results = ex.extract_group([LIO, MAE, LIO2], SESSION)
    assert [(r.entities, r.failures) for r in results] == [([], 1), ([], 1), ([], 1)]
    assert ex.stats["calls_failed"] == 1 and ex.stats["turns"] == 3 and ex.stats["group_calls"] == 1
    assert "D5:1, D5:2, D5:3" in caplog.text

    bad = EntityExtractor(FakeLLM(lambda m, s: "{not json"), turns_per_call=2)
    assert [r.failures for r in bad.extract_group([LIO, MAE], SESSION)] == [1, 1] and bad.stats["calls_failed"] == 1


def test_turns_per_call_is_validated():
    llm = FakeLLM(lambda m, s: {"facts": []})
    with pytest.raises(ValueError, match="extract.turns_per_call"):
        check_kwargs(EntityExtractor, {"turns_per_call": 0}, "system.extract")
    assert "held_facts=3: cannot be combined" in combination_problems({"extract": {"turns_per_call": 2, "held_facts": 3}})[0]
    assert EntityExtractor(llm).turns_per_call == 1 and EntityExtractor(llm).extract_group([]) == []
