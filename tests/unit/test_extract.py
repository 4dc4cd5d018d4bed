"""Extraction: relative dates resolved in Python against the session date; model output cleaned and counted."""

from __future__ import annotations

from datetime import datetime

import pytest

from mosaic.extract import EntityExtractor, parse_session_time, prerequisite_pairs, resolve_time
from core.api import Turn
from tests.fakes import FakeLLM

SESSION = parse_session_time("1:56 pm on 8 May, 2023")  # a Monday


@pytest.mark.parametrize(
    "phrase, iso",
    [
        ("yesterday", "2023-05-07"),
        ("Today", "2023-05-08"),
        ("3 days ago", "2023-05-05"),
        ("two weeks ago", "week of 2023-04-24"),
        ("a month ago", "2023-04"),
        ("last week", "week of 2023-05-01"),
        ("next month", "2023-06"),
        ("last year", "2022"),
        ("last Friday", "2023-05-05"),
        ("last Monday", "2023-05-01"),
        ("next Monday", "2023-05-15"),
        ("last weekend", "weekend of 2023-05-06"),
        ("in 2 weeks", "week of 2023-05-22"),
        ("7 May 2022", "2022-05-07"),
        ("May 2021", "2021-05"),
        ("2019", "2019"),
        ("on 20 April", "2023-04-20"),
    ],
)
def test_relative_and_absolute_times_resolve_against_the_session(phrase, iso):
    resolved = resolve_time(phrase, SESSION)
    assert resolved is not None and resolved.iso == iso


@pytest.mark.parametrize(
    "said, parsed",
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),  # LoCoMo's form
        ("2024-01-31T09:05:00", datetime(2024, 1, 31, 9, 5)),
        ("2024-01-31", datetime(2024, 1, 31)),
        ("not a date at all", None),
        ("", None),
        (None, None),
    ],
)
def test_session_times_parse_in_locomo_and_iso_forms(said, parsed):
    assert parse_session_time(said) == parsed


@pytest.mark.parametrize(
    "phrase, iso",
    [("a few days ago", "2023-05-05"), ("couple of weeks ago", "week of 2023-04-24"), ("several years ago", "2020"),
     ("twelve days ago", "2023-04-26"), ("in a few days", "2023-05-11")],
)
def test_count_words_come_from_mosaic_values(phrase, iso):
    resolved = resolve_time(phrase, SESSION)
    assert resolved is not None and resolved.iso == iso


def test_unresolvable_phrases_give_none():
    assert resolve_time("someday", SESSION) is None
    assert resolve_time("yesterday", None) is None
    assert resolve_time("", SESSION) is None


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
        EntityExtractor(llm, held_facts=-1)
