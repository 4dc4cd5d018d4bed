"""LoCoMo's paired retrieval differences: a retrieval-only run against its base row, per level (turn, session), every
retrieval metric overall (category 5 out, as the run's own ``overall``) and per category, and evidence recall at each
token budget, clustered by conversation (the shared machinery is eval/retrieval_paired.py).

``recompute_retrieval`` is ``LoCoMoBenchmark``'s ``core.api.RetrievalRecomputable``: a run's retrieval metrics
recomputed from its ``retrievals.jsonl`` with today's code, and its differences to the base run
(``python -m scripts.add_fields``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eval.benchmarks.locomo.retrieval import ADVERSARIAL, LEVELS
from eval.budget import recall_at_budget, row_item_tokens
from eval.retrieval_metrics import metric_names, question_scores, ranked_units
from eval.retrieval_paired import SECTION, Scored, base_record, paired_differences, recorded_settings


def _scores(rows: list[dict[str, Any]], unit: Any, ks: Sequence[int], ndcg_k: int) -> Scored:
    out = {}
    for r in rows:
        s = question_scores({unit(e) if unit else e for e in r["evidence"]}, ranked_units(r["retrieved_ids"], unit), ks, ndcg_k)
        if s is not None:
            out[r["key"]] = (int(r["category"]), s)
    return out


def paired_to_base(rows: list[dict[str, Any]], base_rows: list[dict[str, Any]], ks: Sequence[int], ndcg_k: int, budgets: Sequence[int],
                   n_samples: int, seed: int) -> dict[str, Any]:
    """Per level (turn, session) the differences of every metric, overall (category 5 out, as the run's own
    ``overall``) and per category; at turn level also evidence recall at each budget, where both runs record tokens."""
    clusters = {r["key"]: str(r["sample_id"]) for r in (*base_rows, *rows)}
    names = metric_names(ks, ndcg_k)
    categories = sorted({int(r["category"]) for r in rows})
    out: dict[str, Any] = {"clusters": "conversation", "overall_excludes_categories": [ADVERSARIAL]}
    for level, unit in LEVELS.items():
        out[level] = paired_differences(_scores(base_rows, unit, ks, ndcg_k), _scores(rows, unit, ks, ndcg_k), categories, names,
                                        clusters, n_samples, seed, lambda c: c != ADVERSARIAL)  # fmt: skip
    both = rows + base_rows
    if budgets and all(row_item_tokens(r) is not None for r in both):

        def at_budgets(run_rows: list[dict[str, Any]]) -> Scored:
            return {r["key"]: (int(r["category"]), {str(b): recall_at_budget(r, int(b)) for b in budgets}) for r in run_rows if r["evidence"]}

        out["evidence_recall_at_budget"] = {"level": "turn", **paired_differences(at_budgets(base_rows), at_budgets(rows), categories,
                                                                                   [str(b) for b in budgets], clusters, n_samples, seed,
                                                                                   lambda c: c != ADVERSARIAL)}  # fmt: skip
    return out


def recompute_retrieval(run_dir: Path, base_dir: Path | None) -> dict[str, Any] | None:
    """The run's retrieval metrics from its ranked rows (cluster intervals; tokens and budgets where its rows record
    tokens) and, unless it is the base, its paired differences to ``base_dir``; None without ``retrievals.jsonl``."""
    from eval.benchmarks.locomo.retrieval import retrieval_metrics
    from eval.intervals import report_settings
    from eval.rows import read_rows

    run_dir = Path(run_dir)
    if not (run_dir / "retrievals.jsonl").is_file():
        return None
    bench, seed, samples, ks = recorded_settings(run_dir)

    def ordered(folder: Path) -> list[dict[str, Any]]:
        return sorted(read_rows(folder / "retrievals.jsonl"), key=lambda r: (r["sample_id"], r["qa_index"]))

    rows = ordered(run_dir)
    budgets = [int(b) for b in (bench.get("token_budgets") or report_settings()["token_budgets"])]
    recomputed: dict[str, Any] = {"retrieval": retrieval_metrics(rows, ks, int(bench["ndcg_k"]), samples, seed, budgets)}
    if base_dir is not None and Path(base_dir).resolve() != run_dir.resolve():
        recomputed[SECTION] = {"base_run": base_record(base_dir),
                               **paired_to_base(rows, ordered(Path(base_dir)), ks, int(bench["ndcg_k"]), budgets, samples, seed)}  # fmt: skip
    return recomputed
