"""LoCoMo's retrieval-only run (``benchmark.stages=[ingest, retrieve]``): ingest every conversation and search
every question, with no answerer and no judge; each question's ranked retrieved source ids are stored
(``retrievals.jsonl``) and scored against its gold evidence turns (eval/retrieval_metrics.py).

Why: whether a memory *finds* the evidence needs no model, so all of LoCoMo (1,982 questions with evidence)
can be measured for every system and ablation whose ingest makes no LLM call (rag over turns, rag over oracle
facts, MOSAIC with the oracle extractor and its conflict check off), with intervals of a few points.

Each question is searched once at ``max(retrieval_ks)`` items (20); recall@k for smaller k is read from that
list's first k items. For MOSAIC this is the rank of a 20-item search, whose candidate pool
(``search_pool_factor * k``) is larger than a 10-item search's, so recall@10 here may differ slightly from a
full run's evidence recall at ``top_k`` 10 (docs/benchmarks.md says so). Resumable like every stage: a
conversation whose questions are all searched is not ingested again, and a partly searched one is ingested
again and its earlier searches replayed in order (``searches_in_order``) for a system whose search has state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tqdm import tqdm

from core.api import MemorySystem
from eval.benchmarks.locomo.data import CONVENTIONS, Episode
from eval.benchmarks.locomo.metrics import ingest_summary
from eval.benchmarks.locomo.stages import ingest, search, searches_in_order
from eval.budget import budget_recall, row_returned_tokens
from eval.context import RunContext
from eval.intervals import report_settings
from eval.metrics import percentiles
from eval.retrieval_metrics import by_group, metric_names, question_scores, ranked_units, summarise
from eval.tokens import returned_token_fields, token_summary
from eval.workers import Progress, SystemGuard, run_stage

FULL_STAGES = ("ingest", "retrieve", "answer", "judge")
RETRIEVAL_STAGES = ("ingest", "retrieve")
# LoCoMo's adversarial category: its questions have evidence but no answer in the conversation; reported apart
# and left out of ``overall`` (issue: "category 5 reported apart")
ADVERSARIAL = 5


def session_of(turn_id: str) -> str:
    """A LoCoMo turn id's session: ``D3:12`` -> ``D3`` (an id without a colon is its own session)."""
    return str(turn_id).split(":", 1)[0]


LEVELS = {"turn": None, "session": session_of}


def check_stages(stages: list[str]) -> None:
    """Only the whole pipeline or ingest + retrieve run (one line naming the key and the choices)."""
    if tuple(stages) not in (FULL_STAGES, RETRIEVAL_STAGES):
        raise ValueError(f"benchmark.stages={list(stages)}: choose {list(FULL_STAGES)} (the full run) or {list(RETRIEVAL_STAGES)} (retrieval only)")


def is_retrieval_only(metrics: dict[str, Any]) -> bool:
    """Whether a metrics.json is of a retrieval-only run (no answers, no judge: its own tables)."""
    return tuple(metrics.get("stages") or FULL_STAGES) == RETRIEVAL_STAGES


def retrieval_row(episode: Episode, question: Any, found: Any) -> dict[str, Any]:
    """One searched question: its gold evidence and, per rank, the retrieved item's source ids and tokens (no texts)."""
    return {
        "key": question.key,
        "sample_id": question.sample_id,
        "qa_index": question.index,
        "category": question.category,
        "evidence": list(question.evidence),
        "retrieved_ids": [list(item.source_turn_ids) for item in found.retrieved],
        "retrieved_scores": [float(item.score) for item in found.retrieved],
        **returned_token_fields([item.text for item in found.retrieved]),  # one tokenizer for every system (eval/tokens.py)
        "search_latency_s": found.seconds,
        "search_tokens": found.tokens,
    }


