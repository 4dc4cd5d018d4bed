"""LoCoMo's file: typed records, the loader (every problem one error naming file and field), evidence-id
fixes, the category conventions, and the slice of it a run asks (conversations, sessions, questions).

Oracle facts: each session's ``observation`` facts (LoCoMo's gold per-speaker facts with their
``D<session>:<turn>`` evidence ids) are kept on ``Session.observations`` and ride on the turn they cite
(``Session.oracle_turns``), for MOSAIC's oracle extractor and rag over oracle facts (docs/halumem.md).

Two category conventions exist (see DESIGN.md); the convention is a config value, stored in
the metrics and printed in every table. Category 5 (adversarial) is excluded by default.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from core.api import HarnessError, OracleFact, Turn
from core.config_check import ConfigKeyError

CONVENTIONS: dict[str, dict[int, str]] = {
    "locomo": {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"},
    "mem0": {1: "single-hop", 2: "temporal", 3: "multi-hop", 4: "open-domain", 5: "adversarial"},
}
# Category 5 has no gold answer (only a trap answer); LoCoMo grades it against this phrase.
ADVERSARIAL_GOLD = "Not mentioned in the conversation"
SESSION_TIME_FORMAT = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"


class LoCoMoFormatError(HarnessError, ValueError):
    """The dataset file is missing or malformed; the message names the file and the field or line."""


# -- data --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Question:
    key: str  # "<sample_id>:q<index in the file's qa list>", stable under any slicing
    sample_id: str
    index: int
    question: str
    answer: str
    category: int
    evidence: tuple[str, ...]
    adversarial_answer: str | None = None


@dataclass(frozen=True)
class Session:
    number: int
    time_iso: str
    turns: tuple[Turn, ...]
    observations: tuple[OracleFact, ...] = ()  # the sample's session_<N>_observation facts (gold), in file order

    def oracle_turns(self) -> list[Turn]:
        """The turns with each observation attached to the first turn of this session it cites (else the last turn)."""
        ids = {turn.turn_id for turn in self.turns}
        attached: dict[str, list[OracleFact]] = {}
        for fact in self.observations:
            home = next((t for t in fact.source_turn_ids if t in ids), self.turns[-1].turn_id if self.turns else None)
            if home is not None:
                attached.setdefault(home, []).append(fact)
        return [dataclasses.replace(t, oracle_facts=tuple(attached[t.turn_id])) if t.turn_id in attached else t for t in self.turns]


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    position: int
    speakers: tuple[str, str]
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]
    evidence_fixes: int = 0  # evidence ids we had to normalise ("D:11:26" -> "D11:26")


def _need(container: Any, name: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(container, dict) or name not in container:
        raise LoCoMoFormatError(f"{where}.{name}: missing")
    value = container[name]
    if not isinstance(value, kind):
        expected = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise LoCoMoFormatError(f"{where}.{name}: expected {expected}, got {type(value).__name__}")
    return value


def parse_session_time(raw: str, where: str) -> str:
    """LoCoMo's "1:56 pm on 8 May, 2023" -> ISO "2023-05-08T13:56:00"."""
    try:
        return datetime.strptime(raw.strip(), SESSION_TIME_FORMAT).isoformat()
    except ValueError as err:
        raise LoCoMoFormatError(f"{where}: cannot parse date-time {raw!r} (expected like '1:56 pm on 8 May, 2023')") from err


_EVIDENCE_ID = re.compile(r"D:?(\d+):(\d+)")


def normalise_evidence(raw: list[Any]) -> tuple[tuple[str, ...], int]:
    """Pull ``D<session>:<turn>`` ids out of the evidence strings; count entries that needed fixing.

    The public file has a few irregular entries ("D8:6; D9:17", "D:11:26", "D30:05", "D").
    """
    ids: list[str] = []
    fixes = 0
    for entry in raw:
        found = [f"D{int(s)}:{int(t)}" for s, t in _EVIDENCE_ID.findall(str(entry))]
        fixes += int(found != [str(entry)])
        ids.extend(i for i in found if i not in ids)
    return tuple(ids), fixes


def image_text(turn: dict[str, Any]) -> str:
    """Turn text, with the shared image's BLIP caption appended when the turn has one."""
    caption = turn.get("blip_caption")
    return f"{turn['text']} [shares image: {caption}]" if caption else turn["text"]


