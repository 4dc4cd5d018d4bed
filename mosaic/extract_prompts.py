"""What MOSAIC's extraction call asks the LLM and the JSON it allows back (mosaic.extract sends it).

The default prompt (``SYSTEM_PROMPT`` with the fixed worked example ``FEW_SHOT``) is the paper's extraction; each
variant has a prompt and example of its own (rows output, held facts, several turns per call), so the default
prompt, and every cached call made with it, stays byte for byte the same whatever variant is added. Every prompt
and example is constant, so llama.cpp's prompt cache covers it. The schemas are the grammar the server
constrains the reply to; the label vocabularies (type, cert, spec) are shared by prompt, schema and cleaning.
"""

from __future__ import annotations

import json
from typing import Any, Literal

ENTITY_TYPES = ("event", "persona", "relationship")
DIRECTNESS = {"stated": 1.0, "implied": 0.6, "hedged": 0.3}
SPECIFICITY = {"exact": 1.0, "approximate": 0.6, "vague": 0.3}

# What each field of an extracted fact means: shared by the one-message and the group prompt.
FIELD_RULES = (
    "fact: a short sentence naming the person (never I or you). "
    "type: event (happened or will happen), persona (trait, job, preference, possession, count) or relationship (tie between people). "
    "who: whose fact. attr: short slot name (job, number of kids, hometown, hobby...). value: short. "
    "when: time words copied from the message (yesterday, last week, in 2022) or empty. "
    "cert: stated, implied or hedged. spec: exact, approximate or vague."
)
ONE_MESSAGE_TASK = (
    "Extract facts worth remembering from one chat message. Reply with compact one-line JSON. "
    "At most {max_entities} facts; none for greetings, thanks or small talk."
)
SYSTEM_PROMPT = ONE_MESSAGE_TASK + "\n" + FIELD_RULES

# A fixed worked example: it shows the compact format (pretty-printed JSON costs a small model
# more tokens than the facts themselves) and, being constant, stays in llama.cpp's prompt cache.
FEW_SHOT: list[dict[str, str]] = [
    {"role": "user", "content": "Session date: 2023-05-08\nMessage from Jon: Hey! We adopted a second cat last week, and I still teach math at Lincoln High."},
    {"role": "assistant", "content": (
        '{"facts":[{"fact":"Jon adopted a second cat last week","type":"event","who":"Jon","attr":"number of cats","value":"2",'
        '"when":"last week","cert":"stated","spec":"exact"},{"fact":"Jon teaches math at Lincoln High","type":"persona","who":"Jon",'
        '"attr":"job","value":"math teacher","when":"","cert":"stated","spec":"exact"}]}'
    )},
    {"role": "user", "content": "Session date: 2023-05-08\nMessage from Ana: Thanks, that sounds great!"},
    {"role": "assistant", "content": '{"facts":[]}'},
]

FIELDS = ("fact", "type", "who", "attr", "value", "when", "cert", "spec")

# Speed variant (``output_format="rows"``, off by default): each fact is a JSON list of the FIELDS'
# values in that order instead of an object naming them. The model then writes no key names: re-tokenizing the
# 888 facts of the cold conv-26 run's extraction replies in both shapes gives 26,562 tokens against 40,343
# (0.66), and generation is what an extraction call pays for. A separate prompt and example, so the default
# prompt (and every cached call made with it) is unchanged; whether a 1.5B model fills positional lists as well
# as named fields is what the variant's dev comparison measures (docs/running.md).
OutputFormat = Literal["objects", "rows"]
ROWS_PROMPT = f"{ONE_MESSAGE_TASK} Each fact is a list of {len(FIELDS)} strings in this order: [{', '.join(FIELDS)}].\n" + FIELD_RULES


def as_row(fact: dict[str, str]) -> list[str]:
    """A fact object as the rows format writes it: its FIELDS' values in order."""
    return [fact.get(name, "") for name in FIELDS]


ROWS_FEW_SHOT: list[dict[str, str]] = [
    FEW_SHOT[0],
    {"role": "assistant", "content": json.dumps(
        {"facts": [as_row(fact) for fact in json.loads(FEW_SHOT[1]["content"])["facts"]]}, separators=(",", ":"))},
    FEW_SHOT[2],
    FEW_SHOT[3],
]

# Write-cost variant (``held_facts`` > 0): the facts memory already holds nearest the turn
# are shown, numbered, and each extracted fact names the one it changes or rules out ("clash"), so
# that the save-time conflict check asks the LLM only to confirm proposed clashes instead of judging
# every new fact. A separate prompt and example, so the default prompt (and every cached call made
# with it) is unchanged.
HELD_PROMPT = (
    "\nMemory lists facts already held, numbered. clash: the number of the Memory fact that this fact "
    "changes, reverses or rules out (both cannot be true now), else 0. Do not repeat Memory facts."
)
HELD_FEW_SHOT: list[dict[str, str]] = [
    {"role": "user", "content": (
        "Session date: 2023-05-08\nMemory:\n1. Jon has one cat\n2. Jon teaches math at Lincoln High\n"
        "Message from Jon: Hey! We adopted a second cat last week, and I started coaching the chess club.")},
    {"role": "assistant", "content": (
        '{"facts":[{"fact":"Jon adopted a second cat last week","type":"event","who":"Jon","attr":"number of cats","value":"2",'
        '"when":"last week","cert":"stated","spec":"exact","clash":1},{"fact":"Jon coaches the chess club","type":"persona",'
        '"who":"Jon","attr":"hobby","value":"chess club coach","when":"","cert":"stated","spec":"exact","clash":0}]}'
    )},
    FEW_SHOT[2],
    FEW_SHOT[3],
]


