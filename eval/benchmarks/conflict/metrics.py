"""The conflict suite's scoring: one probe's row from the system's own AddReport (strict and lenient detection,
false alarms, the miss's proxy reason), and the suite's rates with bootstrap intervals from those rows."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np

from core.api import AddReport
from core.quantities import quantities
from eval.benchmarks.conflict.suite import CONFLICT_TYPES, Suite, SuiteCase
from eval.metrics import bootstrap, bootstrap_ci

MISS_REASONS = ("out of neighbour radius", "plausible numbers", "LLM verdict", "queued by gate", "wrong memory")


def probed(rows: Any, case: SuiteCase) -> bool:
    """Whether the case has a row that needs no retry (a probe whose write reported failures is redone)."""
    row = rows.get(case.id)
    return row is not None and not row.get("failures")


def score_case(suite: Suite, case: SuiteCase, report: AddReport, radius: list[int] | None = None) -> dict[str, Any]:
    """One case's row: what the system did with the probe, and whether that counts as detection."""
    gold = suite.gold_turn_ids(case)
    events = [("update", e) for e in report.updated] + [("reject", e) for e in report.rejected] + [("flag", e) for e in report.flagged]
    strict_events = [e for _, e in events if gold & set(e.old_source_turn_ids)]
    detected_lenient = bool(events)
    detected_strict = bool(strict_events) if case.conflict else detected_lenient
    reason_event = strict_events[0] if strict_events else (events[0][1] if events else None)
    row: dict[str, Any] = {
        "id": case.id, "context": case.context, "conflict": case.conflict, "type": case.type, "explicit": case.explicit,
        "probe": case.probe_text, "conflicts_with": sorted(gold),
        "detected_strict": detected_strict, "detected_lenient": detected_lenient,
        "verdicts": [kind for kind, _ in events],
        "events": [{"kind": kind, **asdict(e)} for kind, e in events],
        "reason": reason_event.reason if reason_event else "",
        "stored": len(report.stored), "queued": list(report.queued), "failures": report.failures,
        "llm_calls": report.usage.calls, "llm_calls_by_purpose": {p: c.get("calls", 0) for p, c in report.usage.by_purpose.items()},
        "gold_in_radius": None if radius is None else bool({i for i in case.conflicts_with} & set(radius)),
    }  # fmt: skip
    row["miss_reason"] = miss_reason(suite, case, row, radius) if case.conflict and not detected_strict else None
    return row


def miss_reason(suite: Suite, case: SuiteCase, row: dict[str, Any], radius: list[int] | None) -> str:
    """Why a conflicting probe was missed (paper's limitation categories plus two the protocol adds)."""
    if row["detected_lenient"]:
        return "wrong memory"
    if row["queued"] and not row["stored"]:
        return "queued by gate"
    if radius is not None and not set(case.conflicts_with) & set(radius):
        return "out of neighbour radius"
    if case.type == "numeric" and _plausible_numbers(case.probe_text, [suite.contexts[case.context][i]["text"] for i in case.conflicts_with]):
        return "plausible numbers"
    return "LLM verdict"


def _plausible_numbers(probe: str, gold_texts: list[str]) -> bool:
    """The injected numbers stay within a factor of two of the true numbers of the same unit family."""
    held = [q for text in gold_texts for q in quantities(text)]
    pairs = []
    for q in quantities(probe):
        same = [h for h in held if h.family == q.family and len(h.values) == len(q.values)]
        if same:
            pairs.append(min(max(max(a, b) / max(min(a, b), 1e-9) for a, b in zip(q.values, h.values)) for h in same))
    return bool(pairs) and max(pairs) <= 2.0


def _rate(rows: list[dict[str, Any]], value: Any, samples: int, seed: int) -> dict[str, Any]:
    """Mean of ``value(row)`` with the per-case interval and the one over contexts then cases within them: the cases of
    one context probe the same stored memories, so they are the suite's cluster (``n_clusters``; a suite of one
    context has an interval for that context only)."""
    return bootstrap_ci([float(value(r)) for r in rows], n_samples=samples, seed=seed, clusters=[r["context"] for r in rows])


