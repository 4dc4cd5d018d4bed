"""HaluMem's metrics on judged rows (pure functions).

HaluMem's "(all)" convention: a judge failure stays in the denominator and earns no credit,
except target precision, whose denominator is the memories the judge placed in gold fields, as
in HaluMem's code. Every CI comes from ``eval.intervals.bootstrap``: items resampled, and users resampled, then
items within them (the cluster interval; a row's user is its ``uuid``), seeded.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from eval.benchmarks.halumem.data import MEMORY_TYPES, QUESTION_TYPES
from eval.intervals import bootstrap, bootstrap_ci, resampled_mean


def _users(rows: Sequence[dict[str, Any]]) -> list[Any]:
    """Each row's user: the cluster of the cluster interval."""
    return [r.get("uuid") for r in rows]


def _mean_metric(values: Sequence[float], n_boot: int, seed: int, users: Sequence[Any] | None = None) -> dict[str, Any]:
    return bootstrap_ci(list(values), n_samples=n_boot, seed=seed, clusters=None if users is None else list(users))


def _ratio(numerators: np.ndarray, denominators: np.ndarray) -> np.ndarray:
    return numerators.sum(axis=1) / denominators.sum(axis=1)


def _ratio_metric(numerators: Sequence[float], denominators: Sequence[float], n_boot: int, seed: int,
                  users: Sequence[Any] | None = None) -> dict[str, Any]:
    """sum(num) / sum(den), resampling items (numerator and denominator together)."""
    return bootstrap(_ratio, (list(numerators), list(denominators)), n_samples=n_boot, seed=seed,
                     clusters=None if users is None else [list(users)])


def f1_score(precision: float | None, recall: float | None) -> float | None:
    if precision is None or recall is None:
        return None
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def _f1_of_means(precision_values: np.ndarray, recall_values: np.ndarray) -> np.ndarray:
    p, r = resampled_mean(precision_values), resampled_mean(recall_values)
    return np.where(p + r > 0, 2 * p * r / (p + r), 0.0)


def extraction_metrics(integrity_rows: list[dict[str, Any]], accuracy_rows: list[dict[str, Any]], n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Recall, weighted recall, target precision, accuracy, false-memory resistance and F1.

    integrity rows: ``score`` (0/1/2 or None), ``importance``, ``is_interference``.
    accuracy rows: ``score`` (0/1/2 or None), ``in_gold_fields`` (bool or None).
    """
    gold = [r for r in integrity_rows if not r["is_interference"]]
    interference = [r for r in integrity_rows if r["is_interference"]]
    recall_hits = [1.0 if r["score"] == 2 else 0.0 for r in gold]
    target = [r for r in accuracy_rows if r["score"] is not None and r["in_gold_fields"] is True]
    target_values = [0.5 * r["score"] for r in target]
    out: dict[str, Any] = {
        "recall": _mean_metric(recall_hits, n_boot, seed, _users(gold)),
        "weighted_recall": _ratio_metric(
            [0.5 * (r["score"] or 0) * r["importance"] for r in gold], [r["importance"] for r in gold], n_boot, seed, _users(gold)
        ),
        "target_precision": _mean_metric(target_values, n_boot, seed, _users(target)),
        "accuracy": _mean_metric([0.5 * r["score"] if r["score"] is not None else 0.0 for r in accuracy_rows], n_boot, seed, _users(accuracy_rows)),
        "false_memory_resistance": _mean_metric([1.0 if r["score"] == 0 else 0.0 for r in interference], n_boot, seed, _users(interference)),
    }
    # F1 of target precision and recall; the two samples are resampled independently (the cluster interval draws
    # the users once for both)
    out["f1"] = bootstrap(_f1_of_means, target_values, recall_hits, n_samples=n_boot, seed=seed, n=len(gold) + len(target),
                          clusters=[_users(target), _users(gold)])
    out["counts"] = {
        "gold_points": len(gold),
        "interference_points": len(interference),
        "stored_memories": len(accuracy_rows),
        "target_memories": len(target),
        "integrity_judge_failures": sum(r["score"] is None for r in integrity_rows),
        "accuracy_judge_failures": sum(r["score"] is None for r in accuracy_rows),
    }
    return out


def label_metrics(rows: list[dict[str, Any]], labels: Sequence[str], n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Share of each label over all rows (a judge failure, ``label=None``, counts in the denominator)."""
    out: dict[str, Any] = {label.lower(): _mean_metric([1.0 if r["label"] == label else 0.0 for r in rows], n_boot, seed, _users(rows))
                           for label in labels}  # fmt: skip
    out["judge_failures"] = sum(r["label"] is None for r in rows)
    out["n"] = len(rows)
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
    integrity records, interference included, + all update records), reproduced as ``combined``.
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
            "recall": _mean_metric([1.0 if r["score"] == 2 else 0.0 for r in gold], n_boot, seed, _users(gold)) if integrity_rows else None,
            "update_correct": _mean_metric([1.0 if r["label"] == "Correct" else 0.0 for r in upd], n_boot, seed, _users(upd)),
            "combined": _mean_metric(hits, n_boot, seed, _users(integ) + _users(upd)) if integrity_rows else None,
        }
    return out
