"""Typed entity extraction: one structured LLM call per turn (MOSAIC §3).

The LLM returns at most ``max_entities`` facts, each with a type (event / persona /
relationship), subject, attribute/value, the time phrase as said, and two confidence
factors as labels (directness, specificity). Everything a small model is bad at is done
here in Python instead: relative dates are resolved against the session date with
dateutil, the evidence span is the turn sentence that best overlaps the fact, and the
output is validated and cleaned, with every repair or drop counted in ``stats``.
The system prompt is fixed so llama.cpp can reuse its prompt cache across turns.

Write-cost variant (``turns_per_call`` > 1, off by default): ``extract_group`` extracts
several consecutive turns of one session in one call, each fact naming the message it comes from,
so that extraction costs fewer than one LLM call per turn (docs/results_history.md, "MOSAIC's write cost").
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dateutil import parser as date_parser
from dateutil.relativedelta import relativedelta

from core.api import LLMUsage, Turn
from core.llm import LLMClient, LLMError, LLMOutputError, own_usage, usage_since
from core.tally import Tally
from mosaic.entity import Entity
from mosaic.oracle import oracle_entity
from core.quantities import count_pattern, count_word

log = logging.getLogger(__name__)

ENTITY_TYPES = ("event", "persona", "relationship")
# Where a turn's entities come from: "model", the extraction LLM call (the paper's MOSAIC and every published
# row), or "oracle", the gold facts the benchmark attached to the turn (mosaic.oracle).
EXTRACTION_SOURCES = ("model", "oracle")
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
OUTPUT_FORMATS = ("objects", "rows")
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


# -- dates -----------------------------------------------------------------------------
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_COUNT = count_pattern(vague=True)  # "3", "three", "a few", "a couple of" (core.quantities)
_UNITS = {"day": "days", "week": "weeks", "month": "months", "year": "years"}
_SAME_DAY = ("today", "tonight", "this morning", "this afternoon", "this evening", "right now", "now", "currently")


@dataclass(frozen=True)
class ResolvedTime:
    """An absolute time: ``iso`` is YYYY-MM-DD, YYYY-MM, YYYY or 'week of YYYY-MM-DD'; ``human`` reads well in text."""

    iso: str
    human: str


def parse_session_time(session_time: str | None) -> datetime | None:
    """Session time as a datetime; LoCoMo's '1:56 pm on 8 May, 2023' and ISO both work."""
    if not session_time:
        return None
    try:
        return date_parser.parse(session_time, fuzzy=True)
    except (ValueError, OverflowError):
        return None


def _day(d: date) -> ResolvedTime:
    return ResolvedTime(d.isoformat(), f"on {d.day} {d:%B %Y}")


def _week(d: date) -> ResolvedTime:
    monday = d - timedelta(days=d.weekday())
    return ResolvedTime(f"week of {monday.isoformat()}", f"in the week of {monday.day} {monday:%B %Y}")


def _month(d: date) -> ResolvedTime:
    return ResolvedTime(f"{d:%Y-%m}", f"in {d:%B %Y}")


def _year(d: date) -> ResolvedTime:
    return ResolvedTime(f"{d:%Y}", f"in {d:%Y}")


