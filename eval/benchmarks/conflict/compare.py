"""The conflict suite's side of ``scripts.compare_runs``: how two finished suite runs pair, case by case.

Per case: detection (conflicting probes, strict) and false alarm (the other probes, lenient), from ``cases.jsonl``;
clusters are the cases' contexts (each context's probes are checked against one ingested context). Write cost per
probe, the suite's checked writes (the suite records calls and seconds per probe, not tokens). No LLM call; the
bootstrap and the run lookup are eval/compare.py's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.api import Comparison
from eval.compare import clusters_of, column, jsonl_rows, paired_difference


def conflict_outcomes(run_dir: Path) -> dict[str, dict[str, Any]]:
    """case id -> {detected (conflicting probes, strict) or false_alarm (the others, lenient), type, cluster (the
    case's context: its probes are checked against one ingested context)}."""
    out: dict[str, dict[str, Any]] = {}
    for row in jsonl_rows(Path(run_dir) / "cases.jsonl", "id"):
        if row.get("conflict"):
            out[row["id"]] = {"detected": float(bool(row["detected_strict"])), "type": row.get("type"), "cluster": row.get("context")}
        else:
            out[row["id"]] = {"false_alarm": float(bool(row["detected_lenient"])), "type": None, "cluster": row.get("context")}
    return out


def compare_conflict(base_dir: Path, other_dir: Path, n_samples: int = 2000, seed: int = 0, sessions: int | None = None) -> dict[str, Any]:
    """Detection and false-alarm rates: each run's value and the paired difference over the same cases."""
    base, other = conflict_outcomes(base_dir), conflict_outcomes(other_dir)
    clusters = clusters_of(base)
    return {"n_shared": len(set(base) & set(other)),
            "detected": paired_difference(column(base, "detected"), column(other, "detected"), n_samples, seed, clusters),
            "false_alarm": paired_difference(column(base, "false_alarm"), column(other, "false_alarm"), n_samples, seed, clusters)}


def write_cost(run_dir: Path, sessions: int | None = None) -> dict[str, Any]:
    """What the suite's checked writes (its probes, ``cases.jsonl``) cost per probe: LLM calls (all and by purpose)
    and seconds; tokens are not recorded per probe."""
    run_dir = Path(run_dir)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    cases = jsonl_rows(run_dir / "cases.jsonl", "id")
    n = max(len(cases), 1)
    purposes: dict[str, float] = {}
    for case in cases:
        for purpose, count in (case.get("llm_calls_by_purpose") or {}).items():
            purposes[purpose] = purposes.get(purpose, 0.0) + count
    return {"unit": "probe", "turns": len(cases), "calls_per_turn": sum(int(c.get("llm_calls", 0)) for c in cases) / n,
            "tokens_per_turn": None, "seconds_per_turn": sum(float(c.get("seconds") or 0) for c in cases) / n,
            "by_purpose_per_turn": {p: {"calls": v / n} for p, v in sorted(purposes.items())},
            "git_sha": metrics.get("metadata", {}).get("git_sha")}  # fmt: skip


def comparison(retrieval_only: bool) -> Comparison:
    """``core.api.PairedComparable`` for ``ConflictBenchmark`` (the suite has no retrieval-only runs)."""
    return Comparison(fields=(("detected", "detection"), ("false_alarm", "false alarms")), cluster_unit="context",
                      quality=compare_conflict, write_cost=write_cost, cost_unit="probe (tokens are not recorded per probe)")  # fmt: skip