def run_retrieval(benchmark: Any, system: MemorySystem, episodes: list[Episode], counts: dict[str, int], ctx: RunContext) -> dict[str, Any]:
    """Ingest and search every question of ``episodes``; the metrics dict (the runner adds metadata)."""
    depth = max(benchmark.retrieval_ks)
    ingest_rows, rows = ctx.rows("ingest"), ctx.rows("retrievals")
    todo = [e for e in episodes if any(q.key not in rows for q in e.questions)]
    bar = tqdm(total=sum(len(e.sessions) for e in todo), desc="ingest (sessions)", unit="session")
    sessions, session_rows = Progress(ctx, "ingest", bar.total), ctx.rows("ingest_sessions")
    guard = SystemGuard(system)

    def episode_one(episode: Episode) -> None:
        with guard.writing():
            ingest_rows.append(ingest(system, episode, ctx, bar, sessions, session_rows, benchmark.oracle_facts))
        pending = [q for q in episode.questions if q.key not in rows]
        with guard.searching(episode.namespace):
            if guard.parallel_search:
                found = {q.key: search(system, episode, q, ctx, depth) for q in pending}
            else:
                found = searches_in_order(system, episode, pending, ctx, depth) if pending else {}
        for question in pending:
            rows.append(retrieval_row(episode, question, found[question.key]))

    try:
        run_stage(ctx, "conversations", episode_one, todo, guard.namespace_workers(ctx.workers))
    finally:
        bar.close()
    kept = [r for e in episodes for q in e.questions if (r := rows.get(q.key))]
    ingested = [r for r in ingest_rows.rows() if r["key"] in {e.conversation.sample_id for e in episodes}]
    return {
        "benchmark": benchmark.name,
        "benchmark_target": "eval.benchmarks.locomo.LoCoMoBenchmark",
        "system": getattr(system, "name", type(system).__name__),
        "stages": list(RETRIEVAL_STAGES),
        "convention": benchmark.convention,
        "category_labels": {str(k): v for k, v in CONVENTIONS[benchmark.convention].items()},
        "category_labels_by_convention": {name: {str(k): v for k, v in labels.items()} for name, labels in CONVENTIONS.items()},
        "top_k": benchmark.top_k,
        "retrieval_depth": depth,
        "oracle_facts": benchmark.oracle_facts,
        "slice": {**counts, "exclude_categories": list(benchmark.exclude_categories)},
        "retrieval": retrieval_metrics(kept, benchmark.retrieval_ks, benchmark.ndcg_k, benchmark.bootstrap_samples, benchmark.seed,
                                       benchmark.token_budgets if benchmark.token_budgets is not None else report_settings()["token_budgets"]),
        "main_metric": None,
        "latency": {"search_s": percentiles([r["search_latency_s"] for r in kept])},
        "search_tokens_mean": sum(r["search_tokens"] for r in kept) / max(len(kept), 1),
        "ingest": ingest_summary(ingested),
        "failures": {"rows": 0, "ingest_turns": sum(int(r.get("failures") or 0) for r in ingested)},
    }


def retrieval_metrics(rows: list[dict[str, Any]], ks: list[int], ndcg_k: int, n_samples: int, seed: int,
                      token_budgets: Sequence[int] = ()) -> dict[str, Any]:
    """Per level (turn, session): ``overall`` (every category but the adversarial one), ``per_category`` (the
    adversarial one included, apart), each interval per question and over conversations then questions within
    them (``n_clusters``); the count of questions without evidence (unscored); tokens returned per search and,
    for rows that record them, turn-level evidence recall at each of ``token_budgets`` (eval/budget.py), overall
    and per category."""
    names = metric_names(ks, ndcg_k)
    out: dict[str, Any] = {"ks": list(ks), "ndcg_k": ndcg_k, "overall_excludes_categories": [ADVERSARIAL],
                           "questions_without_evidence": sum(not r["evidence"] for r in rows), "clusters": "conversation",
                           "conversations": sorted({str(r["sample_id"]) for r in rows})}  # fmt: skip
    for level, unit in LEVELS.items():
        scored, clusters = [], []
        for r in rows:
            gold = {unit(e) if unit else e for e in r["evidence"]}
            s = question_scores(gold, ranked_units(r["retrieved_ids"], unit), ks, ndcg_k)
            if s is not None:
                scored.append((r["category"], s))
                clusters.append(str(r["sample_id"]))
        kept = [i for i, (c, _) in enumerate(scored) if c != ADVERSARIAL]
        out[level] = {
            "overall": summarise([scored[i][1] for i in kept], names, n_samples, seed, [clusters[i] for i in kept]),
            "per_category": by_group(scored, names, n_samples, seed, clusters),
        }
    tokens = [row_returned_tokens(r) for r in rows]
    if all(t is not None for t in tokens):
        out["returned_tokens"] = token_summary(tokens)
    if token_budgets and all(t is not None for t in tokens):
        with_evidence = [r for r in rows if r["evidence"]]
        out["evidence_recall_at_budget"] = {
            "level": "turn",
            "overall": budget_recall([r for r in with_evidence if r["category"] != ADVERSARIAL], token_budgets, n_samples, seed),
            "per_category": {str(c): budget_recall([r for r in with_evidence if r["category"] == c], token_budgets, n_samples, seed)
                             for c in sorted({r["category"] for r in with_evidence})},
        }  # fmt: skip
    return out