def resolve_time(expression: str, session: datetime | None) -> ResolvedTime | None:
    """Turn a time phrase into an absolute time relative to the session date; None if it cannot.

    Relative phrases (yesterday, 3 days ago, last week, next Friday, last summer is not handled)
    need the session date; absolute ones (May 2022, 7 May 2023, 2021) are parsed with dateutil,
    keeping only the components the phrase actually gave.
    """
    phrase = " ".join(expression.lower().strip().strip(".").split())
    if not phrase:
        return None
    today = session.date() if session else None
    if today is not None:
        if phrase in _SAME_DAY:
            return _day(today)
        if phrase in ("yesterday", "last night", "yesterday evening", "yesterday morning"):
            return _day(today - timedelta(days=1))
        if phrase in ("the day before yesterday", "day before yesterday"):
            return _day(today - timedelta(days=2))
        if phrase == "tomorrow":
            return _day(today + timedelta(days=1))
        m = re.fullmatch(rf"(?:about |around )?({_COUNT}) (day|week|month|year)s? ago", phrase)
        if m and count_word(m.group(1), vague=True) is not None:
            n, unit = count_word(m.group(1), vague=True), m.group(2)
            when = today - relativedelta(**{_UNITS[unit]: n})
            return {"day": _day, "week": _week, "month": _month, "year": _year}[unit](when)
        m = re.fullmatch(rf"in ({_COUNT}) (day|week|month|year)s?", phrase)
        if m and count_word(m.group(1), vague=True) is not None:
            n, unit = count_word(m.group(1), vague=True), m.group(2)
            when = today + relativedelta(**{_UNITS[unit]: n})
            return {"day": _day, "week": _week, "month": _month, "year": _year}[unit](when)
        m = re.fullmatch(r"(last|this|next|past) (week|weekend|month|year)", phrase)
        if m:
            shift = {"last": -1, "past": -1, "this": 0, "next": 1}[m.group(1)]
            unit = m.group(2)
            if unit == "week":
                return _week(today + timedelta(weeks=shift))
            if unit == "weekend":
                saturday = today - timedelta(days=today.weekday()) + timedelta(days=5) + timedelta(weeks=shift)
                return ResolvedTime(f"weekend of {saturday.isoformat()}", f"on the weekend of {saturday.day} {saturday:%B %Y}")
            if unit == "month":
                return _month(today + relativedelta(months=shift))
            return _year(today + relativedelta(years=shift))
        m = re.fullmatch(r"(last|this|next|on) (" + "|".join(_WEEKDAYS) + r")", phrase)
        if m:
            target = _WEEKDAYS.index(m.group(2))
            if m.group(1) in ("last", "on"):
                back = (today.weekday() - target) % 7 or 7
                return _day(today - timedelta(days=back))
            if m.group(1) == "next":
                ahead = (target - today.weekday()) % 7 or 7
                return _day(today + timedelta(days=ahead))
            return _day(today - timedelta(days=today.weekday()) + timedelta(days=target))
    if not re.search(r"\d|" + "|".join(m.lower() for m in ("January", "February", "March", "April", "June", "July", "August", "September", "October", "November", "December")) + r"|\bmay\b", phrase):
        return None
    try:
        a = date_parser.parse(phrase, fuzzy=True, default=datetime(2000, 1, 1))
        b = date_parser.parse(phrase, fuzzy=True, default=datetime(2001, 2, 2))
    except (ValueError, OverflowError):
        return None
    has_year, has_month, has_day = a.year == b.year, a.month == b.month, a.day == b.day
    if not has_year and today is not None and has_month:
        a = a.replace(year=today.year)  # "on 7 May" said in a 2023 session means 2023
        has_year = True
    if has_year and has_month and has_day:
        return _day(a.date())
    if has_year and has_month:
        return _month(a.date())
    if has_year and not has_day:
        return _year(a.date())
    return None


# -- extraction ------------------------------------------------------------------------
_FIRST_PERSON = {"i", "me", "my", "myself", "mine", "we", "us", "our", "speaker", "user", "the speaker", "the user"}


def evidence_span(text: str, fact: str) -> str:
    """The sentence of ``text`` sharing most words with ``fact`` (the turn itself if it is one sentence)."""
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]
    if len(sentences) <= 1:
        return text.strip()
    fact_words = set(re.findall(r"[a-z0-9']+", fact.lower()))
    return max(sentences, key=lambda s: len(fact_words & set(re.findall(r"[a-z0-9']+", s.lower()))))


@dataclass
class ExtractionResult:
    entities: list[Entity] = field(default_factory=list)
    prerequisites: list[tuple[int, int]] = field(default_factory=list)  # (src index, dst index) into entities
    failures: int = 0
    # held_facts > 0: entity index -> index into the held facts shown, for each fact the LLM said clashes
    proposed_clashes: dict[int, int] = field(default_factory=dict)


