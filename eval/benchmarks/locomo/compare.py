"""LoCoMo's side of ``scripts.compare_runs``: how two finished LoCoMo runs pair, question by question.

Full runs: per-question judge correctness and token F1 (``judgements.jsonl``, ``predictions.jsonl``), overall and
per category, beside the tokens each run's searches returned. Retrieval-only runs: evidence recall@k at turn level
(categories 1-4 overall) and recall at the tables' fixed token budget (``retrieval_paired.paired_to_base``). Both:
what the write path cost per ingested turn (``ingest.jsonl``). Clusters are conversations. No LLM call; the
bootstrap and the run lookup are eval/compare.py's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.api import Comparison
from eval.budget import row_returned_tokens
from eval.compare import clusters_of, column, jsonl_rows, paired_difference, returned_token_summaries
from eval.metrics import token_f1
from eval.rows import SCORED_ROW_FIELD, scores
from eval.tokens import token_summary


def locomo_outcomes(run_dir: Path) -> dict[str, dict[str, Any]]:
    """question key -> {correct (0/1, the judge), f1 (token F1 with the gold answer), category, cluster (the conversation),
    returned_tokens (of everything the search returned, eval/tokens.py)}."""
    run_dir = Path(run_dir)
    judged = {row["key"]: row for row in jsonl_rows(run_dir / "judgements.jsonl")}
    out: dict[str, dict[str, Any]] = {}
    for row in jsonl_rows(run_dir / "predictions.jsonl"):
        verdict = judged.get(row["key"])
        if verdict is None or verdict.get("correct") is None or (SCORED_ROW_FIELD in verdict and not scores(verdict, row)):
            continue  # unjudged (a judge failure) or judged another answer than this one: not comparable
        out[row["key"]] = {"correct": float(bool(verdict["correct"])), "f1": token_f1(row.get("prediction"), row.get("gold")),
                           "category": row.get("category"), "cluster": row.get("sample_id"), "returned_tokens": row_returned_tokens(row)}
    return out


def compare_locomo(base_dir: Path, other_dir: Path, n_samples: int = 2000, seed: int = 0, sessions: int | None = None) -> dict[str, Any]:
    """Judge accuracy and F1, overall and per category: each run's value and the paired difference; beside them
    the tokens each run's searches returned over the shared questions (accuracy at what context cost)."""
    base, other = locomo_outcomes(base_dir), locomo_outcomes(other_dir)
    clusters = clusters_of(base)
    out: dict[str, Any] = {"n_shared": len(set(base) & set(other)), "only_base": len(set(base) - set(other)),
                           "only_other": len(set(other) - set(base))}  # fmt: skip
    for field in ("correct", "f1"):
        out[field] = paired_difference(column(base, field), column(other, field), n_samples, seed, clusters)
    categories = sorted({v["category"] for v in base.values() if v["category"] is not None})
    out["per_category"] = {
        str(c): paired_difference(column(base, "correct", lambda v, c=c: v["category"] == c),
                                  column(other, "correct", lambda v, c=c: v["category"] == c), n_samples, seed, clusters)
        for c in categories
    }
    shared = set(base) & set(other)
    out["returned_tokens"] = {name: token_summary(v["returned_tokens"] for k, v in run.items() if k in shared)
                              for name, run in (("base", base), ("other", other))}  # fmt: skip
    return out


def compare_retrieval(base_dir: Path, other_dir: Path, n_samples: int = 2000, seed: int = 0, sessions: int | None = None,
                      k: int = 10) -> dict[str, Any]:
    """Two retrieval-only runs: evidence recall@k (turn level, categories 1-4 overall) and recall at the tables' fixed
    token budget, each run's value and the paired difference with both intervals, beside the tokens each run returned."""
    from eval.benchmarks.locomo.retrieval_paired import paired_to_base
    from eval.intervals import report_settings

    base_dir, other_dir = Path(base_dir), Path(other_dir)
    budget = int(report_settings()["table_token_budget"])
    base, other = jsonl_rows(base_dir / "retrievals.jsonl"), jsonl_rows(other_dir / "retrievals.jsonl")
    paired = paired_to_base(other, base, [k], k, [budget], n_samples, seed)
    level = paired["turn"]
    undefined = {"mean": None, "base": None, "other": None}  # rows that record no tokens
    out = {"recall": level["overall"][f"recall@{k}"],
           "budget": (paired.get("evidence_recall_at_budget") or {}).get("overall", {}).get(str(budget), undefined),
           "per_category": {c: cell[f"recall@{k}"] for c, cell in level["per_group"].items()}}  # fmt: skip
    return {**out, "n_shared": out["recall"].get("n", 0), "k": k, "budget_tokens": budget,
            "returned_tokens": returned_token_summaries(base_dir, other_dir)}


def write_cost(run_dir: Path, sessions: int | None = None) -> dict[str, Any]:
    """What a checked write cost per ingested turn (``ingest.jsonl``): LLM calls (all and by purpose), tokens, seconds,
    and how many calls the response cache served (a cached call costs no LLM time, so seconds then understate a cold run)."""
    run_dir = Path(run_dir)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    rows = jsonl_rows(run_dir / "ingest.jsonl")
    turns = sum(int(r.get("n_turns", 0)) for r in rows)
    seconds = sum(sum(r.get("add_latency_s") or []) for r in rows)
    calls = prompt = completion = cached = 0
    by_purpose: dict[str, dict[str, float]] = {}
    for r in rows:
        usage = r.get("usage_metered") or r.get("usage_reported") or {}
        calls += int(usage.get("calls", 0))
        prompt += int(usage.get("prompt_tokens", 0))
        completion += int(usage.get("completion_tokens", 0))
        cached += int((r.get("usage_reported") or {}).get("cached_calls", 0))
        for purpose, u in (usage.get("by_purpose") or {}).items():
            into = by_purpose.setdefault(purpose, {"calls": 0.0, "tokens": 0.0})
            into["calls"] += u.get("calls", 0)
            into["tokens"] += u.get("prompt_tokens", 0) + u.get("completion_tokens", 0)
    n = max(turns, 1)
    return {
        "unit": "turn",
        "turns": turns,
        "calls_per_turn": calls / n,
        "tokens_per_turn": (prompt + completion) / n,
        "completion_tokens_per_turn": completion / n,
        "seconds_per_turn": seconds / n if seconds else None,
        "cached_call_share": cached / calls if calls else None,
        "by_purpose_per_turn": {p: {k: v / n for k, v in u.items()} for p, u in sorted(by_purpose.items())},
        "git_sha": metrics.get("metadata", {}).get("git_sha"),
    }


def comparison(retrieval_only: bool) -> Comparison:
    """``core.api.PairedComparable`` for ``LoCoMoBenchmark``: full runs by judge and F1, retrieval-only runs by recall."""
    if retrieval_only:
        return Comparison(fields=(("recall", "evidence recall@10 (turn, cat. 1-4)"), ("budget", "evidence recall @budget tokens (turn)")),
                          cluster_unit="conversation", quality=compare_retrieval, write_cost=write_cost, returned_tokens=True)  # fmt: skip
    return Comparison(fields=(("correct", "judge"), ("f1", "F1")), cluster_unit="conversation", quality=compare_locomo,
                      write_cost=write_cost, returned_tokens=True, per_category_axis="judge accuracy")  # fmt: skip
