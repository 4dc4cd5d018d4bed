"""What the extraction call asks and allows back (mosaic.extract_prompts): each worked example is a valid reply under
its own schema, the variants leave the default prompt as it is, and a rows-format fact reads back as its object."""

from __future__ import annotations

import json

import jsonschema

from core.api import Turn
from mosaic.extract import EntityExtractor
from mosaic.extract_prompts import (
    FEW_SHOT,
    FIELDS,
    GROUP_FEW_SHOT,
    GROUP_SYSTEM_PROMPT,
    HELD_FEW_SHOT,
    ROWS_FEW_SHOT,
    ROWS_PROMPT,
    SYSTEM_PROMPT,
    as_row,
    extraction_schema,
    from_row,
    group_extraction_schema,
    rows_extraction_schema,
)
from tests.fakes import FakeLLM


def _replies(example: list[dict[str, str]]) -> list[dict]:
    return [json.loads(m["content"]) for m in example if m["role"] == "assistant"]


def test_every_worked_example_is_a_valid_reply_under_its_own_schema():
    for reply in _replies(FEW_SHOT):
        jsonschema.validate(reply, extraction_schema(3))
    for reply in _replies(ROWS_FEW_SHOT):
        jsonschema.validate(reply, rows_extraction_schema(3))
    for reply in _replies(HELD_FEW_SHOT):
        jsonschema.validate(reply, extraction_schema(3, held_facts=2))
    held = _replies(HELD_FEW_SHOT)[0]["facts"]
    assert [fact["clash"] for fact in held] == [1, 0]  # the example shows one clash and one new fact


def test_the_variants_share_the_field_rules_but_not_the_default_prompt():
    rules = SYSTEM_PROMPT.split("\n", 1)[1]
    assert rules in ROWS_PROMPT and rules in GROUP_SYSTEM_PROMPT
    assert ROWS_PROMPT != SYSTEM_PROMPT and "{max_entities}" in SYSTEM_PROMPT
    assert "clash" not in extraction_schema(3)["properties"]["facts"]["items"]["properties"]


def test_a_row_reads_back_as_its_object_and_a_wrong_length_is_passed_on():
    fact = json.loads(FEW_SHOT[1]["content"])["facts"][0]
    assert from_row(as_row(fact)) == {name: fact[name] for name in FIELDS}
    assert from_row(["too", "short"]) == ["too", "short"] and from_row({"fact": "x"}) == {"fact": "x"}


def test_the_worked_example_splits_into_several_facts_none_and_one():
    """The group prompt's own example, fed back as the model's reply, is valid under the group schema and
    splits into two facts for the first message, none for the thanks and one for the third: the example
    shows a dense message yielding several facts (one fact per message taught the model to stop at one)."""
    example_user, example_reply = GROUP_FEW_SHOT
    reply = json.loads(example_reply["content"])
    jsonschema.validate(reply, group_extraction_schema(3, 3))
    lines = example_user["content"].split("\n")[1:]
    turns = [Turn(f"D1:{i}", line.split(" from ")[1].split(":")[0], line.split(": ", 1)[1]) for i, line in enumerate(lines, start=1)]
    results = EntityExtractor(FakeLLM(lambda m, s: reply), turns_per_call=3).extract_group(turns, "2023-05-08")
    assert [len(r.entities) for r in results] == [2, 0, 1]