class EntityExtractor:
    """One json_schema LLM call per turn -> validated, time-resolved Entities with their source turn id.

    ``held_facts`` > 0 (write-cost variant, off by default): the caller passes up to that many held
    facts nearest the turn, the prompt shows them, and each fact may name one it clashes with
    (``ExtractionResult.proposed_clashes``); a fact that restates a held one rather than the message
    is dropped like one copied from the previous message.

    ``turns_per_call`` > 1 (write-cost variant, off by default): the caller hands up to that many
    consecutive turns of one session to ``extract_group``, which extracts them in one LLM call.

    ``source="oracle"`` (the oracle-extractor study, off by default): no LLM call; a turn's entities are
    the gold facts attached to it (``Turn.oracle_facts``), built by mosaic.oracle's rules.

    ``concurrent_calls`` > 1 (speed): ``extract_ahead`` sends the calls of a session's turns
    that many at a time, so a server with several slots decodes them in one batch. Each call's request
    is the one ``extract`` sends (same prompt, same previous turn), so only the server's batching can
    change a reply; the caller still writes the turns one by one, in order.
    """

    def __init__(
        self,
        llm: LLMClient,
        max_entities: int = 3,
        max_tokens: int = 320,  # defaults = conf/system/mosaic.yaml (tests/unit/repo/test_code_defaults.py)
        context_chars: int = 200,
        max_fact_chars: int = 300,
        copy_margin: float = 0.5,
        held_facts: int = 0,
        turns_per_call: int = 1,
        source: str = "model",
        concurrent_calls: int = 1,
        output_format: str = "objects",
    ) -> None:
        self.llm = llm
        if source not in EXTRACTION_SOURCES:
            raise ValueError(f"extract.source={source!r} must be one of {list(EXTRACTION_SOURCES)} (model: the LLM call; oracle: the benchmark's gold facts)")
        self.source = source
        if source == "oracle" and held_facts:
            raise ValueError("extract.source=oracle and extract.held_facts > 0 cannot be combined: the clash proposal is part of the LLM call the oracle replaces")
        self.max_entities = int(max_entities)
        self.max_tokens = int(max_tokens)
        self.context_chars = int(context_chars)
        self.max_fact_chars = int(max_fact_chars)
        self.copy_margin = float(copy_margin)  # see copied_from_previous
        self.held_facts = int(held_facts)
        if self.held_facts < 0:
            raise ValueError(f"extract.held_facts={held_facts} must be >= 0 (0: the paper's extraction, no held facts shown)")
        self.turns_per_call = int(turns_per_call)
        if self.turns_per_call < 1:
            raise ValueError(f"extract.turns_per_call={turns_per_call} must be >= 1 (1: the paper's extraction, one call per turn)")
        if self.turns_per_call > 1 and self.held_facts:
            raise ValueError("extract.turns_per_call > 1 and extract.held_facts > 0 cannot be combined yet: the group prompt shows no held facts")
        self.concurrent_calls = int(concurrent_calls)
        if self.concurrent_calls < 1:
            raise ValueError(f"extract.concurrent_calls={concurrent_calls} must be >= 1 (1: one extraction call at a time)")
        if output_format not in OUTPUT_FORMATS:
            raise ValueError(f"extract.output_format={output_format!r} must be one of {list(OUTPUT_FORMATS)} (objects: named fields, the paper's; rows: positional lists, fewer generated tokens)")
        if output_format == "rows" and (self.held_facts or self.turns_per_call > 1):
            raise ValueError("extract.output_format=rows cannot be combined with extract.held_facts > 0 or extract.turns_per_call > 1 yet: their prompts name fields")
        self.output_format = output_format
        if output_format == "rows":
            self.system_prompt = ROWS_PROMPT.format(max_entities=self.max_entities)
            self.few_shot = ROWS_FEW_SHOT
            self.schema = rows_extraction_schema(self.max_entities)
        else:
            self.system_prompt = SYSTEM_PROMPT.format(max_entities=self.max_entities) + (HELD_PROMPT if self.held_facts else "")
            self.few_shot = HELD_FEW_SHOT if self.held_facts else FEW_SHOT
            self.schema = extraction_schema(self.max_entities, self.held_facts)
        self.stats = Tally((
            "turns", "calls_failed", "entities", "dropped_empty", "dropped_duplicate", "dropped_from_previous",
            "dropped_from_memory", "dropped_over_cap", "fixed_subject", "fixed_label", "times_resolved",
            "times_unresolved", "turns_with_held_facts", "proposed_clashes", "group_calls", "dropped_bad_msg",
            "oracle_facts",
        ))  # shared by namespaces that run.workers may write at once

    def messages(
        self, turn: Turn, session_time: str | None, previous: Turn | None, held: list[str] | None = None
    ) -> list[dict[str, str]]:
        session = parse_session_time(session_time)
        lines = [f"Session date: {session.date().isoformat() if session else (session_time or 'unknown')}"]
        if previous is not None and self.context_chars > 0:
            lines.append(f"Previous message ({previous.speaker}): {previous.text[: self.context_chars]}")
        if held:
            lines.append("Memory:")
            lines.extend(f"{i}. {text}" for i, text in enumerate(held, start=1))
        lines.append(f"Message from {turn.speaker}: {turn.text}")
        return [{"role": "system", "content": self.system_prompt}, *self.few_shot, {"role": "user", "content": "\n".join(lines)}]

    def can_extract_ahead(self) -> bool:
        """Whether a turn's extraction depends only on the turn and the one before it (not on memory), so the
        calls of a session can be made before its turns are written: one turn per call, no held facts shown."""
        return self.concurrent_calls > 1 and self.source == "model" and self.turns_per_call == 1 and self.held_facts == 0

    def extract_ahead(self, jobs: list[tuple[Turn, str | None, Turn | None]]) -> list[tuple[ExtractionResult, LLMUsage]]:
        """``extract(turn, session_time, previous)`` for each job, ``concurrent_calls`` calls at a time, results in
        job order, each with the usage its call metered (made on a pool thread, which the caller's per-thread
        meter does not see)."""

        def one(job: tuple[Turn, str | None, Turn | None]) -> tuple[ExtractionResult, LLMUsage]:
            turn, session_time, previous = job
            before = own_usage(self.llm)
            result = self.extract(turn, session_time, previous=previous)
            return result, usage_since(before, own_usage(self.llm))

        with ThreadPoolExecutor(max_workers=self.concurrent_calls, thread_name_prefix="extract-ahead") as pool:
            return list(pool.map(one, jobs))

    def extract(
        self, turn: Turn, session_time: str | None = None, previous: Turn | None = None, held: list[str] | None = None
    ) -> ExtractionResult:
        """Entities of one turn; an LLM failure yields no entities and one counted failure.

        ``held``: texts of held facts to show (only with ``held_facts`` > 0; at most that many are shown)."""
        self.stats.add("turns")
        session_time = session_time or turn.session_time
        if self.source == "oracle":
            return self._from_oracle(turn, session_time)
        held = list(held or [])[: self.held_facts]
        if held:
            self.stats.add("turns_with_held_facts")
        try:
            raw = self.llm.chat_json(self.messages(turn, session_time, previous, held), self.schema, max_tokens=self.max_tokens, purpose="extraction")
            facts = raw["facts"] if isinstance(raw, dict) else None
            if not isinstance(facts, list):
                raise LLMOutputError(f"extraction output has no 'facts' list: {str(raw)[:200]!r}")
        except (LLMOutputError, LLMError) as err:
            self.stats.add("calls_failed")
            log.warning("extraction failed for turn %s: %s", turn.turn_id, err)
            return ExtractionResult(failures=1)
        if self.output_format == "rows":
            facts = [from_row(fact) for fact in facts]
        return self._clean(facts, turn, session_time, previous, held)

    def group_messages(self, turns: list[Turn], session_time: str | None, previous: Turn | None) -> list[dict[str, str]]:
        """The group prompt: a fixed prefix (system + example) for the prompt cache, then the numbered messages."""
        session = parse_session_time(session_time)
        lines = [f"Session date: {session.date().isoformat() if session else (session_time or 'unknown')}"]
        if previous is not None and self.context_chars > 0:
            lines.append(f"Previous message ({previous.speaker}): {previous.text[: self.context_chars]}")
        lines.extend(f"Message {i} from {turn.speaker}: {turn.text}" for i, turn in enumerate(turns, start=1))
        system = GROUP_SYSTEM_PROMPT.format(max_entities=self.max_entities)
        return [{"role": "system", "content": system}, *GROUP_FEW_SHOT, {"role": "user", "content": "\n".join(lines)}]

    def extract_group(self, turns: list[Turn], session_time: str | None = None, previous: Turn | None = None) -> list[ExtractionResult]:
        """Entities of consecutive turns of one session, one result per turn in order, from ONE LLM call
        (a write-cost lever: fewer extraction calls per ingested turn; docs/results_history.md, "MOSAIC's write cost").

        One turn is exactly ``extract`` (same prompt). Each fact names its message; one with a missing or
        out-of-range number is dropped (``dropped_bad_msg``). Each turn's facts are then cleaned as ``extract``
        cleans them, with the turn before it as the previous message (``previous`` for the first), so a fact
        of message 2 that restates message 1 is dropped, and at most ``max_entities`` are kept per turn.
        An LLM failure yields one result with ``failures=1`` per turn and one counted failed call."""
        if len(turns) <= 1 or self.source == "oracle":
            return [self.extract(turn, session_time, previous=previous if i == 0 else turns[i - 1]) for i, turn in enumerate(turns)]
        self.stats.add("turns", len(turns))
        self.stats.add("group_calls")
        prompt_time = session_time or turns[0].session_time
        schema = group_extraction_schema(self.max_entities, len(turns))
        try:
            raw = self.llm.chat_json(
                self.group_messages(turns, prompt_time, previous), schema, max_tokens=self.max_tokens * len(turns), purpose="extraction"
            )
            facts = raw["facts"] if isinstance(raw, dict) else None
            if not isinstance(facts, list):
                raise LLMOutputError(f"extraction output has no 'facts' list: {str(raw)[:200]!r}")
        except (LLMOutputError, LLMError) as err:
            self.stats.add("calls_failed")
            log.warning("extraction failed for turns %s: %s", ", ".join(t.turn_id for t in turns), err)
            return [ExtractionResult(failures=1) for _ in turns]
        per_turn: list[list[Any]] = [[] for _ in turns]
        for fact in facts:
            index = _clash_index(fact.get("msg"), len(turns)) if isinstance(fact, dict) else None  # 1-based number -> index
            if index is None:
                self.stats.add("dropped_bad_msg")
                continue
            per_turn[index].append(fact)
        return [
            self._clean(per_turn[i], turn, session_time or turn.session_time, previous if i == 0 else turns[i - 1])
            for i, turn in enumerate(turns)
        ]

    def _from_oracle(self, turn: Turn, session_time: str | None) -> ExtractionResult:
        """The gold facts attached to ``turn`` as entities (mosaic.oracle), in the benchmark's order; no LLM call."""
        session = parse_session_time(session_time)
        said_at = session.isoformat() if session is not None else session_time
        result = ExtractionResult()
        for fact in turn.oracle_facts:
            text = " ".join(fact.text.split())
            if not text:
                self.stats.add("dropped_empty")
                continue
            position = len(result.entities)
            evidence = evidence_span(turn.text, text) if turn.turn_id in fact.source_turn_ids else ""
            result.entities.append(oracle_entity(fact, turn, said_at, _entity_id(turn, position, text), evidence))
        result.prerequisites = prerequisite_pairs(result.entities)
        self.stats.add("oracle_facts", len(result.entities))
        self.stats.add("entities", len(result.entities))
        return result

    def _clean(
        self, facts: list[Any], turn: Turn, session_time: str | None, previous: Turn | None = None, held: list[str] | None = None
    ) -> ExtractionResult:
        result = ExtractionResult()
        session = parse_session_time(session_time)
        # ISO session time, so that "newer" is a plain string comparison for the conflict policy
        said_at = session.isoformat() if session is not None else session_time
        seen: set[str] = set()
        for raw in facts:
            if len(result.entities) >= self.max_entities:
                self.stats.add("dropped_over_cap")
                continue
            if not isinstance(raw, dict):
                self.stats.add("dropped_empty")
                result.failures += 1
                continue
            text = " ".join(str(raw.get("fact", "")).split())[: self.max_fact_chars]
            if len(text) < 3:
                self.stats.add("dropped_empty")
                continue
            if previous is not None and copied_from_previous(text, turn.text, previous.text, self.copy_margin):
                # the previous message is shown for context ("yes, I did"); a fact that restates it
                # belongs to that turn (which has its own extraction), not to this one
                self.stats.add("dropped_from_previous")
                continue
            if held and copied_from_previous(text, turn.text, " ".join(held), self.copy_margin):
                # a held fact shown for the clash proposal, repeated rather than said in this message
                self.stats.add("dropped_from_memory")
                continue
            key = text.lower()
            if key in seen:
                self.stats.add("dropped_duplicate")
                continue
            seen.add(key)
            subject = " ".join(str(raw.get("who", "")).split())
            if not subject or subject.lower() in _FIRST_PERSON:
                subject = turn.speaker
                self.stats.add("fixed_subject")
            etype = str(raw.get("type", "")).lower()
            directness, specificity = str(raw.get("cert", "")).lower(), str(raw.get("spec", "")).lower()
            if etype not in ENTITY_TYPES or directness not in DIRECTNESS or specificity not in SPECIFICITY:
                self.stats.add("fixed_label")
            etype = etype if etype in ENTITY_TYPES else "event"
            resolved = None
            when = " ".join(str(raw.get("when", "")).split())
            if when:
                resolved = resolve_time(when, session)
                self.stats.add("times_resolved" if resolved else "times_unresolved")
                if resolved is not None:
                    text = re.sub(re.escape(when), resolved.human, text, count=1, flags=re.IGNORECASE)
                elif when.lower() not in turn.text.lower():
                    when = ""  # not copied from the message (a small model writes "previous message"): drop it
            index = len(result.entities)
            clash = _clash_index(raw.get("clash"), len(held or []))
            if clash is not None:
                result.proposed_clashes[index] = clash
                self.stats.add("proposed_clashes")
            result.entities.append(
                Entity(
                    entity_id=_entity_id(turn, index, text),
                    text=text,
                    type=etype,  # type: ignore[arg-type]
                    subject=subject,
                    attribute=" ".join(str(raw.get("attr", "")).split())[:80],
                    value=" ".join(str(raw.get("value", "")).split())[:120],
                    time=resolved.iso if resolved else (when or None),
                    evidence=evidence_span(turn.text, text),
                    source_turn_ids=[turn.turn_id],
                    session_time=said_at,
                    directness=DIRECTNESS.get(directness, 0.6),
                    consistency=1.0,
                    specificity=SPECIFICITY.get(specificity, 0.6),
                )
            )
        result.prerequisites = prerequisite_pairs(result.entities)
        self.stats.add("entities", len(result.entities))
        return result


