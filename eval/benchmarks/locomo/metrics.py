"""LoCoMo's numbers from its rows: LLM-free per-question metrics, the judge's verdicts paired with the
prediction they judged, per-category means with bootstrap CIs, ingest cost, and the two gold slices
(original, and the audit's score-changing questions dropped). Pure functions: no LLM, no files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.api import LLMUsage
from eval.benchmarks.locomo.audit import GOLD_MODES
from eval.benchmarks.locomo.data import CONVENTIONS
from eval.budget import budget_recall, row_returned_tokens
from eval.metrics import bleu1, bootstrap_ci, evidence_recall, percentiles, set_f1, token_f1
from eval.rows import SCORED_ROW_FIELD, scores
from eval.tokens import token_summary


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
        "f1_set_mem0": set_f1(prediction["prediction"], prediction["gold"]),  # Mem0's harness's F1
        "bleu1": bleu1(prediction["prediction"], prediction["gold"]),
        "evidence_recall": evidence_recall(prediction["evidence"], prediction["retrieved_turn_ids"]),
    }


# -- aggregation ---------------------------------------------------------------------------
METRIC_FIELDS = ("judge", "f1", "f1_set_mem0", "bleu1", "evidence_recall")


def cell_summary(rows: list[dict[str, Any]], n_samples: int, seed: int) -> dict[str, Any]:
    """Mean and 95% bootstrap CIs of every metric over ``rows`` (per question, and over conversations then
    questions within them: ``eval.intervals``), plus n, conversations and judge failures."""
    out: dict[str, Any] = {"n": len(rows), "n_clusters": len({r["sample_id"] for r in rows}), "judge_failures": sum(r["judge"] is None for r in rows)}
    for name in METRIC_FIELDS:
        out[name] = bootstrap_ci([r[name] for r in rows], n_samples, seed, clusters=[r["sample_id"] for r in rows])
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
    token_budgets: Sequence[int] = (),
) -> dict[str, Any]:
    """Per-category and overall cells, latency, LLM tokens per query, tokens returned per search and (for
    each of ``token_budgets``) evidence recall with every list cut at that many returned tokens."""
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
        "conversations": sorted({str(r["sample_id"]) for r in rows}),  # the clusters of every cluster interval
        "returned_tokens": token_summary(row_returned_tokens(r) for r in rows),
        "evidence_recall_at_budget": budget_recall(rows, token_budgets, n_samples, seed),
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
