"""HaluMem's metrics on judged rows (pure functions).

HaluMem's toolkit (``eval/evaluation.py``, ``aggregate_eval_results``) reports each ratio twice: "(all)", where a
judge failure stays in the denominator with no credit, and "(valid)", where it is left out. Here the headline
``mean`` (with its CI and ``n``) is the "(valid)" ratio, as LoCoMo reports a judge failure (left out, counted), and
``all`` / ``n_all`` give the "(all)" ratio beside it; a metric with no valid item has ``mean`` None. Every CI comes
from ``eval.intervals.bootstrap``: items resampled, and users resampled, then items within them (the cluster
interval; a row's user is its ``uuid``), seeded.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from eval.benchmarks.halumem.data import MEMORY_TYPES, QUESTION_TYPES
from eval.benchmarks.halumem.update_ranking import new_above_old
from eval.intervals import bootstrap, bootstrap_ci, resampled_mean


# The scoring protocol a run's metrics follow. "toolkit-audited": every deviation from HaluMem's official toolkit
# fixed or justified (docs/halumem.md, "Deviations from the official toolkit": update Correct needs the original
# replaced or marked outdated, accuracy asked apart from the gold-field question, "(valid)" and "(all)" ratios, an
# update point whose search returned nothing judged for integrity). A metrics.json without the field was scored
# before that audit (tables call it the old protocol).
PROTOCOL = "toolkit-audited"


def _users(rows: Sequence[dict[str, Any]]) -> list[Any]:
    """Each row's user: the cluster of the cluster interval."""
    return [r.get("uuid") for r in rows]


def _with_all(valid: dict[str, Any], all_value: float | None, n_all: int) -> dict[str, Any]:
    return {**valid, "all": all_value, "n_all": n_all, "failures": n_all - int(valid["n"])}


def _mean_metric(values: Sequence[float | None], n_boot: int, seed: int, users: Sequence[Any] | None = None) -> dict[str, Any]:
    """Mean over valid values (None = a failed verdict, left out) with its CIs; ``all`` counts a failure as 0."""
    values = list(values)
    all_value = sum(v or 0.0 for v in values) / len(values) if values else None
    stat = bootstrap_ci(values, n_samples=n_boot, seed=seed, clusters=None if users is None else list(users))
    return _with_all(stat, all_value, len(values))


def _ratio(numerators: np.ndarray, denominators: np.ndarray) -> np.ndarray:
    return numerators.sum(axis=1) / denominators.sum(axis=1)


def _ratio_metric(numerators: Sequence[float | None], denominators: Sequence[float], n_boot: int, seed: int,
                  users: Sequence[Any] | None = None) -> dict[str, Any]:
    """sum(num) / sum(den) over valid items (numerator None = failed), resampling items (num and den together);
    ``all`` keeps the failed items' denominators with no credit."""
    labels = list(users) if users is not None else [None] * len(list(denominators))
    valid = [(num, den, user) for num, den, user in zip(numerators, denominators, labels) if num is not None]
    stat = bootstrap(_ratio, ([v[0] for v in valid], [v[1] for v in valid]), n_samples=n_boot, seed=seed,
                     clusters=None if users is None else [[v[2] for v in valid]])
    total = sum(denominators)
    return _with_all(stat, sum(n or 0.0 for n in numerators) / total if total else None, len(list(denominators)))


def f1_score(precision: float | None, recall: float | None) -> float | None:
    if precision is None or recall is None:
        return None
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def _f1_of_means(precision_values: np.ndarray, recall_values: np.ndarray) -> np.ndarray:
    p, r = resampled_mean(precision_values), resampled_mean(recall_values)
    return np.where(p + r > 0, 2 * p * r / (p + r), 0.0)


def _half(score: int | None) -> float | None:
    return None if score is None else 0.5 * score


