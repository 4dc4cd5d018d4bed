"""The conflict detector and the conflict benchmark with the real default local model (1.5B).

Cases come from the household-finance DEV suite (the hypertension suite is for reporting only).
Detector level: each context turn is one entity in a real MemoryGraph. System level: a few cases
through MosaicMemory (real extraction, gate and detector) with snapshot/restore.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.benchmarks.conflict import ConflictBenchmark
from eval.benchmarks.conflict.suite import load_suite
from eval.context import RunContext
from tests.hydra_config import conf_judge
from mosaic.conflict import ConflictDetector
from mosaic.entity import Entity
from mosaic.graph import MemoryGraph
from tests.integration.baseline_probes import DEV_SUITE, mini_dev_suite

pytestmark = pytest.mark.integration
DEV = DEV_SUITE


def _graph(suite, embedder) -> MemoryGraph:
    graph = MemoryGraph(embedder)
    for turn in suite.context_turns("budget", "2024-01-01T09:00:00"):
        graph.add_entity(Entity(turn.turn_id, turn.text, "persona", source_turn_ids=[turn.turn_id], session_time=turn.session_time))
    return graph


def test_detector_separates_conflicts_from_compatible_statements(default_llm, embedder):
    suite = load_suite(DEV)
    graph = _graph(suite, embedder)
    detector = ConflictDetector(default_llm)
    cases = {c.id: c for c in suite.cases}
    outcome = {}
    for case_id in ("hn-02", "hs-03", "hl-03", "hc-01", "hc-12"):
        probe = Entity(f"probe:{case_id}", cases[case_id].probe_text, "persona", session_time="2024-02-01T09:00:00")
        decisions = detector.check(probe, graph)
        outcome[case_id] = decisions
        assert detector.last_trace["llm_calls"] <= 2  # judgement + one short reason at most
    assert outcome["hn-02"] and outcome["hn-02"][0].old_id == "budget:1" and outcome["hn-02"][0].conflict_type == "numeric"
    assert outcome["hn-02"][0].verdict == "update"  # newer, equally confident evidence supersedes
    assert not outcome["hc-12"], outcome["hc-12"]  # an unrelated new fact is no conflict
    hits = sum(bool(outcome[c]) for c in ("hs-03", "hl-03"))
    false_alarms = sum(bool(outcome[c]) for c in ("hc-01", "hc-12"))
    assert hits >= 1 and false_alarms <= 1, {k: [d.reason for d in v] for k, v in outcome.items()}
    reasons = [d.reason for v in outcome.values() for d in v]
    assert all(r.strip() for r in reasons)


def test_benchmark_runs_cases_through_mosaic(default_llm, embedder, tmp_path):
    from mosaic.memory import MosaicMemory

    # take-home pay, rent, groceries, checking account, dining budget
    suite_path = mini_dev_suite(tmp_path / "mini_dev.json", [0, 1, 7, 12, 17], ("hn-02", "hs-03", "hc-01", "hc-12"))
    system = MosaicMemory(retry=None, llm=default_llm, embedder=embedder, workdir=tmp_path / "system", persist=False)
    ctx = RunContext(run_dir=tmp_path / "run", llm=default_llm, judge=conf_judge(default_llm), workers=1, embedder=embedder, answerer=None)
    metrics = ConflictBenchmark(suite=str(suite_path), bootstrap_samples=100).run(system, ctx)
    assert metrics["n_cases"] == 4 and metrics["snapshot_restore"] is True
    rows = {r["id"]: r for r in map(json.loads, (tmp_path / "run" / "cases.jsonl").read_text().splitlines())}
    assert rows["hn-02"]["detected_strict"], rows["hn-02"]  # rent 2,300 vs 1,650: a plain numeric clash
    assert not rows["hc-12"]["detected_lenient"], rows["hc-12"]
    assert metrics["llm_calls_per_case"]["mean"] > 0
    assert set(metrics) >= {"detection_rate", "by_type", "explicit", "implicit", "false_alarm_rate", "precision", "f1", "n_cases", "llm_calls_per_case"}
