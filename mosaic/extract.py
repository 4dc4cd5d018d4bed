"""Typed entity extraction: one structured LLM call per turn (MOSAIC §3).

The LLM returns at most ``max_entities`` facts, each with a type (event / persona /
relationship), subject, attribute/value, the time phrase as said, and two confidence
factors as labels (directness, specificity). Everything a small model is bad at is done
here in Python instead: relative dates are resolved against the session date with
dateutil, the evidence span is the turn sentence that best overlaps the fact, and the
output is validated and cleaned, with every repair or drop counted in ``stats``.
The prompts and reply schemas are mosaic.extract_prompts', the reading of time phrases mosaic.relative_time's.

Write-cost variant (``turns_per_call`` > 1, off by default): ``extract_group`` extracts
several consecutive turns of one session in one call, each fact naming the message it comes from,
so that extraction costs fewer than one LLM call per turn (docs/results_history.md, "MOSAIC's write cost").
"""

from __future__ import annotations

import hashlib
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from core.api import LLMUsage, Turn
from core.config_check import Count, Share, Size
from core.llm import LLMClient, LLMError, LLMOutputError, own_usage, usage_since
from core.tally import Tally
from mosaic.entity import Entity
from mosaic.extract_prompts import (
    DIRECTNESS,
    ENTITY_TYPES,
    FEW_SHOT,
    GROUP_FEW_SHOT,
    GROUP_SYSTEM_PROMPT,
    HELD_FEW_SHOT,
    HELD_PROMPT,
    OutputFormat,
    ROWS_FEW_SHOT,
    ROWS_PROMPT,
    SPECIFICITY,
    SYSTEM_PROMPT,
    extraction_schema,
    from_row,
    group_extraction_schema,
    rows_extraction_schema,
)
from mosaic.oracle import oracle_entity
from mosaic.relative_time import parse_session_time, resolve_time

log = logging.getLogger(__name__)

# Where a turn's entities come from: "model", the extraction LLM call (the paper's MOSAIC and every published
# row), or "oracle", the gold facts the benchmark attached to the turn (mosaic.oracle).
ExtractionSource = Literal["model", "oracle"]


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

    oracle_source_parameter = "source"  # source=oracle reads the benchmark's gold facts (core.api.ReadsOracleFacts)

    def __init__(
        self,
        llm: LLMClient,
        max_entities: Count = 3,  # entities kept per turn (the schema's maxItems); 0 would pay every call and store nothing
        max_tokens: Count = 320,  # defaults = conf/system/mosaic.yaml (tests/unit/repo/test_code_defaults.py)
        context_chars: Size = 200,
        max_fact_chars: Count = 300,
        copy_margin: Share = 0.5,
        held_facts: Size = 0,
        turns_per_call: Count = 1,
        source: ExtractionSource = "model",
        concurrent_calls: Count = 1,
        output_format: OutputFormat = "objects",
    ) -> None:
        self.llm = llm
        # types and ranges are checked from the signature (core.config_check), combinations by mosaic.settings
        self.source = source
        self.max_entities = int(max_entities)
        self.max_tokens = int(max_tokens)
        self.context_chars = int(context_chars)
        self.max_fact_chars = int(max_fact_chars)
        self.copy_margin = float(copy_margin)  # see copied_from_previous
        self.held_facts = int(held_facts)
        self.turns_per_call = int(turns_per_call)
        self.concurrent_calls = int(concurrent_calls)
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
