"""HaluMem's side of ``scripts.compare_runs``: how two finished HaluMem runs pair, item by item.

Full runs: per-question QA labels and per-update-point update labels (``halumem_qa.jsonl``, ``halumem_updates.jsonl``,
published copies included), the update links and false alarms, optionally over the first N sessions only, so a
session-limited run is compared with the same sessions of a whole-user run (questions and updates are asked right
after their session's add, so those rows do not depend on later sessions). Retrieval-only runs: question evidence
recall@k at session level (every row has it). Both: LLM calls and tokens per ingested turn. Clusters are users. No
LLM call; the bootstrap and the run lookup are eval/compare.py's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.api import Comparison
from eval.benchmarks.halumem.judge import QA_LABELS  # Correct/Hallucination/Omission: QA's and updates' shared labels
from eval.benchmarks.halumem.public import run_rows
from eval.compare import clusters_of, column, jsonl_rows, paired_difference, paired_rate_difference, returned_token_summaries


def halumem_outcomes(run_dir: Path, sessions: int | None = None) -> dict[str, dict[str, Any]]:
    """Item key -> its outcome, for every scored item of a HaluMem run:

    - QA question or update point (``task`` "qa" / "update"): correct, hallucination, omission (0/1 each); a
      judge failure (label None) counts as none of the three, as in the run's own metrics (a failure stays in
      the denominator);
    - update point of the update links (``task`` "link", runs that report conflict events): right (0/1, the
      save-time check linked it to the memory it replaces);
    - session of the update links (``task`` "alarm"): false alarms and the non-update points they are out of.

    Every item's ``cluster`` is its user. ``sessions`` keeps the rows of sessions 0..sessions-1 only. A writes-only run
    (``benchmark.score_qa=false``) has link and alarm items only."""
    run_dir = Path(run_dir)
    tables = run_rows(run_dir)
    if "qa" not in tables and "update_links" not in tables:
        raise FileNotFoundError(f"{run_dir / 'halumem_qa.jsonl'} is missing: is {run_dir} a finished HaluMem run folder?")

    def kept(row: dict[str, Any]) -> bool:
        return sessions is None or int(row.get("session", 0)) < sessions

    out: dict[str, dict[str, Any]] = {}
    for task, table in (("qa", "qa"), ("update", "updates")):
        for row in filter(kept, tables.get(table, [])):
            label = row.get("label")
            out[f"{task}:{row['key']}"] = {"task": task, "cluster": _user(row),
                                           **{name.lower(): float(label == name) for name in QA_LABELS}}
    for row in filter(kept, tables.get("update_links", [])):
        for point in row.get("points", []):
            out[f"link:{row['key']}:{point['index']}"] = {"task": "link", "cluster": _user(row), "right": float(point["outcome"] == "right")}
        # events, and the alarmed non-update points (None in a run made before they were counted)
        out[f"alarm:{row['key']}"] = {"task": "alarm", "cluster": _user(row), "false_alarms": float(row["false_alarms"]),
                                      "false_alarm_points": row.get("false_alarm_points"),
                                      "non_update_points": float(row["non_update_points"])}  # fmt: skip
    return out


def _user(row: dict[str, Any]) -> str:
    """A HaluMem row's user (its ``uuid``; the key's first part in rows written without it)."""
    return str(row.get("uuid") or str(row["key"]).split(":", 1)[0])


def compare_halumem(base_dir: Path, other_dir: Path, n_samples: int = 2000, seed: int = 0, sessions: int | None = None) -> dict[str, Any]:
    """QA and update correct/hallucination/omission, and the update links (points linked right, false alarms per
    non-update point): each run's rate and the paired difference over the same questions, update points or
    sessions, both runs cut to their first ``sessions`` sessions when given."""
    base, other = halumem_outcomes(base_dir, sessions), halumem_outcomes(other_dir, sessions)
    clusters = clusters_of(base)
    out: dict[str, Any] = {"n_shared": len(set(base) & set(other)), "only_base": len(set(base) - set(other)),
                           "only_other": len(set(other) - set(base)), "sessions": sessions}  # fmt: skip
    for task in ("qa", "update"):
        for label in QA_LABELS:
            name = label.lower()
            out[f"{task}_{name}"] = paired_difference(column(base, name, lambda v, t=task: v["task"] == t),
                                                      column(other, name, lambda v, t=task: v["task"] == t), n_samples, seed, clusters)
    out["link_right"] = paired_difference(column(base, "right"), column(other, "right"), n_samples, seed, clusters)

    # alarmed points where both runs counted them, else events (a run made before points were counted)
    rows = [v for v in (*base.values(), *other.values()) if v["task"] == "alarm"]
    counted = "false_alarm_points" if all(v["false_alarm_points"] is not None for v in rows) else "false_alarms"

    def alarms(outcomes: dict[str, dict[str, Any]]) -> dict[str, tuple[float, float]]:
        return {k: (float(v[counted]), v["non_update_points"]) for k, v in outcomes.items() if v["task"] == "alarm"}

    out["false_alarm"] = {**paired_rate_difference(alarms(base), alarms(other), n_samples, seed, clusters),
                          "counted": "points" if counted == "false_alarm_points" else "events"}
    return out


def compare_retrieval(base_dir: Path, other_dir: Path, n_samples: int = 2000, seed: int = 0, sessions: int | None = None,
                      k: int = 10) -> dict[str, Any]:
    """Two retrieval-only runs: question evidence recall@k at session level (which every row has), overall and per
    question type, each run's value and the paired difference with both intervals, beside the tokens each run's
    question searches returned."""
    from eval.benchmarks.halumem.retrieval_paired import paired_to_base
    from eval.intervals import report_settings

    base_dir, other_dir = Path(base_dir), Path(other_dir)
    budget = int(report_settings()["table_token_budget"])
    base, other = jsonl_rows(base_dir / "halumem_retrievals.jsonl"), jsonl_rows(other_dir / "halumem_retrievals.jsonl")
    paired = paired_to_base(other, base, [k], n_samples, seed)
    out = {"recall": paired["session"]["overall"][f"recall@{k}"],
           "per_category": {t: cell[f"recall@{k}"] for t, cell in paired["session"]["per_group"].items()}}  # fmt: skip
    return {**out, "n_shared": out["recall"].get("n", 0), "k": k, "budget_tokens": budget,
            "returned_tokens": returned_token_summaries(base_dir, other_dir, "qa")}


def write_cost(run_dir: Path, sessions: int | None = None) -> dict[str, Any]:
    """LLM calls and tokens per ingested turn of a HaluMem run (``halumem_sessions.jsonl``; the sessions rows
    record no add seconds, so ``seconds_per_turn`` is None), over the first ``sessions`` sessions when given."""
    metrics = json.loads((Path(run_dir) / "metrics.json").read_text())
    rows = [r for r in run_rows(Path(run_dir)).get("sessions", [])
            if sessions is None or int(str(r["key"]).rsplit(":", 1)[-1]) < sessions]  # fmt: skip
    turns = sum(int(r.get("n_turns", 0)) for r in rows)
    calls = sum(int((r.get("usage") or {}).get("calls", 0)) for r in rows)
    tokens = sum(int((r.get("usage") or {}).get("prompt_tokens", 0)) + int((r.get("usage") or {}).get("completion_tokens", 0)) for r in rows)
    cached = sum(int((r.get("usage") or {}).get("cached_calls", 0)) for r in rows)
    n = max(turns, 1)
    return {"unit": "turn", "turns": turns, "calls_per_turn": calls / n, "tokens_per_turn": tokens / n, "seconds_per_turn": None,
            "cached_call_share": cached / calls if calls else None, "git_sha": metrics.get("metadata", {}).get("git_sha")}


def comparison(retrieval_only: bool) -> Comparison:
    """``core.api.PairedComparable`` for ``HaluMemBenchmark``: full runs by labels, links and false alarms (and may be
    cut to their first sessions), retrieval-only runs by session-level recall."""
    if retrieval_only:
        return Comparison(fields=(("recall", "QA evidence recall@10 (session)"),), cluster_unit="user", quality=compare_retrieval,
                          write_cost=write_cost, returned_tokens=True)  # fmt: skip
    return Comparison(fields=(("qa_correct", "QA correct"), ("qa_hallucination", "QA hallucination"), ("update_correct", "update correct"),
                              ("link_right", "update linked right"), ("false_alarm", "false alarms")),
                      cluster_unit="user", quality=compare_halumem, write_cost=write_cost, cuts_sessions=True)  # fmt: skip
