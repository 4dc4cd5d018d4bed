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
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from core.api import DeclaresConflictSignal, MemorySystem, OracleFact, Seedable, Snapshottable, Turn
from eval.benchmarks.conflict.compare import comparison as paired_comparison
from eval.benchmarks.conflict.metrics import aggregate, probed, score_case
from eval.benchmarks.conflict.suite import Suite, SuiteCase, load_suite
from eval.benchmarks.conflict.table import conflict_table, headline_table
from eval.context import RunContext
from eval.workers import SystemGuard, run_stage

log = logging.getLogger(__name__)


def as_own_fact(turn: Turn, replaces: tuple[str, ...] = ()) -> Turn:
    """Oracle runs: the turn arrives with itself as its one gold fact (fact id: the turn id), and for a gold judge
    with the labelled turns it contradicts (``replaces``, turn ids = the context facts' ids)."""
    fact = OracleFact(fact_id=turn.turn_id, text=turn.text, subject=turn.speaker, source_turn_ids=(turn.turn_id,), replaces=replaces)
    return dataclasses.replace(turn, oracle_facts=(fact,))


class ConflictBenchmark:
    """Run an injected-conflict suite through any MemorySystem and score its AddReports."""

    calls_judge = False  # scored from AddReports alone: conf/judge stays out of the run's config hash
    input_parameters = ("suite",)  # the file hashed into a run's identity (core.api.DeclaresInputs)

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

    # -- what eval/'s shared reporting asks of this benchmark (core.api's per-benchmark reporting Protocols) --------
    comparison = staticmethod(paired_comparison)  # scripts.compare_runs: eval/benchmarks/conflict/compare.py
