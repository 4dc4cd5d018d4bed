"""MOSAIC's accounting: what the memory did and what it cost, in the terms metrics.json reports.

``MosaicAccounting`` keeps the write-path counters, the cost row of every ingested turn (LLM calls and tokens
by purpose, seconds), and the work of namespace objects that were dropped (reset) or replaced (restore), so a
process's totals stay whole; it turns them into ``metrics()``, ``cost_per_turn()``, ``mechanism_counts()`` and
``run_metadata()``. Kept apart from ``mosaic.memory`` so the write and read paths read as the mechanism alone.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from core.api import AddReport, LLMUsage, Turn
from core.tally import Tally

if TYPE_CHECKING:
    from mosaic.extract import EntityExtractor, ExtractionResult
    from mosaic.gate import ConfidenceGate

# The write path's own counters (every namespace adds to them, possibly at once).
WRITE_COUNTERS = ("turns", "entities_extracted", "committed", "queued", "updated", "rejected", "flagged", "stale_decisions", "id_collisions")
# The per-namespace parts whose ``stats`` metrics() reports, by report label.
PARTS = (("scorer", "scorer"), ("communities", "communities"), ("retriever", "retriever"), ("conflict", "detector"))
# Entries of those ``stats`` that hold a current value, not a running count: kept as they are, never subtracted or summed
# over namespaces that were replaced.
GAUGES = frozenset({"last_rescored", "last_push_rounds", "last_drift", "refresh_interval", "drift"})
# The save-time check's own counters that say what it cost: checks run, LLM judgements made, and the
# checks decided without the LLM (no candidate, numeric rule, the judge radius, no clash proposed).
CHECK_COUNTERS = ("checks", "no_candidates", "numeric_hits", "llm_calls", "llm_hits", "skipped_far", "skipped_unproposed")


def _is_count(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass
class Work:
    """What one namespace object did, in the terms metrics() reports: its parts' counters, the entities each
    search scanned, the NCS drift measurements and the cost rows of the turns it ingested.

    Why: the conflict experiment restores a snapshot before every probe, which replaces the namespace object;
    without this record metrics() saw only the last probe's counters and the context's cost rows once more."""

    stats: dict[str, dict[str, Any]] = field(default_factory=dict)
    scans: Counter[int] = field(default_factory=Counter)
    drifts: list[dict[str, Any]] = field(default_factory=list)
    cost_log: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(cls, space: Any) -> Work:
        """The record of a ``mosaic.memory`` namespace (its parts, scan histogram, drifts and cost rows) as it is now."""
        stats = {label: dict(found) for label, attr in PARTS
                 if isinstance(found := getattr(getattr(space, attr, None), "stats", None), dict)}  # fmt: skip
        return cls(stats, Counter(space.retriever.scan_histogram), list(space.scorer.stats.get("drift", [])), list(space.cost_log))

    def since(self, start: Work | None) -> Work:
        """The work done after ``start`` (counters minus start's; gauges as they are now)."""
        if start is None:
            return self
        stats = {
            label: {key: value - start.stats.get(label, {}).get(key, 0)
                    if key not in GAUGES and _is_count(value) and _is_count(start.stats.get(label, {}).get(key, 0)) else value
                    for key, value in part.items()}
            for label, part in self.stats.items()
        }  # fmt: skip
        return Work(stats, self.scans - start.scans, self.drifts[len(start.drifts):], self.cost_log[len(start.cost_log):])

    def counts_only(self) -> Work:
        """The running counts alone: what a replaced namespace leaves to the process's totals."""
        stats = {label: {k: v for k, v in part.items() if k not in GAUGES and _is_count(v)} for label, part in self.stats.items()}
        return Work(stats, self.scans, self.drifts, self.cost_log)


class MosaicAccounting:
    """The counters and cost rows of one MosaicMemory, and the reports made from them.

    ``spaces`` (the memory's live namespaces by name) is passed in by the memory at each report: the accounting
    holds only what outlives a namespace object (the write counters and the work of dropped/replaced ones).
    """

    def __init__(self) -> None:
        self.write = Tally(WRITE_COUNTERS)
        self._replaced: list[Work] = []  # work of namespace objects dropped by reset or replaced by restore
        self._replaced_lock = threading.Lock()

    @staticmethod
    def run_metadata(extraction_source: str) -> dict[str, Any]:
        """metadata.system_metadata of a run: where entities came from, and the oracle study's row name (eval.tables.row_label)."""
        if extraction_source == "oracle":
            return {"row_label": "MOSAIC with the oracle extractor", "extraction_source": "oracle"}
        return {"extraction_source": extraction_source}

    @staticmethod
    def cost_rows(turns: list[Turn], extractions: list[ExtractionResult], report: AddReport, seconds: float) -> list[dict[str, Any]]:
        """One cost row per turn of a write group: a group's calls and seconds are booked on its last turn."""
        stored_by_turn = Counter(turn_id for item in report.stored for turn_id in item.source_turn_ids[:1])
        rows = []
        for position, (turn, extraction) in enumerate(zip(turns, extractions)):
            last = position == len(turns) - 1
            usage = report.usage if last else LLMUsage()
            row = {
                "turn_id": turn.turn_id,
                "seconds": seconds if last else 0.0,
                "entities": len(extraction.entities),
                "stored": stored_by_turn[turn.turn_id] if len(turns) > 1 else len(report.stored),
                "usage": {"calls": usage.calls, "prompt_tokens": usage.prompt_tokens,
                          "completion_tokens": usage.completion_tokens, "by_purpose": usage.by_purpose},
            }  # fmt: skip
            if len(turns) > 1:
                row["group"] = [t.turn_id for t in turns]
            rows.append(row)
        return rows

    def retire(self, space: Any | None) -> None:
        """Keep the counts of a namespace object about to be dropped, so this process's totals stay whole."""
        if space is not None:
            work = Work.of(space).since(space.restored_from).counts_only()
            with self._replaced_lock:
                self._replaced.append(work)

    def work(self, spaces: Mapping[str, Any], namespace: str | None = None) -> list[Work]:
        """The work of every namespace object this process used (or of ``namespace``'s live one alone)."""
        live = [Work.of(space).since(space.restored_from) for ns, space in list(spaces.items()) if namespace in (None, ns)]
        if namespace is not None:
            return live
        with self._replaced_lock:
            return [*self._replaced, *live]

    def cost_per_turn(self, spaces: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """LLM calls and tokens per turn this process ingested, split by purpose, over one namespace or all
        (a restored namespace's rows count from its restore: the snapshot's rows were counted where they were made)."""
        logs = [row for work in self.work(spaces, namespace) for row in work.cost_log]
        total = LLMUsage()
        for row in logs:
            u = row["usage"]
            total.merge(LLMUsage(calls=u["calls"], prompt_tokens=u["prompt_tokens"], completion_tokens=u["completion_tokens"], by_purpose=u["by_purpose"]))
        n = max(len(logs), 1)
        return {
            "turns": len(logs),
            "seconds_per_turn": sum(r["seconds"] for r in logs) / n,
            "calls_per_turn": total.calls / n,
            "prompt_tokens_per_turn": total.prompt_tokens / n,
            "completion_tokens_per_turn": total.completion_tokens / n,
            "by_purpose_per_turn": {p: {k: v / n for k, v in c.items()} for p, c in total.by_purpose.items()},
        }

    def metrics(self, spaces: Mapping[str, Any], extractor: EntityExtractor, gate: ConfidenceGate) -> dict[str, Any]:
        """System-side numbers for metrics.json: cost per turn, write-path counters, component stats."""
        out: dict[str, Any] = {
            "cost_per_turn": self.cost_per_turn(spaces),
            "write": dict(self.write),
            "extraction": dict(extractor.stats),
            "gate": dict(gate.stats),
            "queue_size": sum(len(s.queue) for s in list(spaces.values())),
        }
        work = self.work(spaces)
        for label, _ in PARTS:
            stats = [w.stats[label] for w in work if label in w.stats]
            if stats:
                out[label] = sum_stats(stats)
        out["mechanisms"] = self.mechanism_counts(spaces, work)
        return out

    def mechanism_counts(self, spaces: Mapping[str, Any], work: list[Work] | None = None) -> dict[str, Any]:
        """What each MOSAIC mechanism did, over every namespace loaded in this process.

        ``entities``: what memory holds now (graph, gate queue, rejected list); every other count is this
        process's work, in namespaces still loaded and in those it reset or replaced by a restore (a restore's
        own rebuild of communities and scores is not counted).
        ``conflict_events``: save-time verdicts applied (update supersedes the held entity).
        ``retrieval``: entities scanned per query, and how the dual path decided: ``lsh_confident_hits``
        (LSH votes were trusted) vs ``llm_routing_fallbacks`` (the LLM picked communities) and the
        other fallbacks. ``ncs``: full PageRank refreshes (the first write of a namespace is one) and the
        score drift measured at each periodic refresh. ``leiden_reruns``: full community detections.
        """
        live = list(spaces.values())
        work = self.work(spaces) if work is None else work
        statuses: Counter[str] = Counter(e.status for s in live for e in s.graph.entities(include_inactive=True))
        scans: Counter[int] = Counter()
        for w in work:
            scans.update(w.scans)
        part = {label: [w.stats[label] for w in work if label in w.stats] for label, _ in PARTS}
        retrieval = sum_stats(part["retriever"])
        drifts = [d for w in work for d in w.drifts]
        return {
            "entities": {
                "active": statuses["active"], "flagged": statuses["flagged"], "superseded": statuses["superseded"],
                "queued": sum(len(s.queue) for s in live), "rejected": sum(len(s.rejected) for s in live),
                "turns_kept": sum(len(s.turns) for s in live),
            },
            "conflict_events": {"update": self.write["updated"], "reject": self.write["rejected"], "flag": self.write["flagged"]},
            "conflict_checks": sum_stats([{k: v for k, v in stats.items() if k in CHECK_COUNTERS} for stats in part["conflict"]]),
            "retrieval": {
                "mode": live[0].retriever.mode if live else None,
                "queries": int(retrieval.get("queries", 0)),
                "candidates_scanned": histogram_summary(scans),
                "lsh_confident_hits": int(retrieval.get("lsh_hits", 0)),
                "llm_routing_fallbacks": int(retrieval.get("llm_fallbacks", 0)),
                "llm_route_failures": int(retrieval.get("llm_route_failures", 0)),
                "turn_matches": int(retrieval.get("turn_matches", 0)),
                "other_fallbacks": {key: int(retrieval.get(key, 0)) for key in ("multiprobe_fallbacks", "centroid_fallbacks", "exact_fallbacks")},
            },
            "ncs": {
                "writes": sum(int(stats.get("writes", 0)) for stats in part["scorer"]),
                "full_refreshes": sum(int(stats.get("full_refreshes", 0)) for stats in part["scorer"]),
                "drift_measurements": len(drifts),
                "max_abs_score_drift": max((d["max_abs_score_drift"] for d in drifts), default=None),
                "min_top10_agreement": min((d["top10_agreement"] for d in drifts), default=None),
            },
            "leiden_reruns": sum(int(stats.get("leiden_runs", 0)) for stats in part["communities"]),
        }


def mechanism_row(mechanisms: dict[str, Any]) -> dict[str, Any]:
    """``mechanism_counts()`` as recorded in metrics.json, flattened for one comparison table row
    (core.api.SummarisesMechanisms: scripts.compare_runs prints it under its table)."""
    retrieval, ncs = mechanisms["retrieval"], mechanisms["ncs"]
    return {**{f"entities_{k}": v for k, v in mechanisms["entities"].items()},
            **{f"events_{k}": v for k, v in mechanisms["conflict_events"].items()},
            "scanned_per_query": retrieval["candidates_scanned"]["mean"], "lsh_confident_hits": retrieval["lsh_confident_hits"],
            "llm_routing_fallbacks": retrieval["llm_routing_fallbacks"], "turn_matches": retrieval.get("turn_matches", 0),
            "ncs_full_refreshes": ncs["full_refreshes"], "ncs_drift_measurements": ncs["drift_measurements"],
            "ncs_max_drift": ncs["max_abs_score_drift"], "leiden_reruns": mechanisms["leiden_reruns"]}  # fmt: skip


def histogram_summary(histogram: Counter[int]) -> dict[str, Any]:
    """Mean, 95th percentile and max of values given as value -> count (None when empty)."""
    n = sum(histogram.values())
    if not n:
        return {"queries": 0, "mean": None, "p95": None, "max": None}
    values = sorted(histogram)
    cumulative, p95 = 0, values[-1]
    for value in values:
        cumulative += histogram[value]
        if cumulative >= 0.95 * n:
            p95 = value
            break
    return {"queries": n, "mean": sum(v * c for v, c in histogram.items()) / n, "p95": p95, "max": values[-1]}


def sum_stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Add numeric counters across namespaces; non-numeric values keep the last namespace's."""
    out: dict[str, Any] = {}
    for row in rows:
        for key, value in row.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and isinstance(out.get(key, 0), (int, float)):
                out[key] = out.get(key, 0) + value
            else:
                out[key] = value
    return out