def _parse_observations(observation: Any, number: int, where: str) -> tuple[OracleFact, ...]:
    """``observation.session_<N>_observation``: {speaker: [[fact, evidence id(s)], ...]} -> oracle facts, in file order."""
    raw = observation.get(f"session_{number}_observation") if isinstance(observation, dict) else None
    if raw is None:
        return ()
    at = f"{where}.observation.session_{number}_observation"
    if not isinstance(raw, dict):
        raise LoCoMoFormatError(f"{at}: expected an object of speaker -> facts, got {type(raw).__name__}")
    facts = []
    for speaker, entries in raw.items():
        if not isinstance(entries, list):
            raise LoCoMoFormatError(f"{at}.{speaker}: expected a list of [fact, evidence], got {type(entries).__name__}")
        for i, entry in enumerate(entries):
            if not (isinstance(entry, list) and len(entry) >= 1 and isinstance(entry[0], str)):
                raise LoCoMoFormatError(f"{at}.{speaker}[{i}]: expected [fact text, evidence id(s)]")
            evidence, _ = normalise_evidence(entry[1] if len(entry) > 1 and isinstance(entry[1], list) else entry[1:])
            facts.append(OracleFact(fact_id=f"session_{number}:obs{len(facts)}", text=entry[0], subject=str(speaker), source_turn_ids=evidence))
    return tuple(facts)


def _parse_sessions(conv: dict[str, Any], where: str, observation: Any = None) -> tuple[Session, ...]:
    numbers = sorted(int(m.group(1)) for key in conv if (m := re.fullmatch(r"session_(\d+)", key)))
    sessions = []
    for number in numbers:
        raw_time = _need(conv, f"session_{number}_date_time", str, where)
        time_iso = parse_session_time(raw_time, f"{where}.session_{number}_date_time")
        turns = []
        for i, raw in enumerate(_need(conv, f"session_{number}", list, where)):
            turn_where = f"{where}.session_{number}[{i}]"
            for name in ("speaker", "dia_id", "text"):
                _need(raw, name, str, turn_where)
            turns.append(Turn(turn_id=raw["dia_id"], speaker=raw["speaker"], text=image_text(raw), session_time=time_iso))
        sessions.append(Session(number, time_iso, tuple(turns), _parse_observations(observation, number, where)))
    if not sessions:
        raise LoCoMoFormatError(f"{where}: no session_<N> lists")
    if not any(session.turns for session in sessions):
        raise LoCoMoFormatError(f"{where}: every session_<N> list is empty (nothing to remember, so every answer would be scored on no memory)")
    return tuple(sessions)


def _parse_question(raw: Any, sample_id: str, index: int, where: str) -> tuple[Question, int]:
    question = _need(raw, "question", str, where)
    if not question.strip():
        raise LoCoMoFormatError(f"{where}.question: empty (a question with no text cannot be asked or scored)")
    category = _need(raw, "category", int, where)
    if category not in (1, 2, 3, 4, 5):
        raise LoCoMoFormatError(f"{where}.category: expected 1..5, got {category}")
    evidence, fixes = normalise_evidence(_need(raw, "evidence", list, where))
    if category == 5:
        answer = raw.get("answer", ADVERSARIAL_GOLD)
    else:
        answer = _need(raw, "answer", (str, int, float), where)
        if not str(answer).strip():
            raise LoCoMoFormatError(f"{where}.answer: empty (category {category} is scored against its gold answer)")
    return (
        Question(f"{sample_id}:q{index}", sample_id, index, question, str(answer), category, evidence, raw.get("adversarial_answer")),
        fixes,
    )


def load_locomo(path: str | Path, content: bytes | None = None) -> list[Conversation]:
    """Parse the LoCoMo json (``content``: the file's bytes, already read and checked by the run); any problem
    raises one ``LoCoMoFormatError`` naming file and field/line."""
    path = Path(path)
    if content is None and not path.is_file():
        raise LoCoMoFormatError(f"{path}: LoCoMo file not found (get it with `python -m scripts.download_data`)")
    try:
        data = json.loads(path.read_text(encoding="utf-8") if content is None else content)
    except json.JSONDecodeError as err:
        raise LoCoMoFormatError(f"{path}: line {err.lineno} column {err.colno}: not valid JSON ({err.msg})") from err
    if not isinstance(data, list):
        raise LoCoMoFormatError(f"{path}: top level: expected a list of conversations, got {type(data).__name__}")
    conversations: list[Conversation] = []
    for position, sample in enumerate(data):
        where = f"{path}: [{position}]"
        sample_id = _need(sample, "sample_id", str, where)
        where = f"{path}: [{position}] ({sample_id})"
        if not sample_id.strip():
            raise LoCoMoFormatError(f"{where}.sample_id: empty (it names the conversation's rows and memory namespace)")
        twin = next((c.position for c in conversations if c.sample_id == sample_id), None)
        if twin is not None:  # rows are keyed and memories namespaced by sample_id: the second would reuse the first's
            raise LoCoMoFormatError(f"{where}.sample_id: {sample_id!r} is also the sample_id of [{twin}]; each conversation needs its own")
        conv = _need(sample, "conversation", dict, where)
        speakers = (_need(conv, "speaker_a", str, where + ".conversation"), _need(conv, "speaker_b", str, where + ".conversation"))
        sessions = _parse_sessions(conv, where + ".conversation", sample.get("observation"))
        parsed = [_parse_question(q, sample_id, i, f"{where}.qa[{i}]") for i, q in enumerate(_need(sample, "qa", list, where))]
        conversations.append(
            Conversation(sample_id, position, speakers, sessions, tuple(q for q, _ in parsed), sum(f for _, f in parsed))
        )
    return conversations