# Write-cost variant (``turns_per_call`` > 1): several consecutive messages in one call,
# numbered, and each fact names its message ("msg"), so the facts can be split back to their turns.
# A separate prompt and example, so the default prompt and its cached calls are unchanged; both are
# constant, so llama.cpp caches this prefix too. The example holds FEW_SHOT's two messages (one with two
# facts, one with none) and a third with one fact: an example with one fact per message taught the 1.5B
# model to write about one fact per message (53 facts extracted on the quickstart against
# the single-turn prompt's 87; docs/results_history.md, "MOSAIC's write cost").
GROUP_SYSTEM_PROMPT = (
    "Extract facts worth remembering from numbered chat messages. Reply with compact one-line JSON. "
    "At most {max_entities} facts per message; none for greetings, thanks or small talk.\n"
    "msg: the number of the message the fact comes from. " + FIELD_RULES
)
_JON = FEW_SHOT[0]["content"].split("Message from Jon: ", 1)[1]  # FEW_SHOT's two messages, numbered 1 and 2
_ANA = FEW_SHOT[2]["content"].split("Message from Ana: ", 1)[1]
_ANA_FACT = {"fact": "Ana's sister moved to Denver in March", "type": "relationship", "who": "Ana", "attr": "sister's city", "value": "Denver",
             "when": "in March", "cert": "stated", "spec": "exact"}  # fmt: skip
GROUP_FEW_SHOT: list[dict[str, str]] = [
    {"role": "user", "content": (
        f"Session date: 2023-05-08\nMessage 1 from Jon: {_JON}\nMessage 2 from Ana: {_ANA}\n"
        "Message 3 from Ana: My sister moved to Denver in March.")},
    {"role": "assistant", "content": json.dumps({"facts": [
        *({"msg": 1, **fact} for fact in json.loads(FEW_SHOT[1]["content"])["facts"]), {"msg": 3, **_ANA_FACT}]}, separators=(",", ":"))},
]


def extraction_schema(max_entities: int, held_facts: int = 0) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "object",
        "properties": {
            "fact": {"type": "string"},
            "type": {"type": "string", "enum": list(ENTITY_TYPES)},
            "who": {"type": "string"},
            "attr": {"type": "string"},
            "value": {"type": "string"},
            "when": {"type": "string"},
            "cert": {"type": "string", "enum": list(DIRECTNESS)},
            "spec": {"type": "string", "enum": list(SPECIFICITY)},
        },
        "required": list(FIELDS),
    }
    if held_facts > 0:
        item["properties"]["clash"] = {"type": "integer", "minimum": 0, "maximum": held_facts}
        item["required"] = [*FIELDS, "clash"]
    return {
        "type": "object",
        "properties": {"facts": {"type": "array", "items": item, "maxItems": max_entities}},
        "required": ["facts"],
    }


def rows_extraction_schema(max_entities: int) -> dict[str, Any]:
    """``extraction_schema`` for ``output_format="rows"``: each fact a list of exactly len(FIELDS) values
    (JSON Schema's ``prefixItems``, which llama.cpp's and vLLM's grammar builders turn into a fixed tuple)."""
    schema = extraction_schema(max_entities)
    facts = schema["properties"]["facts"]
    fields = facts["items"]["properties"]
    facts["items"] = {"type": "array", "prefixItems": [fields[name] for name in FIELDS], "minItems": len(FIELDS), "maxItems": len(FIELDS)}
    return schema


def group_extraction_schema(max_entities: int, n_messages: int) -> dict[str, Any]:
    """``extraction_schema`` for ``n_messages`` numbered messages: each fact names its message
    ("msg", 1..n_messages, asked first so the fact is written for a chosen message), and the array
    holds ``max_entities`` facts per message."""
    schema = extraction_schema(max_entities * n_messages)
    item = schema["properties"]["facts"]["items"]
    item["properties"] = {"msg": {"type": "integer", "minimum": 1, "maximum": n_messages}, **item["properties"]}
    item["required"] = ["msg", *FIELDS]
    return schema


def from_row(row: Any) -> Any:
    """A rows-format fact (a list of FIELDS' values in order) as the fact object ``_clean`` reads; a list of
    another length or anything else is passed on unchanged, for ``_clean`` to drop and count."""
    if isinstance(row, list) and len(row) == len(FIELDS):
        return dict(zip(FIELDS, row))
    return row