def extraction_metrics(integrity_rows: list[dict[str, Any]], accuracy_rows: list[dict[str, Any]], n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Recall, weighted recall, target precision, accuracy, false-memory resistance and F1, as HaluMem computes them.

    integrity rows: ``score`` (0/1/2 or None), ``importance``, ``is_interference``.
    accuracy rows: ``score`` (0/1/2 or None), ``in_gold_fields`` (bool or None).
    Target precision is over the memories judged inside the gold fields (a memory whose field verdict failed is
    outside, as HaluMem's code treats it); false-memory resistance is the share of interference points scored 0
    (HaluMem's interference_accuracy); F1 = harmonic mean of target precision and recall.
    """
    gold = [r for r in integrity_rows if not r["is_interference"]]
    interference = [r for r in integrity_rows if r["is_interference"]]
    recall_hits = [None if r["score"] is None else float(r["score"] == 2) for r in gold]
    target = [r for r in accuracy_rows if r.get("in_gold_fields") is True]
    target_values = [_half(r["score"]) for r in target]
    out: dict[str, Any] = {
        "recall": _mean_metric(recall_hits, n_boot, seed, _users(gold)),
        "weighted_recall": _ratio_metric([None if r["score"] is None else 0.5 * r["score"] * r["importance"] for r in gold],
                                         [r["importance"] for r in gold], n_boot, seed, _users(gold)),  # fmt: skip
        "target_precision": _mean_metric(target_values, n_boot, seed, _users(target)),
        "accuracy": _mean_metric([_half(r["score"]) for r in accuracy_rows], n_boot, seed, _users(accuracy_rows)),
        "false_memory_resistance": _mean_metric([None if r["score"] is None else float(r["score"] == 0) for r in interference], n_boot, seed,
                                                _users(interference)),  # fmt: skip
    }
    # F1 of target precision and recall; the two samples are resampled independently (the cluster interval draws
    # the users once for both)
    valid_target = [(v, u) for v, u in zip(target_values, _users(target)) if v is not None]
    valid_recall = [(v, u) for v, u in zip(recall_hits, _users(gold)) if v is not None]
    f1 = bootstrap(_f1_of_means, [v for v, _ in valid_target], [v for v, _ in valid_recall], n_samples=n_boot, seed=seed,
                   n=len(valid_recall) + len(valid_target), clusters=[[u for _, u in valid_target], [u for _, u in valid_recall]])
    out["f1"] = _with_all(f1, f1_score(out["target_precision"]["all"], out["recall"]["all"]), len(gold) + len(target))
    out["counts"] = {
        "gold_points": len(gold),
        "interference_points": len(interference),
        "stored_memories": len(accuracy_rows),
        "target_memories": len(target),
        "integrity_judge_failures": sum(r["score"] is None for r in integrity_rows),
        "accuracy_judge_failures": sum(r["score"] is None for r in accuracy_rows),
        "gold_fields_judge_failures": sum(r.get("in_gold_fields") is None for r in accuracy_rows),
    }
    return out


def label_metrics(rows: list[dict[str, Any]], labels: Sequence[str], n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Share of each label over the valid rows (``label=None``, a failed verdict, is left out and counted), with
    HaluMem's "(all)" share beside it."""
    out: dict[str, Any] = {
        label.lower(): _mean_metric([None if r["label"] is None else float(r["label"] == label) for r in rows], n_boot, seed, _users(rows))
        for label in labels
    }
    out["judge_failures"] = sum(r["label"] is None for r in rows)
    out["n"] = len(rows)
    out["n_valid"] = len(rows) - out["judge_failures"]
    return out


def by_question_type(qa_rows: list[dict[str, Any]], labels: Sequence[str], n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    return {
        qtype: label_metrics([r for r in qa_rows if r["question_type"] == qtype], labels, n_boot, seed)
        for qtype in QUESTION_TYPES
        if any(r["question_type"] == qtype for r in qa_rows)
    }


def by_memory_type(integrity_rows: list[dict[str, Any]] | None, update_rows: list[dict[str, Any]], n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Per memory type: recall (gold points), update correctness, and HaluMem's combined accuracy.

    HaluMem's ``memory_acc`` = (integrity records scored 2 + updates judged Correct) / (all
    integrity records, interference included, + all update records), reproduced as ``combined`` (a failed
    verdict counts there as a miss, as in HaluMem's code; recall and update_correct leave it out).
    """
    out: dict[str, Any] = {}
    integrity_rows = integrity_rows or []
    for mtype in MEMORY_TYPES:
        integ = [r for r in integrity_rows if r["memory_type"] == mtype]
        upd = [r for r in update_rows if r["memory_type"] == mtype]
        if not integ and not upd:
            continue
        gold = [r for r in integ if not r["is_interference"]]
        hits = [1.0 if r["score"] == 2 else 0.0 for r in integ] + [1.0 if r["label"] == "Correct" else 0.0 for r in upd]
        out[mtype] = {
            "recall": _mean_metric([None if r["score"] is None else float(r["score"] == 2) for r in gold], n_boot, seed, _users(gold))
            if integrity_rows else None,
            "update_correct": _mean_metric([None if r["label"] is None else float(r["label"] == "Correct") for r in upd], n_boot, seed, _users(upd)),
            "combined": _mean_metric(hits, n_boot, seed, _users(integ) + _users(upd)) if integrity_rows else None,
        }
    return out


def ranking_metrics(rows: list[dict[str, Any]], n_boot: int, seed: int) -> dict[str, Any] | None:
    """Shares of update points whose new version ranks above the original, whose original ranks above (or is
    returned without) the new version, and where neither is returned; None for rows made without an embedder."""
    ranked = [r for r in rows if "rank_new" in r]
    if not ranked:
        return None
    old_first = [r["rank_old"] is not None and not new_above_old(r) for r in ranked]
    return {
        "new_above_old": _mean_metric([float(new_above_old(r)) for r in ranked], n_boot, seed, _users(ranked)),
        "old_above_new": _mean_metric([float(x) for x in old_first], n_boot, seed, _users(ranked)),
        "neither": _mean_metric([float(r["rank_new"] is None and r["rank_old"] is None) for r in ranked], n_boot, seed, _users(ranked)),
    }