# -- slicing -----------------------------------------------------------------------------
@dataclass
class Episode:
    """One conversation as this run sees it: the sessions to ingest and the questions to ask."""

    conversation: Conversation
    sessions: tuple[Session, ...]
    questions: list[Question]

    @property
    def namespace(self) -> str:
        return f"locomo:{self.conversation.sample_id}"

    @property
    def question_time(self) -> str:
        return self.sessions[-1].time_iso


@dataclass
class SliceSpec:
    conversations: Sequence[int | str] | None = None  # indices or sample_ids; None = all
    max_sessions: int | None = None
    evidence_in_ingested_only: bool = False
    exclude_categories: Sequence[int] = (5,)
    max_questions: int | None = None


def config_problems(block: Any) -> list[str]:
    """The LoCoMo keys eval.config_checks cannot know (core.api.ChecksOwnConfig): ``conversations`` (indices or
    sample ids) and ``exclude_categories`` (the file's category numbers, both conventions), each as
    ``benchmark.<key>=<value>: must be ...``."""
    found = []
    conversations = block.get("conversations") if block is not None else None
    if conversations is not None:
        if isinstance(conversations, str) or not isinstance(conversations, Sequence) or not conversations:
            found.append(f"benchmark.conversations={conversations!r}: must be null (all) or a non-empty list of indices >= 0 / sample ids")
        else:
            bad = [c for c in conversations if isinstance(c, bool) or not (isinstance(c, str) or (isinstance(c, int) and c >= 0))]
            if bad:
                found.append(f"benchmark.conversations has {bad}: each must be an index >= 0 or a sample id such as conv-26")
    categories = block.get("exclude_categories") if block is not None else None
    if categories is not None:
        known = sorted(CONVENTIONS["locomo"])
        if isinstance(categories, str) or not isinstance(categories, Sequence) or any(isinstance(c, bool) or not isinstance(c, int) for c in categories):
            found.append(f"benchmark.exclude_categories={categories!r}: must be a list of category numbers, e.g. [5]")
        elif any(c not in known for c in categories):
            found.append(f"benchmark.exclude_categories={list(categories)!r}: LoCoMo's categories are {known}, e.g. [5]")
    return found


def pick_conversations(all_convs: list[Conversation], wanted: Sequence[int | str] | None) -> list[Conversation]:
    if wanted is None:
        return list(all_convs)
    by_id = {c.sample_id: c for c in all_convs}
    picked = []
    for item in [wanted] if isinstance(wanted, int | str) else wanted:
        if isinstance(item, int) and 0 <= item < len(all_convs):
            picked.append(all_convs[item])
        elif str(item) in by_id:
            picked.append(by_id[str(item)])
        else:
            raise ConfigKeyError(f"benchmark.conversations: {item!r} is neither an index below {len(all_convs)} nor a sample_id of the file "
                                 f"(it has {len(all_convs)} conversations); pick indices 0..{len(all_convs) - 1} or sample ids such as "
                                 f"{all_convs[0].sample_id if all_convs else 'conv-26'}")
    return picked


def slice_episodes(all_convs: list[Conversation], spec: SliceSpec) -> tuple[list[Episode], dict[str, int]]:
    """Apply the slice; return episodes and counts of what each filter removed (for the log/metrics)."""
    counts = {"questions_in_conversations": 0, "excluded_by_category": 0, "excluded_evidence_not_ingested": 0, "excluded_by_max_questions": 0}
    excluded = set(spec.exclude_categories or ())
    episodes, budget = [], spec.max_questions
    for conv in pick_conversations(all_convs, spec.conversations):
        sessions = conv.sessions[: spec.max_sessions] if spec.max_sessions else conv.sessions
        ingested_ids = {t.turn_id for s in sessions for t in s.turns}
        questions = []
        counts["questions_in_conversations"] += len(conv.questions)
        for q in conv.questions:
            if q.category in excluded:
                counts["excluded_by_category"] += 1
            elif spec.evidence_in_ingested_only and not (q.evidence and set(q.evidence) <= ingested_ids):
                counts["excluded_evidence_not_ingested"] += 1
            elif budget is not None and budget <= 0:
                counts["excluded_by_max_questions"] += 1
            else:
                questions.append(q)
                budget = None if budget is None else budget - 1
        if questions:
            episodes.append(Episode(conv, sessions, questions))
    counts["questions_selected"] = sum(len(e.questions) for e in episodes)
    counts["conversations_selected"] = len(episodes)
    counts["sessions_selected"] = sum(len(e.sessions) for e in episodes)
    return episodes, counts


def sample_positions(path: str | Path) -> dict[str, int]:
    """sample_id -> position in locomo10.json (the audit's conversation index)."""
    return {c.sample_id: c.position for c in load_locomo(path)}
