"""The per-item work of LoCoMo's three resumable stages: ingest (each session through ``system.add``),
predict (``system.search`` + the shared answerer, one row per question) and score (the run's judge, one row
per question). ``LoCoMoBenchmark.run`` drives them over workers; these say what one item does and writes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from core.api import AddReport, LLMUsage, MemorySystem
from core.llm import own_usage, usage_since
from eval.benchmarks.locomo.data import Episode, Question, Session
from eval.context import JsonlRows, RunContext
from eval.judge import AnswerJudge
from eval.rows import SCORED_ROW_FIELD, row_sha256, scores
from eval.tokens import returned_token_fields
from eval.workers import Progress, in_worker


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
    """Search (unless ``found`` is given), then the shared answerer; the row records what was retrieved (with the
    tokens of each item, eval/tokens.py), latency and LLM tokens."""
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
        **returned_token_fields([r.text for r in retrieved]),  # retrieved_tokens per item, returned_tokens in all
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


def judged(judgements: JsonlRows, prediction: dict[str, Any]) -> bool:
    """Whether ``prediction`` as it is now has a usable judgement; judged anew: no verdict yet, a failed one,
    or one of another prediction than the one now held (redone)."""
    row = judgements.get(prediction["key"])
    return bool(scores(row, prediction) and row and row.get("label") is not None)


def judgement_row(judge: AnswerJudge, prediction: dict[str, Any]) -> dict[str, Any]:
    """The judge's verdict on one prediction, with the hash of the row it judged (``scored_row_sha256``)."""
    return {"key": prediction["key"], SCORED_ROW_FIELD: row_sha256(prediction), **judge.judge(prediction["question"], prediction["gold"], prediction["prediction"])}