def _precision_f1(rows: list[dict[str, Any]], key: str, samples: int, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Precision and F1 over cases, with a case-resampling bootstrap CI (the same resamples for both)."""
    conflict = [float(r["conflict"]) for r in rows]
    detected = [float(bool(r[key])) for r in rows]

    def precision_recall(conflict: np.ndarray, detected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        tp = (conflict * detected).sum(axis=1)
        fp = ((1 - conflict) * detected).sum(axis=1)
        fn = (conflict * (1 - detected)).sum(axis=1)
        return np.where(tp + fp > 0, tp / (tp + fp), np.nan), np.where(tp + fn > 0, tp / (tp + fn), np.nan)

    def precision(conflict: np.ndarray, detected: np.ndarray) -> np.ndarray:
        return precision_recall(conflict, detected)[0]

    def f1(conflict: np.ndarray, detected: np.ndarray) -> np.ndarray:
        p, r = precision_recall(conflict, detected)
        return np.where((p > 0) & (r > 0), 2 * p * r / (p + r), np.where(np.isnan(p) | np.isnan(r), np.nan, 0.0))

    cases = (conflict, detected)
    contexts = [[r["context"] for r in rows]]
    return (
        bootstrap(precision, cases, n_samples=samples, seed=seed, n=len(rows), clusters=contexts),
        bootstrap(f1, cases, n_samples=samples, seed=seed, n=len(rows), clusters=contexts),
    )


def _block(rows: list[dict[str, Any]], key: str, samples: int, seed: int) -> dict[str, Any]:
    pos = [r for r in rows if r["conflict"]]
    neg = [r for r in rows if not r["conflict"]]
    precision, f1 = _precision_f1(rows, key, samples, seed)
    def detected(r: dict[str, Any]) -> bool:
        return bool(r[key])

    return {
        "detection_rate": _rate(pos, detected, samples, seed),
        "by_type": {t: _rate([r for r in pos if r["type"] == t], detected, samples, seed) for t in CONFLICT_TYPES},
        "explicit": _rate([r for r in pos if r["explicit"] is True], detected, samples, seed),
        "implicit": _rate([r for r in pos if r["explicit"] is False], detected, samples, seed),
        "false_alarm_rate": _rate(neg, lambda r: r["detected_lenient"], samples, seed),
        "precision": precision,
        "f1": f1,
    }


def aggregate(rows: list[dict[str, Any]], samples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """metrics.json body: strict scoring at the top level (the issue's keys), lenient alongside."""
    metrics = _block(rows, "detected_strict", samples, seed)
    misses = [r for r in rows if r["conflict"] and not r["detected_strict"]]
    metrics.update({
        "n_cases": len(rows),
        "n_conflicting": sum(1 for r in rows if r["conflict"]),
        "n_non_conflicting": sum(1 for r in rows if not r["conflict"]),
        "llm_calls_per_case": _rate(rows, lambda r: r["llm_calls"], samples, seed),
        "contexts": sorted({str(r["context"]) for r in rows}),  # the clusters of every cluster interval
        "scoring": "strict: an update/reject/flag event against a memory derived from a conflicts_with turn; false alarms: any event on a non-conflicting probe",
        "lenient": _block(rows, "detected_lenient", samples, seed),
        "misses": {
            t: {reason: sum(1 for r in misses if r["type"] == t and r["miss_reason"] == reason) for reason in MISS_REASONS}
            if any(r["verdicts"] for r in rows) else {"no conflict signal raised": sum(1 for r in misses if r["type"] == t)}
            for t in CONFLICT_TYPES
        },
        "conflict_events_seen": sum(len(r["verdicts"]) for r in rows),
        "verdict_counts": {v: sum(r["verdicts"].count(v) for r in rows) for v in ("update", "reject", "flag")},
    })  # fmt: skip
    return metrics
