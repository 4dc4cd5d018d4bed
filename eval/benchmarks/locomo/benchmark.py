"""LoCoMo (Maharana et al. 2024): long conversations, questions per category, evidence dia_ids.

Three resumable stages inside ``run``: ingest (each session through ``system.add``), predict
(``system.search`` + the shared answerer, one row per question) and score (LLM judge, one
row per question). Rows are appended as they are produced; a rerun skips finished work and
never re-ingests a conversation whose questions are all predicted.

Oracle runs (``oracle_facts``, issue 39): each session's ``observation`` facts (LoCoMo's gold
per-speaker facts with their ``D<session>:<turn>`` evidence ids) ride on the turn they cite as
``Turn.oracle_facts``, for MOSAIC's oracle extractor and rag over oracle facts (docs/halumem.md).

Two category conventions exist (see DESIGN.md); the convention is a config value, stored in
the metrics and printed in every table. Category 5 (adversarial) is excluded by default.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from core.atomic import write_json_atomic
from eval.benchmarks.locomo.audit import GOLD_MODES, load_errata, score_changing_positions
from eval.context import JsonlRows, RunContext
from eval.rows import SCORED_ROW_FIELD, read_rows, row_sha256, scores
from eval.benchmarks.locomo.judge_calibration import load_calibration, summary_cell
from eval.metrics import bleu1, bootstrap_ci, evidence_recall, format_ci, percentiles, set_f1_mem0, token_f1
from eval.tables import FAILURES_COLUMN, failures_cell, format_pair, is_paper_configuration, row_label
from eval.workers import Progress, Stage, SystemGuard, in_worker, run_stage
from core.llm import own_usage, usage_since
from core.api import AddReport, HarnessError, LLMUsage, MemorySystem, OracleFact, ReportsMetrics, Turn
from core.config_check import ConfigKeyError

CONVENTIONS: dict[str, dict[int, str]] = {
    "locomo": {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"},
    "mem0": {1: "single-hop", 2: "temporal", 3: "multi-hop", 4: "open-domain", 5: "adversarial"},
}
LABEL_ORDER = ["single-hop", "multi-hop", "temporal", "open-domain", "adversarial"]
# Category 5 has no gold answer (only a trap answer); LoCoMo grades it against this phrase.
ADVERSARIAL_GOLD = "Not mentioned in the conversation"
SESSION_TIME_FORMAT = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"

# Values copied from the MOSAIC paper's Table 1 (overall LLM-judge accuracy, %). Shown only in
# the table's separately labelled "paper (reported)" column; never mixed with our runs.
PAPER_REPORTED_OVERALL_JUDGE: dict[str, float] = {"mosaic": 89.35, "mem0": 62.14}


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
    return tuple(sessions)


def _parse_question(raw: Any, sample_id: str, index: int, where: str) -> tuple[Question, int]:
    question = _need(raw, "question", str, where)
    category = _need(raw, "category", int, where)
    if category not in (1, 2, 3, 4, 5):
        raise LoCoMoFormatError(f"{where}.category: expected 1..5, got {category}")
    evidence, fixes = normalise_evidence(_need(raw, "evidence", list, where))
    if category == 5:
        answer = raw.get("answer", ADVERSARIAL_GOLD)
    else:
        answer = _need(raw, "answer", (str, int, float), where)
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
    conversations = []
    for position, sample in enumerate(data):
        where = f"{path}: [{position}]"
        sample_id = _need(sample, "sample_id", str, where)
        where = f"{path}: [{position}] ({sample_id})"
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


# -- stages --------------------------------------------------------------------------------
def _usage(llm: Any) -> LLMUsage:
    """The client's usage so far; in a worker thread (run.workers > 1), that thread's own calls only.
    Outside workers the totals, since a library (Mem0) may make its calls from threads of its own."""
    if in_worker():
        return own_usage(llm)
    return llm.usage if hasattr(llm, "usage") else LLMUsage()


def ingest(
    system: MemorySystem, episode: Episode, ctx: RunContext, bar: tqdm, sessions: Progress | None = None,
    session_rows: JsonlRows | None = None, oracle_facts: bool = False,
) -> dict[str, Any]:
    """Reset the namespace and add each session; return the ingest row (AddReport totals).
    ``sessions`` is told each session done (the logger's ``ingest`` progress); ``session_rows`` gets one
    row per session the first time it is added (``session_row``), so a run killed in a long ingest still
    says what each finished session cost (research/ingest_cost.py). ``oracle_facts``: the turns carry the
    session's observation facts (``Session.oracle_turns``)."""
    system.reset(episode.namespace)
    total = AddReport()
    before = _usage(ctx.llm)
    latencies = []
    for session in episode.sessions:
        started = time.perf_counter()
        session_before = _usage(ctx.llm)
        turns = session.oracle_turns() if oracle_facts else list(session.turns)
        report = system.add(episode.namespace, turns, session.time_iso)
        latencies.append(time.perf_counter() - started)
        total.merge(report)
        key = f"{episode.conversation.sample_id}:session_{session.number}"
        if session_rows is not None and key not in session_rows:
            session_rows.append(session_row(key, session, report, latencies[-1], usage_since(session_before, _usage(ctx.llm))))
        bar.update(1)
        if sessions is not None:
            sessions.tick()
    return {
        "key": episode.conversation.sample_id,
        "sessions": len(episode.sessions),
        "n_turns": total.n_turns or sum(len(s.turns) for s in episode.sessions),
        "stored": len(total.stored),
        "updated": len(total.updated),
        "rejected": len(total.rejected),
        "flagged": len(total.flagged),
        "queued": len(total.queued),
        "failures": total.failures,
        "usage_reported": total.usage.__dict__,
        "usage_metered": usage_since(before, _usage(ctx.llm)).__dict__,
        "add_latency_s": latencies,
    }


@dataclass
class Search:
    """What ``system.search`` returned for one question, how long it took and what it spent."""

    retrieved: list[Any]
    seconds: float
    tokens: int


def search(system: MemorySystem, episode: Episode, question: Question, ctx: RunContext, top_k: int) -> Search:
    before = _usage(ctx.llm)
    started = time.perf_counter()
    retrieved = system.search(episode.namespace, question.question, top_k)
    seconds = time.perf_counter() - started
    spent = usage_since(before, _usage(ctx.llm))
    return Search(retrieved, seconds, spent.prompt_tokens + spent.completion_tokens)


def searches_in_order(
    system: MemorySystem, episode: Episode, pending: list[Question], ctx: RunContext, top_k: int
) -> dict[str, Search]:
    """The searches of ``pending``, for a system whose search changes its own state (``parallel_search``
    false: MOSAIC's continuity term remembers the previous query), made in question order.

    Why every earlier question is searched again, its result dropped: a resumed run has some of the
    episode's questions answered already, and the state an uninterrupted run would have before the first
    pending one comes from the search of the question before it. Replaying the searches (no answer, no
    judgement; an LLM routing call is served from the response cache) makes a resumed run's retrievals,
    and its retrieval counters, those of a run that was never killed."""
    wanted = {q.key for q in pending}
    last = max(i for i, q in enumerate(episode.questions) if q.key in wanted)
    found: dict[str, Search] = {}
    for question in episode.questions[: last + 1]:
        result = search(system, episode, question, ctx, top_k)
        if question.key in wanted:
            found[question.key] = result
    return found


def predict(system: MemorySystem, episode: Episode, question: Question, ctx: RunContext, top_k: int, found: Search | None = None) -> dict[str, Any]:
    """Search (unless ``found`` is given), then the shared answerer; the row records what was retrieved, latency and tokens."""
    found = found or search(system, episode, question, ctx, top_k)
    retrieved, search_s = found.retrieved, found.seconds
    answer = ctx.answerer.answer(question.question, retrieved, question_time=episode.question_time)
    retrieved_ids = [tid for item in retrieved for tid in item.source_turn_ids]
    return {
        "key": question.key,
        "sample_id": question.sample_id,
        "qa_index": question.index,
        "category": question.category,
        "question": question.question,
        "gold": question.answer,
        "evidence": list(question.evidence),
        "prediction": answer["text"],
        "retrieved": [{"text": r.text, "score": r.score, "timestamp": r.timestamp, "source_turn_ids": r.source_turn_ids} for r in retrieved],
        "retrieved_turn_ids": retrieved_ids,
        "search_latency_s": search_s,
        "answer_latency_s": answer["latency_s"],
        "total_latency_s": search_s + answer["latency_s"],
        "answer_prompt_tokens": answer["prompt_tokens"],
        "answer_completion_tokens": answer["completion_tokens"],
        "search_tokens": found.tokens,
        "answer_cached": answer.get("cached", False),
        "answer_failure": answer.get("failure"),  # set when the LLM gave no usable answer (not cached)
    }


def predicted(predictions: JsonlRows, question: Question) -> bool:
    """Whether the question has a usable prediction (a failed LLM answer is redone by the next run)."""
    row = predictions.get(question.key)
    return row is not None and not row.get("answer_failure")


def paired_judgements(predictions: list[dict[str, Any]], judgements: list[dict[str, Any]], legacy: bool) -> dict[str, dict[str, Any]]:
    """key -> the judgement of the prediction row as it is now (``scored_row_sha256``); a judgement of an
    earlier, since-redone prediction is never paired with the new answer. ``legacy``: a judgement written
    before rows carried the hash is taken as it is (published runs read by the tables)."""
    by_key = {p["key"]: p for p in predictions}
    return {j["key"]: j for j in judgements if j["key"] in by_key
            and (scores(j, by_key[j["key"]]) or (legacy and SCORED_ROW_FIELD not in j))}  # fmt: skip


def score_row(prediction: dict[str, Any]) -> dict[str, Any]:
    """LLM-free per-question metrics."""
    return {
        "f1": token_f1(prediction["prediction"], prediction["gold"]),
        "f1_set_mem0": set_f1_mem0(prediction["prediction"], prediction["gold"]),
        "bleu1": bleu1(prediction["prediction"], prediction["gold"]),
        "evidence_recall": evidence_recall(prediction["evidence"], prediction["retrieved_turn_ids"]),
    }


# -- aggregation ---------------------------------------------------------------------------
METRIC_FIELDS = ("judge", "f1", "f1_set_mem0", "bleu1", "evidence_recall")


def cell_summary(rows: list[dict[str, Any]], n_samples: int, seed: int) -> dict[str, Any]:
    """Mean and 95% bootstrap CI of every metric over ``rows``, plus n and judge failures."""
    out: dict[str, Any] = {"n": len(rows), "judge_failures": sum(r["judge"] is None for r in rows)}
    for name in METRIC_FIELDS:
        out[name] = bootstrap_ci([r[name] for r in rows if r[name] is not None], n_samples, seed)
    return out


def ingest_summary(ingest_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """AddReport totals and per-ingested-turn LLM cost (system-reported and metered at the client)."""
    totals = {k: sum(r[k] for r in ingest_rows) for k in ("sessions", "n_turns", "stored", "updated", "rejected", "flagged", "queued", "failures")}
    out: dict[str, Any] = {**totals, "conflict_events": totals["updated"] + totals["rejected"] + totals["flagged"]}
    turns = max(totals["n_turns"], 1)
    for source in ("usage_reported", "usage_metered"):
        usage = LLMUsage()
        for row in ingest_rows:
            usage.merge(LLMUsage(**row[source]))
        counts = {k: v for k, v in usage.__dict__.items() if k != "cached_calls"}  # cache hits: run metadata
        out[source] = {
            **counts,
            "calls_per_turn": usage.calls / turns,
            "tokens_per_turn": (usage.prompt_tokens + usage.completion_tokens) / turns,
        }
    return out


def aggregate(
    predictions: list[dict[str, Any]],
    judgements: dict[str, dict[str, Any]],
    convention: str,
    n_samples: int,
    seed: int,
) -> dict[str, Any]:
    rows = []
    for p in predictions:
        verdict = judgements.get(p["key"], {}).get("correct")
        rows.append({**p, **score_row(p), "judge": None if verdict is None else float(verdict)})
    labels = CONVENTIONS[convention]
    per_category = {
        str(cat): {"label": labels[cat], **cell_summary([r for r in rows if r["category"] == cat], n_samples, seed)}
        for cat in sorted({r["category"] for r in rows})
    }
    return {
        "overall": cell_summary(rows, n_samples, seed),
        "per_category": per_category,
        "latency": {
            "search_s": percentiles([r["search_latency_s"] for r in rows]),
            "answer_s": percentiles([r["answer_latency_s"] for r in rows]),
            "total_s": percentiles([r["total_latency_s"] for r in rows]),
        },
        "tokens_per_query": {
            "mean": sum(r["answer_prompt_tokens"] + r["answer_completion_tokens"] + r["search_tokens"] for r in rows) / max(len(rows), 1),
            "answer_prompt_mean": sum(r["answer_prompt_tokens"] for r in rows) / max(len(rows), 1),
            "search_mean": sum(r["search_tokens"] for r in rows) / max(len(rows), 1),
        },
    }


def gold_slices(
    predictions: list[dict[str, Any]],
    judgements: dict[str, dict[str, Any]],
    excluded_keys: set[str] | None,
    convention: str,
    n_samples: int,
    seed: int,
) -> dict[str, Any]:
    """Judge accuracy against the original gold and with the audit's score-changing questions dropped.

    ``excluded_keys`` None means the errata file was unavailable: only the original slice is given.
    """
    slices: dict[str, Any] = {}
    for mode in GOLD_MODES:
        if mode == "audited_excluded" and excluded_keys is None:
            slices[mode] = None
            continue
        dropped = excluded_keys if mode == "audited_excluded" else set()
        kept = [p for p in predictions if p["key"] not in dropped]
        summary = aggregate(kept, judgements, convention, n_samples, seed)
        slices[mode] = {"overall": summary["overall"], "per_category": summary["per_category"], "n_excluded": len(predictions) - len(kept)}
    return slices


def audited_keys(predictions: list[dict[str, Any]], positions: dict[str, int], errata_path: str | Path, content: bytes | None = None) -> set[str]:
    """Keys of the predictions whose (conversation position, qa index) the audit marks score-changing
    (``content``: the errata file's bytes, when the run has read and checked them)."""
    wrong = score_changing_positions(load_errata(errata_path, content))
    return {p["key"] for p in predictions if (positions[p["sample_id"]], int(p["qa_index"])) in wrong}


def sample_positions(path: str | Path) -> dict[str, int]:
    """sample_id -> position in locomo10.json (the audit's conversation index)."""
    return {c.sample_id: c.position for c in load_locomo(path)}


# -- the benchmark -------------------------------------------------------------------------
def session_row(key: str, session: Session, report: AddReport, seconds: float, metered: LLMUsage) -> dict[str, Any]:
    """One added session: turns, wall seconds, what was stored and what the LLM did (as the system reported
    it and as the client metered it; ``cached_calls`` says how much of it the response cache answered)."""
    return {
        "key": key,
        "session": session.number,
        "n_turns": len(session.turns),
        "seconds": seconds,
        "stored": len(report.stored),
        "updated": len(report.updated),
        "rejected": len(report.rejected),
        "flagged": len(report.flagged),
        "queued": len(report.queued),
        "failures": report.failures,
        "usage_reported": report.usage.__dict__,
        "usage_metered": metered.__dict__,
    }


@dataclass
class LoCoMoBenchmark:
    """Config: conf/benchmark/locomo.yaml. ``run`` returns the metrics dict (the runner adds metadata)."""

    path: str = "data/locomo10.json"
    name: str = "locomo"
    convention: str = "locomo"
    conversations: Sequence[int | str] | None = None
    max_sessions: int | None = None
    evidence_in_ingested_only: bool = False
    exclude_categories: Sequence[int] = field(default_factory=lambda: [5])
    max_questions: int | None = None
    top_k: int = 10
    bootstrap_samples: int = 1000
    seed: int = 0
    # Gold answers the headline numbers use: `original`, or `audited_excluded` (the audit's score-changing
    # questions dropped). Both are always reported; errata file from scripts/download_data.py.
    gold: str = "original"
    audit_errata: str = "data/locomo-audit/errors.json"
    oracle_facts: bool = False  # attach each session's observation facts to the turns they cite (oracle-extractor study)

    def __post_init__(self) -> None:
        if self.convention not in CONVENTIONS:
            raise ConfigKeyError(f"benchmark.convention={self.convention!r}: choose one of {sorted(CONVENTIONS)}")
        if self.gold not in GOLD_MODES:
            raise ConfigKeyError(f"benchmark.gold={self.gold!r}: choose one of {list(GOLD_MODES)}")

    def check_inputs(self) -> None:
        """Parse the file and apply the slice (the runner calls this before the run folder exists)."""
        self.episodes()
        if self.gold == "audited_excluded" and not Path(self.audit_errata).is_file():
            raise ConfigKeyError(f"benchmark.audit_errata={self.audit_errata}: not found, and benchmark.gold=audited_excluded needs it; "
                                 "run `python -m scripts.download_data` (or --mirror DIR)")

    def episodes(self, ctx: RunContext | None = None) -> tuple[list[Episode], dict[str, int]]:
        """The slice; with ``ctx``, parsed from the bytes the run read and checked against its folder's identity."""
        spec = SliceSpec(self.conversations, self.max_sessions, self.evidence_in_ingested_only, self.exclude_categories, self.max_questions)
        content = ctx.read_input(self.path) if ctx is not None and Path(self.path).is_file() else None
        return slice_episodes(load_locomo(self.path, content), spec)

    def run(self, system: MemorySystem, ctx: RunContext) -> dict[str, Any]:
        episodes, counts = self.episodes(ctx)
        errata = ctx.read_input(self.audit_errata) if Path(self.audit_errata).is_file() else None  # checked before any row
        labels = CONVENTIONS[self.convention]
        ctx.log.info(
            "LoCoMo slice: %d questions from %d conversations; excluded %d of categories %s (%s), %d with evidence outside the ingested sessions, %d over max_questions",
            counts["questions_selected"], counts["conversations_selected"], counts["excluded_by_category"],
            list(self.exclude_categories), ", ".join(labels[c] for c in self.exclude_categories),
            counts["excluded_evidence_not_ingested"], counts["excluded_by_max_questions"],
        )  # fmt: skip
        ingest_rows = ctx.rows("ingest")
        predictions = ctx.rows("predictions")
        predicted_here = self._ingest_and_predict(system, episodes, ctx, ingest_rows, predictions)
        system_metrics = self._system_metrics(system, ctx, fresh=predicted_here)
        judgements = self._score(episodes, ctx, predictions)
        kept = [p for e in episodes for q in e.questions if (p := predictions.get(q.key))]  # question order, whatever run.workers was
        judged = paired_judgements(kept, judgements.rows(), legacy=False)
        excluded = self._audited_keys(kept, episodes, ctx, errata)
        slices = gold_slices(kept, judged, excluded, self.convention, self.bootstrap_samples, self.seed)
        headline = [p for p in kept if p["key"] not in excluded] if self.gold == "audited_excluded" and excluded else kept
        metrics = aggregate(headline, judged, self.convention, self.bootstrap_samples, self.seed)
        ingested = [r for r in ingest_rows.rows() if r["key"] in {e.conversation.sample_id for e in episodes}]
        failures = {"rows": sum(bool(p.get("answer_failure")) for p in kept) + sum(judged.get(p["key"], {}).get("label") is None for p in kept),
                    "ingest_turns": sum(int(r.get("failures") or 0) for r in ingested)}  # fmt: skip
        metrics["latency"]["add_session_s"] = percentiles([s for r in ingested for s in r["add_latency_s"]])
        return {
            "benchmark": self.name,
            # the package name the class is exported under (conf/benchmark/locomo.yaml), as before the split
            "benchmark_target": f"{__package__}.{type(self).__qualname__}",
            "system": getattr(system, "name", type(system).__name__),
            "convention": self.convention,
            "category_labels": {str(k): v for k, v in labels.items()},
            "top_k": self.top_k,
            "oracle_facts": self.oracle_facts,
            "slice": {**counts, "exclude_categories": list(self.exclude_categories), "evidence_fixes": sum(e.conversation.evidence_fixes for e in episodes)},
            "main_metric": metrics["overall"]["judge"]["mean"],
            **metrics,
            "gold": self.gold,
            "gold_slices": slices,
            "audit_errata_sha256": hashlib.sha256(errata).hexdigest() if excluded is not None and errata is not None else None,
            "judge_prompt": ctx.judge.prompt.name,
            "judge_failures": metrics["overall"]["judge_failures"],
            "ingest": ingest_summary(ingested),
            # failed LLM work: rows retried by the next run of the same command; turns the system failed to add
            "failures": failures,
            **({"system_metrics": system_metrics} if system_metrics is not None else {}),
        }

    @staticmethod
    def _system_metrics(system: MemorySystem, ctx: RunContext, fresh: bool) -> dict[str, Any] | None:
        """The system's own counters (``metrics()``: MOSAIC's mechanism counts) once every question is predicted,
        kept in ``system_metrics.json``. Why: a run resumed with only judging left ingests nothing and asks
        nothing, so its counters would be empty; it reads the kept ones back instead. ``fresh``: this
        process ingested or predicted something, so its counters are the ones to keep."""
        if not isinstance(system, ReportsMetrics):
            return None
        path = ctx.path("system_metrics.json")
        if not fresh and path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
        found = system.metrics()
        write_json_atomic(path, found, indent=2, default=str)
        return found

    def _ingest_and_predict(
        self, system: MemorySystem, episodes: list[Episode], ctx: RunContext, ingest_rows: JsonlRows, predictions: JsonlRows
    ) -> bool:
        """Ingest every conversation with questions left and predict them; whether there was any."""
        todo = [e for e in episodes if any(not predicted(predictions, q) for q in e.questions)]
        n_questions = sum(not predicted(predictions, q) for e in todo for q in e.questions)
        ingest_bar = tqdm(total=sum(len(e.sessions) for e in todo), desc="ingest (sessions)", unit="session", position=0)
        predict_bar = tqdm(total=n_questions, desc="predict (questions)", unit="q", position=1)
        workers, guard = ctx.workers, SystemGuard(system)
        sessions = Progress(ctx, "ingest", ingest_bar.total)
        session_rows = ctx.rows("ingest_sessions")

        def answer_one(item: tuple[Episode, Question, Search | None]) -> None:
            episode, question, found = item
            if found is None:
                with guard.searching():
                    found = search(system, episode, question, ctx, self.top_k)
            predictions.replace(predict(system, episode, question, ctx, self.top_k, found))  # replaces a failed try
            predict_bar.update(1)

        def episode_one(episode: Episode) -> None:
            """Ingest one conversation, then predict its questions on the shared question pool."""
            with guard.writing():
                row = ingest(system, episode, ctx, ingest_bar, sessions, session_rows, self.oracle_facts)
            ingest_rows.append(row)  # first ingest's report is kept; a re-ingest does not duplicate it
            pending = [q for q in episode.questions if not predicted(predictions, q)]
            if guard.parallel_search:
                questions.map(answer_one, [(episode, q, None) for q in pending])
            elif pending:  # a search that changes state (MOSAIC's continuity term) runs in question order, one at a time
                with guard.searching():
                    found = searches_in_order(system, episode, pending, ctx, self.top_k)
                questions.map(answer_one, [(episode, q, found[q.key]) for q in pending])

        try:
            with Stage(ctx, "predict", n_questions, workers) as questions:
                run_stage(ctx, "conversations", episode_one, todo, guard.namespace_workers(workers))
        finally:
            ingest_bar.close()
            predict_bar.close()
        return bool(todo)

    def _audited_keys(self, kept: list[dict[str, Any]], episodes: list[Episode], ctx: RunContext, errata: bytes | None) -> set[str] | None:
        """Score-changing questions of this slice, or None (logged) when the errata file is absent
        (``errata``: its bytes, read and checked at the start of the run)."""
        if errata is None:
            if self.gold == "audited_excluded":
                raise FileNotFoundError(f"benchmark.audit_errata={self.audit_errata}: not found; run `python -m scripts.download_data` (or --mirror DIR)")
            ctx.log.warning("benchmark.audit_errata=%s not found: only original-gold scores (python -m scripts.download_data)", self.audit_errata)
            return None
        positions = {e.conversation.sample_id: e.conversation.position for e in episodes}
        excluded = audited_keys(kept, positions, self.audit_errata, errata)
        ctx.log.info("audited gold: %d of %d questions in this slice have a score-changing gold error", len(excluded), len(kept))
        return excluded

    def _score(self, episodes: list[Episode], ctx: RunContext, predictions: JsonlRows) -> JsonlRows:
        judgements = ctx.rows("judgements")
        judge = ctx.judge  # built from conf/judge (prompt, max_tokens, attempts) by the runner
        # judged anew: no verdict yet, a failed one, or one of another prediction than the one now held (redone)
        todo = [p for e in episodes for q in e.questions
                if (p := predictions.get(q.key)) and not (scores(j := judgements.get(q.key), p) and j and j.get("label") is not None)]  # fmt: skip
        bar = tqdm(total=len(todo), desc="score (judge)", unit="q")

        def judge_one(p: dict[str, Any]) -> None:
            judgements.replace({"key": p["key"], SCORED_ROW_FIELD: row_sha256(p), **judge.judge(p["question"], p["gold"], p["prediction"])})
            bar.update(1)

        try:
            run_stage(ctx, "judge", judge_one, todo)
        finally:
            bar.close()
        failures = sum(j["label"] is None for j in judgements.rows())
        if failures:
            ctx.log.warning("judge: %d answers could not be graded (schema failures, counted as judge_failures)", failures)
        return judgements

    # -- tables ----------------------------------------------------------------------------
    @staticmethod
    def make_table(metrics_list: list[dict[str, Any]], convention: str | None = None) -> pd.DataFrame:
        """Table 1: one row per run (system / ablation), categories x judge/F1/BLEU-1 with CIs."""
        return locomo_table(metrics_list, convention)

    @staticmethod
    def make_extra_tables(metrics_list: list[dict[str, Any]]) -> dict[str, pd.DataFrame]:
        """``locomo_judge_gold``: the judge-and-gold view of Table 1 (both gold columns, calibration, judge2);
        ``locomo_headline``: the README's few columns."""
        return {"locomo_judge_gold": judge_gold_table(metrics_list), "locomo_headline": headline_table(metrics_list)}


REPO = Path(__file__).resolve().parents[3]
# Where tables look for what a metrics.json may lack (runs from before audited gold / calibration existed).
TABLE_SOURCES = {
    "locomo": REPO / "data" / "locomo10.json",
    "audit_errata": REPO / "data" / "locomo-audit" / "errors.json",
    "judge_calibration": REPO / "results" / "judge",
}


def table_audited_keys(predictions: list[dict[str, Any]]) -> set[str] | None:
    """Score-changing questions among a finished run's predictions (None without the data/errata files)."""
    if not TABLE_SOURCES["locomo"].is_file() or not TABLE_SOURCES["audit_errata"].is_file():
        return None
    return audited_keys(predictions, sample_positions(TABLE_SOURCES["locomo"]), TABLE_SOURCES["audit_errata"])


def run_gold_slices(metrics: dict[str, Any]) -> dict[str, Any] | None:
    """``gold_slices`` of a run: from metrics.json, else rebuilt from its rows (no LLM: judgements exist)."""
    if metrics.get("gold_slices"):
        return metrics["gold_slices"]
    folder = Path(metrics.get("_path", "")).parent
    if not (folder / "predictions.jsonl").is_file() or not (folder / "judgements.jsonl").is_file():
        return None
    predictions = read_rows(folder / "predictions.jsonl")
    judgements = paired_judgements(predictions, read_rows(folder / "judgements.jsonl"), legacy=True)
    excluded = table_audited_keys(predictions)
    convention = metrics.get("convention", "locomo")
    seed = int(metrics.get("metadata", {}).get("seed", 0) or 0)
    return gold_slices(predictions, judgements, excluded, convention, 1000, seed)


def _judge_columns(m: dict[str, Any]) -> dict[str, Any]:
    """The judge's prompt, its calibration on the audit bank and, when re-judged, the second judge."""
    meta = m.get("metadata", {})
    model, prompt = meta.get("judge_model_id", "?"), m.get("judge_prompt", "default")
    cells: dict[str, Any] = {
        "judge (prompt)": f"{model} ({prompt})",
        "judge calibration (FA = false-accept, TA = true-accept, %)": summary_cell(load_calibration(TABLE_SOURCES["judge_calibration"], model, prompt)),
    }
    second = m.get("judge2")
    if second:
        cells["judge2 (prompt)"] = f"{second['judge_model_id']} ({second['prompt']})"
        cells["judge2 overall J"] = format_ci(second.get("overall", {}).get("judge"))
        cells["kappa (judge vs judge2)"] = "" if second.get("kappa") is None else f"{second['kappa']:.2f}"
    return cells


def slice_label(metrics: dict[str, Any]) -> str:
    """What a run covered, e.g. '1 conv, 3 sessions, 20 q': a quickstart row and a whole-conversation row of
    one system otherwise read alike in Table 1."""
    chosen = metrics.get("slice", {})
    parts = [f"{chosen['conversations_selected']} conv" if "conversations_selected" in chosen else "",
             f"{chosen['sessions_selected']} sessions" if "sessions_selected" in chosen else "",
             f"{chosen['questions_selected']} q" if "questions_selected" in chosen else ""]
    return ", ".join(p for p in parts if p) or "?"


def locomo_table(metrics_list: list[dict[str, Any]], convention: str | None = None) -> pd.DataFrame:
    if not metrics_list:
        return pd.DataFrame()
    convention = convention or metrics_list[0].get("convention", "locomo")
    labels = CONVENTIONS[convention]
    present = {labels[int(c)] for m in metrics_list for c in m.get("per_category", {})}
    categories = [label for label in LABEL_ORDER if label in present]
    rows = []
    for m in metrics_list:
        by_label = {labels[int(c)]: cell for c, cell in m.get("per_category", {}).items()}
        slices = run_gold_slices(m) or {}
        audited = slices.get("audited_excluded") or {}
        audited_by_label = {labels[int(c)]: cell for c, cell in audited.get("per_category", {}).items()}
        row: dict[str, Any] = {"system": row_label(m), "slice": slice_label(m), "convention": convention,
                               "headline gold": m.get("gold", "original")}
        for label in categories:
            cell = by_label.get(label, {})
            row[f"{label} J"] = format_ci(cell.get("judge"))
            row[f"{label} J audited"] = format_ci(audited_by_label.get(label, {}).get("judge"))
            row[f"{label} F1"] = format_ci(cell.get("f1"))
            row[f"{label} B1"] = format_ci(cell.get("bleu1"))
            row[f"{label} n"] = cell.get("n", 0)
        overall = m.get("overall", {})
        row["overall J"] = format_ci(overall.get("judge"))
        row["overall J original gold"] = format_ci((slices.get("original") or {}).get("overall", {}).get("judge"))
        row["overall J audited (score-changing gold errors excluded)"] = format_ci(audited.get("overall", {}).get("judge"))
        row["audited: excluded n"] = audited.get("n_excluded", "") if audited else "n/a (no errata file)"
        row.update(_judge_columns(m))
        row["overall F1"] = format_ci(overall.get("f1"))
        row["overall B1"] = format_ci(overall.get("bleu1"))
        row["overall F1-set (Mem0-style)"] = format_ci(overall.get("f1_set_mem0"))
        row["overall n"] = overall.get("n", 0)
        row["judge failures"] = overall.get("judge_failures", 0)
        row[f"evidence recall@{m.get('top_k', 'k')}"] = format_ci(overall.get("evidence_recall"))
        latency = m.get("latency", {})
        row["search p50/p95 (s)"] = format_pair(latency.get("search_s", {}))
        row["total p50/p95 (s)"] = format_pair(latency.get("total_s", {}))
        row["tokens/query"] = round(m.get("tokens_per_query", {}).get("mean", 0.0), 1)
        row[FAILURES_COLUMN] = failures_cell(m)
        row["paper (reported) overall J"] = paper_reported_cell(m)
        rows.append(row)
    table = pd.DataFrame(rows).set_index("system")
    numbers = ", ".join(f"{k} {v}" for k, v in labels.items())
    table.attrs["caption"] = (
        f"LoCoMo, category convention '{convention}' ({numbers}). Cells: mean x100 [95% bootstrap CI]; "
        "J = LLM-judge accuracy, F1 = SQuAD token F1, B1 = BLEU-1. 'J audited' drops the questions whose gold answer the "
        "locomo-audit marks as wrong in a score-changing way (github.com/dial481/locomo-audit; 'excluded n' says how many). "
        "Judge calibration: acceptance of the audit bank's vague-but-wrong and specific-but-wrong answers and of gold answers "
        "(results/judge/; a lenient judge rewards vague answers). 'paper (reported)' is copied from the MOSAIC paper, not measured, "
        "and shown only on the row run as the paper configured the system (no ablation, no system.* override). "
        "Failures: rows (answers or judgements) that got no usable LLM reply / ingested turns the system failed to store."
    )
    return table


def paper_reported_cell(metrics: dict[str, Any]) -> str:
    """The paper's overall judge accuracy for this system, only on a row that is the paper's configuration."""
    system = str(metrics.get("metadata", {}).get("system", metrics.get("system", ""))).lower()
    paper = PAPER_REPORTED_OVERALL_JUDGE.get(system)
    return "" if paper is None or not is_paper_configuration(metrics) else f"{paper:.2f}"


def headline_table(metrics_list: list[dict[str, Any]]) -> pd.DataFrame:
    """The README's view of Table 1: one row per run, overall judge accuracy on both golds, token F1, evidence
    recall, failures and the paper's value (on the paper-configuration row only)."""
    if not metrics_list:
        return pd.DataFrame()
    rows = []
    for m in sorted(metrics_list, key=lambda run: (slice_label(run), row_label(run))):
        slices = run_gold_slices(m) or {}
        overall, audited = m.get("overall", {}), (slices.get("audited_excluded") or {})
        rows.append({
            "system": row_label(m),
            "slice": slice_label(m),
            "judge": format_ci(overall.get("judge")),
            "judge, audited gold": format_ci(audited.get("overall", {}).get("judge")),
            "token F1": format_ci(overall.get("f1")),
            f"evidence recall@{m.get('top_k', 'k')}": format_ci(overall.get("evidence_recall")),
            FAILURES_COLUMN: failures_cell(m),
            "paper (reported) judge": paper_reported_cell(m),
        })  # fmt: skip
    table = pd.DataFrame(rows).set_index("system")
    table.attrs["caption"] = (
        "LoCoMo (Table 1, headline columns; every column in results/tables/locomo.md). x100 [95% bootstrap CI]; "
        "'audited gold' excludes the questions whose gold answer locomo-audit marks wrong. 'paper (reported)' is "
        "copied from the MOSAIC paper (full LoCoMo, its own LLM), not measured here."
    )
    return table


def judge_gold_table(metrics_list: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per run: judge accuracy on original and audited gold, and how lenient that judge is."""
    if not metrics_list:
        return pd.DataFrame()
    rows = []
    for m in metrics_list:
        slices = run_gold_slices(m) or {}
        original, audited = slices.get("original") or {}, slices.get("audited_excluded") or {}
        row: dict[str, Any] = {
            "system": row_label(m),
            "n": original.get("overall", {}).get("n", m.get("overall", {}).get("n", 0)),
            "J original gold": format_ci(original.get("overall", {}).get("judge") or m.get("overall", {}).get("judge")),
            "J audited gold (errors excluded)": format_ci(audited.get("overall", {}).get("judge")),
            "excluded n": audited.get("n_excluded", "n/a") if audited else "n/a",
        }
        row.update(_judge_columns(m))
        rows.append(row)
    table = pd.DataFrame(rows).set_index("system")
    table.attrs["caption"] = (
        "LoCoMo judge accuracy (x100 [95% bootstrap CI]) against the original gold and with the locomo-audit's "
        "score-changing gold errors excluded, next to the judge's calibration on the audit's wrong-answer bank "
        "(FA: share of deliberately wrong answers the judge accepts; TA: share of gold answers it accepts; results/judge/)."
    )
    return table