_STOPWORDS = frozenset(
    "the and for are was were has have had with that this from they them their his her its our your you she him "
    "who what when where which will would can could should may might not but all any per into onto than then there "
    "also just very about after before over under more most less least".split()
)


def content_words(text: str) -> set[str]:
    """Lower-cased words of 3+ letters and every token with a digit, without common function words."""
    tokens = re.findall(r"[a-z]+|[\w./%$]*\d[\w./%$]*", text.lower())
    return {t for t in tokens if (len(t) >= 3 or any(c.isdigit() for c in t)) and t not in _STOPWORDS}


def copied_from_previous(fact: str, message: str, previous: str, margin: float = 0.5) -> bool:
    """True when ``fact`` says what ``previous`` said rather than what ``message`` says: the share
    of its content words found in the previous message exceeds the share found in this one by
    ``margin`` or more."""
    words = content_words(fact)
    if not words:
        return False
    here = len(words & content_words(message)) / len(words)
    there = len(words & content_words(previous)) / len(words)
    return there - here >= margin


def prerequisite_pairs(entities: list[Entity]) -> list[tuple[int, int]]:
    """Logical dependency inside one turn: facts about a subject depend on that subject's first
    persona/relationship fact (who someone is comes before what they did), else on its first fact."""
    pairs: list[tuple[int, int]] = []
    by_subject: dict[str, list[int]] = {}
    for i, e in enumerate(entities):
        by_subject.setdefault(e.subject.lower(), []).append(i)
    for indices in by_subject.values():
        if len(indices) < 2:
            continue
        anchors = [i for i in indices if entities[i].type != "event"]
        root = anchors[0] if anchors else indices[0]
        pairs.extend((root, i) for i in indices if i != root)
    return pairs


def from_row(row: Any) -> Any:
    """A rows-format fact (a list of FIELDS' values in order) as the fact object ``_clean`` reads; a list of
    another length or anything else is passed on unchanged, for ``_clean`` to drop and count."""
    if isinstance(row, list) and len(row) == len(FIELDS):
        return dict(zip(FIELDS, row))
    return row


def _clash_index(raw: Any, n_held: int) -> int | None:
    """0-based index of the held fact a "clash" field names (1..n_held), None for 0, junk or out of range
    (also used for a group fact's "msg", 1..number of messages)."""
    try:
        number = int(raw)
    except (TypeError, ValueError):
        return None
    return number - 1 if 1 <= number <= n_held else None


def _entity_id(turn: Turn, index: int, text: str) -> str:
    digest = hashlib.sha1(f"{turn.turn_id}\x00{turn.text}\x00{index}\x00{text}".encode()).hexdigest()[:10]
    return f"e-{turn.turn_id}-{index}-{digest}"
