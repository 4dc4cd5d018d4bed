"""Injected-conflict benchmark (paper Table 3), with what the paper did not measure: false alarms.

For each case the system holds exactly the case's context: each context is ingested once
(through ``seed`` when the system is ``Seedable`` and ``trusted_context`` is on, i.e. without
save-time checks of the context's facts against each other) and snapshotted; before each probe the snapshot is restored (systems that are not ``Snapshottable``
are reset and re-ingested). The probe is then written with ``system.add`` and the system's own
``AddReport`` decides detection:

* strict: some update/reject/flag event names, among its ``old_source_turn_ids``, a context turn
  listed in the case's ``conflicts_with`` (turn ids are ``"<context>:<index>"``);
* lenient: any update/reject/flag event at all.

On non-conflicting probes any event is a false alarm. Misses are explained with
system-agnostic proxies: the gold turn was not among the probe's ``radius_k`` nearest context
turns by embedding ("out of neighbour radius"), the injected number stays within a factor of
two of the true one ("plausible numbers"), the probe was held back by a confidence gate
("queued by gate"), the event named another memory ("wrong memory"), or else the system's
judgement said no conflict ("LLM verdict"). Rows go to ``cases.jsonl`` as they are produced,
so a killed run resumes (the context is re-ingested once; the LLM cache makes that cheap).

No judge: detection is read from the system's own ``AddReport`` events against the suite's gold turn ids,
so ``ctx.judge`` (conf/judge) is never asked here; the numbers of the "plausible numbers" proxy come from
``core.quantities``, the same parser for every system.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time
from dataclasses import asdict
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from eval.benchmarks.conflict_suite import CONFLICT_TYPES, Suite, SuiteCase, load_suite
from eval.context import RunContext
from eval.metrics import bootstrap, bootstrap_ci, format_ci
from eval.tables import FAILURES_COLUMN, failures_cell, is_paper_configuration, row_label
from eval.workers import SystemGuard, run_stage
from core.api import AddReport, DeclaresConflictSignal, MemorySystem, OracleFact, Seedable, Snapshottable, Turn
from core.quantities import quantities

log = logging.getLogger(__name__)

# Paper values for Table 3 (MOSAIC paper, hypertension suite, 50 injected errors). Labelled column only.
# The paper's suite is not public: its row names its own suite, never this project's hypertension suite.
PAPER_SUITE = "the paper's own suite (not public)"
PAPER_SUITE_NOTE = ("The paper's values come from its own 50-error suite, which is not public; data/conflicts/hypertension.json "
                    "was written for this project after the paper's description, so its rows are not the paper's cases.")
PAPER_COLUMN = "paper: MOSAIC 66 overall, numeric 64.3, semantic 69.2, logical 65.2, implicit 72.7, explicit 64.1; baselines 2-14%"
PAPER_VALUES = {"overall": 66.0, "numeric": 64.3, "semantic": 69.2, "logical": 65.2, "explicit": 64.1, "implicit": 72.7}
MISS_REASONS = ("out of neighbour radius", "plausible numbers", "LLM verdict", "queued by gate", "wrong memory")


def as_own_fact(turn: Turn, replaces: tuple[str, ...] = ()) -> Turn:
    """Oracle runs: the turn arrives with itself as its one gold fact (fact id: the turn id), and for a gold judge
    with the labelled turns it contradicts (``replaces``, turn ids = the context facts' ids)."""
    fact = OracleFact(fact_id=turn.turn_id, text=turn.text, subject=turn.speaker, source_turn_ids=(turn.turn_id,), replaces=replaces)
    return dataclasses.replace(turn, oracle_facts=(fact,))


class ConflictBenchmark:
    """Run an injected-conflict suite through any MemorySystem and score its AddReports."""

    calls_judge = False  # scored from AddReports alone: conf/judge stays out of the run's config hash

    def __init__(
        self,
        suite: str,
        name: str = "conflict",
        context_session_time: str = "2024-01-01T09:00:00",
        probe_session_time: str = "2024-02-01T09:00:00",
        radius_k: int = 5,
        limit_cases: int | None = None,
        cases_per_group: int | None = None,
        bootstrap_samples: int = 1000,
        seed: int = 0,
        trusted_context: bool = True,
        oracle_facts: bool = False,
        oracle_conflicts: bool = False,
    ) -> None:
        self.suite_path = suite
        self.name = name
        self.context_session_time = context_session_time
        self.probe_session_time = probe_session_time
        self.radius_k = int(radius_k)
        self.limit_cases = limit_cases
        self.cases_per_group = cases_per_group
        self.bootstrap_samples = int(bootstrap_samples)
        self.seed = int(seed)
        self.trusted_context = bool(trusted_context)
        if oracle_conflicts and not oracle_facts:
            raise ValueError("benchmark.oracle_conflicts=true labels oracle facts, so it needs benchmark.oracle_facts=true (ablation=oracle_judge sets both)")
        self.oracle_facts, self.oracle_conflicts = bool(oracle_facts), bool(oracle_conflicts)
        self.suite: Suite = load_suite(suite)  # fail at construction on a malformed suite

    # -- running ---------------------------------------------------------------------
    def run(self, system: MemorySystem, ctx: RunContext) -> dict[str, Any]:
        # the suite as the run reads it now, checked against the content the run folder is named for
        self.suite = suite = load_suite(self.suite_path, ctx.read_input(self.suite_path))
        cases = self.selected_cases()
        rows = ctx.rows("cases", key_field="id")
        ingests = ctx.rows("ingests", key_field="context")
        snapshottable = isinstance(system, Snapshottable)
        radius = self._radius_sets(ctx, cases)
        bar = tqdm(total=len(cases), initial=sum(probed(rows, c) for c in cases), desc="conflict cases", unit="case")
        workers, guard = ctx.workers, SystemGuard(system)
        for context_id in dict.fromkeys(c.context for c in cases):
            pending = [c for c in cases if c.context == context_id and not probed(rows, c)]
            if not pending:
                continue
            namespace = f"conflict-{suite.name}-{context_id}"
            if snapshottable and guard.parallel_namespaces and workers > 1 and len(pending) > 1:
                self._run_parallel(system, ctx, namespace, context_id, pending, ingests, rows, radius, bar)
                continue
            state = None
            fresh = False
            for case in pending:
                if state is not None:
                    system.restore(namespace, state)
                elif not fresh:
                    bar.set_postfix_str(f"ingesting context {context_id!r}")
                    self._ingest(system, namespace, context_id, ingests)
                    if snapshottable:
                        state = system.snapshot(namespace)
                fresh = False
                row = self._probe(system, namespace, case, radius)
                rows.replace(row)  # replaces a failed try
                bar.update(1)
                bar.set_postfix(detected=sum(bool(r["detected_strict"]) for r in rows.rows() if r.get("conflict")),
                                false_alarms=sum(bool(r["detected_lenient"]) for r in rows.rows() if not r.get("conflict")))
                log.info("%s: conflict=%s strict=%s lenient=%s", case.id, case.conflict, row["detected_strict"], row["detected_lenient"])
                if state is None:
                    system.reset(namespace)  # not snapshottable: the next case re-ingests from scratch
        bar.close()
        done = [rows.get(c.id) for c in cases]
        metrics = aggregate([r for r in done if r is not None], self.bootstrap_samples, self.seed)
        metrics.update({
            "suite": suite.name, "suite_path": self.suite_path, "radius_k": self.radius_k,
            "oracle_facts": self.oracle_facts, "oracle_conflicts": self.oracle_conflicts,
            "slice": {"cases_per_group": self.cases_per_group, "limit_cases": self.limit_cases,
                      "n_suite_cases": len(suite.cases)},
            "snapshot_restore": snapshottable,
            "context_written_with": "seed (no save-time checks)" if self._seeds(system) else "add",
            "conflict_signal": system.conflict_signal if isinstance(system, DeclaresConflictSignal) else None,
            "ingest": {r["context"]: r for r in ingests.rows()},
            # failed LLM work: probes whose write reported failures (retried by the next run of the same command),
            # and the failures the context writes reported
            "failures": {"rows": sum(r["failures"] > 0 for r in done if r is not None),
                         "ingest_turns": sum(int(r.get("failures") or 0) for r in ingests.rows())},
        })  # fmt: skip
        return metrics  # eval.runner adds the system's own metrics()

    def _probe(self, system: MemorySystem, namespace: str, case: SuiteCase, radius: dict[str, list[int]]) -> dict[str, Any]:
        """Write the case's probe into ``namespace`` (holding the case's context) and score the report."""
        started = time.perf_counter()
        probe = self.suite.probe_turn(case, self.probe_session_time)
        if self.oracle_facts:
            gold = tuple(sorted(self.suite.gold_turn_ids(case))) if self.oracle_conflicts else ()
            probe = as_own_fact(probe, replaces=gold)
        report = system.add(namespace, [probe], self.probe_session_time)
        row = score_case(self.suite, case, report, radius.get(case.id))
        row["seconds"] = round(time.perf_counter() - started, 3)
        return row

    def _run_parallel(
        self, system: Any, ctx: RunContext, namespace: str, context_id: str, pending: list[SuiteCase],
        ingests: Any, rows: Any, radius: dict[str, list[int]], bar: tqdm,
    ) -> None:  # fmt: skip
        """run.workers > 1 on a system with per-namespace state: the context is ingested and snapshotted
        once; each worker thread restores the snapshot into its own namespace before each of its probes."""
        self._ingest(system, namespace, context_id, ingests)
        state = system.snapshot(namespace)
        slot = threading.local()
        numbers = itertools.count()
        used: list[str] = []

        def one(case: SuiteCase) -> None:
            if not hasattr(slot, "namespace"):
                slot.namespace = f"{namespace}~worker{next(numbers)}"
                used.append(slot.namespace)
            system.restore(slot.namespace, state)
            rows.replace(self._probe(system, slot.namespace, case, radius))  # replaces a failed try
            log.info("%s: conflict=%s", case.id, case.conflict)
            bar.update(1)

        run_stage(ctx, "cases", one, pending)
        for name in [namespace, *used]:
            system.reset(name)

    def selected_cases(self) -> list[SuiteCase]:
        """The cases this run scores: all, the first ``limit_cases``, or the first ``cases_per_group``
        of each type and of the non-conflicting probes (a slice that keeps every group in view)."""
        cases = self.suite.cases
        if self.cases_per_group:
            taken: dict[str | None, int] = {}
            kept = []
            for case in cases:
                group = case.type if case.conflict else "non-conflicting"
                if taken.get(group, 0) < self.cases_per_group:
                    taken[group] = taken.get(group, 0) + 1
                    kept.append(case)
            cases = kept
        return cases[: self.limit_cases] if self.limit_cases else cases

    def _seeds(self, system: MemorySystem) -> bool:
        """Whether contexts are written with ``seed`` (trusted and the system offers it) or ``add``."""
        return self.trusted_context and isinstance(system, Seedable)

    def _ingest(self, system: MemorySystem, namespace: str, context_id: str, ingests: Any) -> None:
        system.reset(namespace)
        started = time.perf_counter()
        turns = self.suite.context_turns(context_id, self.context_session_time)
        if self.oracle_facts:
            turns = [as_own_fact(turn) for turn in turns]
        seeded = self._seeds(system)
        write = system.seed if seeded else system.add
        report = write(namespace, turns, self.context_session_time)
        if context_id not in ingests:
            ingests.append({
                "context": context_id, "seeded": seeded, "turns": report.n_turns, "stored": len(report.stored),
                "queued": len(report.queued), "conflict_events": len(report.conflict_events), "failures": report.failures,
                "llm_calls": report.usage.calls, "seconds": round(time.perf_counter() - started, 2),
            })  # fmt: skip

    def _radius_sets(self, ctx: RunContext, cases: list[SuiteCase]) -> dict[str, list[int]]:
        """Indices of each probe's ``radius_k`` nearest context turns (embedding proxy for the miss analysis)."""
        out: dict[str, list[int]] = {}
        try:
            for context_id in dict.fromkeys(c.context for c in cases):
                turns = self.suite.contexts[context_id]
                held = np.asarray(ctx.embedder.encode([t["text"] for t in turns]))
                mine = [c for c in cases if c.context == context_id]
                probes = np.asarray(ctx.embedder.encode([c.probe_text for c in mine]))
                for case, vec in zip(mine, probes):
                    out[case.id] = [int(i) for i in np.argsort(-(held @ vec))[: self.radius_k]]
        except Exception as err:  # the proxy only labels misses; the run itself does not depend on it
            log.warning("neighbour-radius proxy unavailable (%s); misses are labelled without it", err)
        return out

    @staticmethod
    def make_table(metrics_list: list[dict[str, Any]], convention: str | None = None) -> pd.DataFrame:
        """Table 3: systems x (overall, numeric, semantic, logical, explicit, implicit, false alarms)."""
        return conflict_table(metrics_list)

    @staticmethod
    def make_extra_tables(metrics_list: list[dict[str, Any]]) -> dict[str, pd.DataFrame]:
        """``conflict_headline``: the README's few columns of Table 3."""
        return {"conflict_headline": headline_table(metrics_list)}


# ------------------------------------------------------------------------------- scoring
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


# Which interval the conflict tables show: cases of one context probe the same stored memories (the cluster of
# eval/intervals.py); the development suites have one context each, too few for a context interval.
INTERVAL_NOTE = "Intervals resample cases; cases of one context share its stored memories, so an interval holds for the suite's contexts only. "


# ------------------------------------------------------------------------------- table
def _suite_label(metrics: dict[str, Any]) -> str:
    """The suite's name, and which slice of it when the run did not score every case."""
    cut = metrics.get("slice") or {}
    parts = []
    if cut.get("cases_per_group"):
        parts.append(f"first {cut['cases_per_group']} per group")
    if cut.get("limit_cases"):
        parts.append(f"first {cut['limit_cases']}")
    name = str(metrics.get("suite", ""))
    return f"{name} (slice: {', '.join(parts)})" if parts else name


def conflict_table(metrics_list: list[dict[str, Any]]) -> pd.DataFrame:
    """Detection (strict) per type and false alarms, one row per run, plus the labelled paper column."""
    columns = ["overall", "numeric", "semantic", "logical", "explicit", "implicit", "false alarms"]
    rows = []
    for m in metrics_list:
        label = row_label(m)
        no_signal = m.get("conflict_signal") is False
        silent = m.get("conflict_events_seen", 0) == 0
        cells = {
            "overall": m.get("detection_rate"),
            **{t: m.get("by_type", {}).get(t) for t in CONFLICT_TYPES},
            "explicit": m.get("explicit"),
            "implicit": m.get("implicit"),
            "false alarms": m.get("false_alarm_rate"),
        }
        row: dict[str, Any] = {"system": label, "suite": _suite_label(m)}
        for col in columns:
            if no_signal:
                row[col] = "0 by construction"
            elif silent:
                row[col] = "0 (no conflict signal raised)"
            else:
                row[col] = format_ci(cells[col])
        row["precision"] = "" if no_signal else format_ci(m.get("precision"))
        # a system that raised no signal is "0 (no conflict signal raised)" in every detection column, lenient too
        row["lenient overall"] = "" if no_signal else "0 (no conflict signal raised)" if silent else format_ci(m.get("lenient", {}).get("detection_rate"))
        row["n (conflict/other)"] = f"{m.get('n_conflicting', 0)}/{m.get('n_non_conflicting', 0)}"
        row["LLM calls/case"] = round((m.get("llm_calls_per_case") or {}).get("mean") or 0.0, 2)
        row["misses"] = misses_cell(m)
        row[FAILURES_COLUMN] = failures_cell(m)
        rows.append(row)
    paper = {"system": PAPER_COLUMN, "suite": PAPER_SUITE}
    paper.update({c: (f"{PAPER_VALUES[c]:.1f}" if c in PAPER_VALUES else "not reported") for c in columns})
    paper.update({"precision": "not reported", "lenient overall": "", "n (conflict/other)": "50/0", "LLM calls/case": "",
                  "misses": "", FAILURES_COLUMN: ""})
    rows.append(paper)
    table = pd.DataFrame(rows).set_index("system")
    table.attrs["caption"] = (
        "Table 3: injected-conflict detection, % with 95% bootstrap CI (strict: event against a memory from a "
        "conflicts_with turn); false alarms = share of non-conflicting probes that raised any event. "
        "Append-only systems raise no conflict signal: 0 by construction. Misses: conflicting probes not detected "
        "(strict). Failures: rows / ingested turns (context and probes) the system failed to store; n/a: not recorded. "
        + INTERVAL_NOTE + PAPER_SUITE_NOTE
    )
    return table


def misses_cell(metrics: dict[str, Any]) -> str:
    """Conflicting probes not detected (strict), as ``"27 of 50"``, from the run's per-reason miss counts."""
    misses = metrics.get("misses")
    if not isinstance(misses, dict) or metrics.get("conflict_signal") is False:
        return ""
    count = sum(int(n) for by_reason in misses.values() if isinstance(by_reason, dict) for n in by_reason.values())
    return f"{count} of {metrics.get('n_conflicting', '?')}"


def _paper_setting(m: dict[str, Any]) -> bool:
    """MOSAIC, configured as the paper did, on the suite written after the paper's description."""
    return str(m.get("metadata", {}).get("system", "")) == "mosaic" and m.get("suite") == "hypertension" and is_paper_configuration(m)


def headline_table(metrics_list: list[dict[str, Any]]) -> pd.DataFrame:
    """The README's view of Table 3: detection, false alarms, precision, misses and failures per run; the paper's
    detection only beside MOSAIC run as the paper configured it on the paper's suite."""
    # the gold-judge study is a ceiling, not a system: its rows stay in conflict.md, out of the README view
    metrics_list = [m for m in metrics_list if not m.get("oracle_conflicts")]
    if not metrics_list:
        return pd.DataFrame()
    rows = []
    for m in sorted(metrics_list, key=lambda run: (_suite_label(run), row_label(run))):
        signal = m.get("conflict_signal") is not False
        silent = "0 (no conflict signal raised)" if m.get("conflict_events_seen", 0) == 0 else None  # as conflict_table says it
        rows.append({
            "system": row_label(m),
            "suite": _suite_label(m),
            "detection": (silent or format_ci(m.get("detection_rate"))) if signal else "0 by construction",
            "false alarms": (silent or format_ci(m.get("false_alarm_rate"))) if signal else "0 by construction",
            "precision": format_ci(m.get("precision")) if signal else "",
            "misses": misses_cell(m),
            FAILURES_COLUMN: failures_cell(m),
            "LLM calls/case": round((m.get("llm_calls_per_case") or {}).get("mean") or 0.0, 2),
        })  # fmt: skip
    if any(_paper_setting(m) for m in metrics_list):  # shown where MOSAIC ran as the paper configured it, as its own row
        rows.append({"system": "paper: MOSAIC (reported)", "suite": PAPER_SUITE, "detection": f"{PAPER_VALUES['overall']:.1f}",
                     "false alarms": "not reported", "precision": "not reported", "misses": "", FAILURES_COLUMN: "", "LLM calls/case": ""})  # fmt: skip
    table = pd.DataFrame(rows).set_index("system")
    table.attrs["caption"] = (
        "Injected conflicts (Table 3, headline columns; every column in results/tables/conflict.md). % [95% bootstrap "
        "CI]; detection is strict; false alarms: share of non-conflicting probes that raised any event. 'paper: "
        "MOSAIC (reported)' is copied from the MOSAIC paper (its own LLM), not measured here. " + INTERVAL_NOTE + PAPER_SUITE_NOTE
    )
    return table
