"""Paired comparison of two finished runs over the same items: what a variant changed, with a CI.

Two rows of a table each carry their own bootstrap CI, but whether a variant is better or worse
than its base is a question about the *difference* on the same questions (or conflict cases), and
paired resampling answers it with a much narrower interval than two overlapping CIs suggest. This
module reads run folders as ``eval.runner`` writes them and makes no LLM call:

- LoCoMo runs: per-question judge correctness and token F1 (``judgements.jsonl``,
  ``predictions.jsonl``), overall and per category;
- conflict-suite runs: per-case detection (strict, conflicting probes) and false alarm (lenient,
  non-conflicting probes), from ``cases.jsonl``;
- HaluMem runs: per-question QA labels and per-update-point update labels (``halumem_qa.jsonl``,
  ``halumem_updates.jsonl``, published copies included), optionally over the first N sessions only, so a
  session-limited run is compared with the same sessions of a whole-user run (questions and updates are
  asked right after their session's add, so those rows do not depend on later sessions);
- both: what the write path cost per ingested turn (calls, tokens, seconds), by purpose.

The paired bootstrap resamples item indices (the same index for both runs) through
``eval.intervals.bootstrap``, the harness's one bootstrap, and gives two intervals for every difference: per
item, and over clusters then items within them (LoCoMo conversations, HaluMem users, conflict-suite contexts),
still paired within the resampled clusters.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from eval.benchmarks.halumem.judge import QA_LABELS as HALUMEM_LABELS  # Correct/Hallucination/Omission: QA's and updates' shared labels
from eval.benchmarks.halumem.public import run_rows
from eval.budget import row_returned_tokens
from eval.intervals import bootstrap, resampled_mean
from eval.metrics import token_f1
from eval.tokens import token_summary
from eval.rows import SCORED_ROW_FIELD, read_rows, scores


def _jsonl(path: Path, key_field: str = "key") -> list[dict[str, Any]]:
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: is {path.parent} a finished run folder (run.py writes it)?")
    return read_rows(path, key_field)


def run_kind(run_dir: Path) -> str:
    """'locomo', 'halumem' or 'conflict' (what the run's metrics.json says it measured); '<benchmark>_retrieval' for a
    retrieval-only run (``benchmark.stages=[ingest, retrieve]``: no answers, compared by evidence recall)."""
    metrics = json.loads((Path(run_dir) / "metrics.json").read_text())
    kind = str(metrics.get("benchmark") or metrics.get("metadata", {}).get("benchmark"))
    return f"{kind}_retrieval" if tuple(metrics.get("stages") or ()) == ("ingest", "retrieve") else kind


def compare_retrieval(base_dir: Path, other_dir: Path, n_samples: int = 2000, seed: int = 0, k: int = 10) -> dict[str, Any]:
    """Two retrieval-only runs of one benchmark: evidence recall@k (LoCoMo: turn level, categories 1-4 overall; HaluMem:
    session level, which every row has) and, for LoCoMo, recall at the tables' fixed token budget, each run's value and
    the paired difference with both intervals (eval/retrieval_paired.py), beside the tokens each run returned."""
    from eval.intervals import report_settings
    from eval.retrieval_paired import halumem_paired, locomo_paired

    base_dir, other_dir = Path(base_dir), Path(other_dir)
    budget = int(report_settings()["table_token_budget"])
    if (base_dir / "retrievals.jsonl").is_file():
        base, other = _jsonl(base_dir / "retrievals.jsonl"), _jsonl(other_dir / "retrievals.jsonl")
        paired = locomo_paired(other, base, [k], k, [budget], n_samples, seed)
        level = paired["turn"]
        undefined = {"mean": None, "base": None, "other": None}  # rows that record no tokens
        out = {"recall": level["overall"][f"recall@{k}"],
               "budget": (paired.get("evidence_recall_at_budget") or {}).get("overall", {}).get(str(budget), undefined),
               "per_category": {c: cell[f"recall@{k}"] for c, cell in level["per_group"].items()}}  # fmt: skip
    else:
        base, other = _jsonl(base_dir / "halumem_retrievals.jsonl"), _jsonl(other_dir / "halumem_retrievals.jsonl")
        paired = halumem_paired(other, base, [k], n_samples, seed)
        out = {"recall": paired["session"]["overall"][f"recall@{k}"],
               "per_category": {t: cell[f"recall@{k}"] for t, cell in paired["session"]["per_group"].items()}}  # fmt: skip
    summaries = [json.loads((d / "metrics.json").read_text())["retrieval"].get("returned_tokens") or {} for d in (base_dir, other_dir)]
    summaries = [s.get("qa", s) for s in summaries]  # HaluMem: the questions' searches
    return {**out, "n_shared": out["recall"].get("n", 0), "k": k, "budget_tokens": budget,
            "returned_tokens": {"base": summaries[0], "other": summaries[1]}}


def locomo_outcomes(run_dir: Path) -> dict[str, dict[str, Any]]:
    """question key -> {correct (0/1, the judge), f1 (token F1 with the gold answer), category, cluster (the conversation),
    returned_tokens (of everything the search returned, eval/tokens.py)}."""
    run_dir = Path(run_dir)
    judged = {row["key"]: row for row in _jsonl(run_dir / "judgements.jsonl")}
    out: dict[str, dict[str, Any]] = {}
    for row in _jsonl(run_dir / "predictions.jsonl"):
        verdict = judged.get(row["key"])
        if verdict is None or verdict.get("correct") is None or (SCORED_ROW_FIELD in verdict and not scores(verdict, row)):
            continue  # unjudged (a judge failure) or judged another answer than this one: not comparable
        out[row["key"]] = {"correct": float(bool(verdict["correct"])), "f1": token_f1(row.get("prediction"), row.get("gold")),
                           "category": row.get("category"), "cluster": row.get("sample_id"), "returned_tokens": row_returned_tokens(row)}
    return out


def conflict_outcomes(run_dir: Path) -> dict[str, dict[str, Any]]:
    """case id -> {detected (conflicting probes, strict) or false_alarm (the others, lenient), type, cluster (the
    case's context: its probes are checked against one ingested context)}."""
    out: dict[str, dict[str, Any]] = {}
    for row in _jsonl(Path(run_dir) / "cases.jsonl", "id"):
        if row.get("conflict"):
            out[row["id"]] = {"detected": float(bool(row["detected_strict"])), "type": row.get("type"), "cluster": row.get("context")}
        else:
            out[row["id"]] = {"false_alarm": float(bool(row["detected_lenient"])), "type": None, "cluster": row.get("context")}
    return out


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
                                           **{name.lower(): float(label == name) for name in HALUMEM_LABELS}}
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


def _cluster_labels(keys: list[str], clusters: dict[str, Any] | None) -> list[list[Any]] | None:
    return None if clusters is None else [[clusters.get(k) for k in keys]]


def paired_rate_difference(base: dict[str, tuple[float, float]], other: dict[str, tuple[float, float]], n_samples: int = 2000,
                           seed: int = 0, clusters: dict[str, Any] | None = None) -> dict[str, Any]:
    """``other`` rate minus ``base`` rate, each a ratio of sums (count, out of) over the groups both have, with a
    paired bootstrap over those groups (HaluMem's false alarms: sessions of false alarms out of non-update points);
    with ``clusters`` (key -> cluster) also over clusters, then groups within them."""
    keys = sorted(set(base) & set(other))
    counts_base = [base[k][0] for k in keys]
    counts_other = [other[k][0] for k in keys]
    out_of = [base[k][1] for k in keys]

    def rate_difference(b: np.ndarray, o: np.ndarray, n: np.ndarray) -> np.ndarray:
        return (o.sum(axis=1) - b.sum(axis=1)) / n.sum(axis=1)

    stat = bootstrap(rate_difference, (counts_base, counts_other, out_of), n_samples=n_samples, seed=seed, n=len(keys),
                     clusters=_cluster_labels(keys, clusters))
    total = float(sum(out_of))
    stat["base"] = sum(counts_base) / total if total else None
    stat["other"] = sum(counts_other) / total if total else None
    return stat


def paired_difference(base: dict[str, float], other: dict[str, float], n_samples: int = 2000, seed: int = 0,
                      clusters: dict[str, Any] | None = None) -> dict[str, Any]:
    """Mean of ``other - base`` over the keys both have, with a paired percentile-bootstrap CI; with ``clusters``
    (key -> cluster) also the cluster interval (clusters resampled, then questions within them, each question's
    difference kept whole: paired within the resampled clusters)."""
    keys = sorted(set(base) & set(other))
    diffs = np.array([other[k] - base[k] for k in keys], dtype=float)
    stat = bootstrap(resampled_mean, diffs, n_samples=n_samples, seed=seed, n=len(keys), clusters=_cluster_labels(keys, clusters))
    stat["base"] = float(np.mean([base[k] for k in keys])) if keys else None
    stat["other"] = float(np.mean([other[k] for k in keys])) if keys else None
    return stat


def _clusters(outcomes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """item key -> its cluster (conversation, user, context), for the cluster interval of every difference."""
    return {k: v.get("cluster") for k, v in outcomes.items()}


def _column(outcomes: dict[str, dict[str, Any]], field: str, where: Any = None) -> dict[str, float]:
    return {k: v[field] for k, v in outcomes.items() if field in v and (where is None or where(v))}


def compare_locomo(base_dir: Path, other_dir: Path, n_samples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Judge accuracy and F1, overall and per category: each run's value and the paired difference; beside them
    the tokens each run's searches returned over the shared questions (accuracy at what context cost)."""
    base, other = locomo_outcomes(base_dir), locomo_outcomes(other_dir)
    clusters = _clusters(base)
    out: dict[str, Any] = {"n_shared": len(set(base) & set(other)), "only_base": len(set(base) - set(other)),
                           "only_other": len(set(other) - set(base))}  # fmt: skip
    for field in ("correct", "f1"):
        out[field] = paired_difference(_column(base, field), _column(other, field), n_samples, seed, clusters)
    categories = sorted({v["category"] for v in base.values() if v["category"] is not None})
    out["per_category"] = {
        str(c): paired_difference(_column(base, "correct", lambda v, c=c: v["category"] == c),
                                  _column(other, "correct", lambda v, c=c: v["category"] == c), n_samples, seed, clusters)
        for c in categories
    }
    shared = set(base) & set(other)
    out["returned_tokens"] = {name: token_summary(v["returned_tokens"] for k, v in run.items() if k in shared)
                              for name, run in (("base", base), ("other", other))}  # fmt: skip
    return out


def compare_conflict(base_dir: Path, other_dir: Path, n_samples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Detection and false-alarm rates: each run's value and the paired difference over the same cases."""
    base, other = conflict_outcomes(base_dir), conflict_outcomes(other_dir)
    clusters = _clusters(base)
    return {"n_shared": len(set(base) & set(other)),
            "detected": paired_difference(_column(base, "detected"), _column(other, "detected"), n_samples, seed, clusters),
            "false_alarm": paired_difference(_column(base, "false_alarm"), _column(other, "false_alarm"), n_samples, seed, clusters)}


def compare_halumem(base_dir: Path, other_dir: Path, n_samples: int = 2000, seed: int = 0, sessions: int | None = None) -> dict[str, Any]:
    """QA and update correct/hallucination/omission, and the update links (points linked right, false alarms per
    non-update point): each run's rate and the paired difference over the same questions, update points or
    sessions, both runs cut to their first ``sessions`` sessions when given."""
    base, other = halumem_outcomes(base_dir, sessions), halumem_outcomes(other_dir, sessions)
    clusters = _clusters(base)
    out: dict[str, Any] = {"n_shared": len(set(base) & set(other)), "only_base": len(set(base) - set(other)),
                           "only_other": len(set(other) - set(base)), "sessions": sessions}  # fmt: skip
    for task in ("qa", "update"):
        for label in HALUMEM_LABELS:
            name = label.lower()
            out[f"{task}_{name}"] = paired_difference(_column(base, name, lambda v, t=task: v["task"] == t),
                                                      _column(other, name, lambda v, t=task: v["task"] == t), n_samples, seed, clusters)
    out["link_right"] = paired_difference(_column(base, "right"), _column(other, "right"), n_samples, seed, clusters)

    # alarmed points where both runs counted them, else events (a run made before points were counted)
    rows = [v for v in (*base.values(), *other.values()) if v["task"] == "alarm"]
    counted = "false_alarm_points" if all(v["false_alarm_points"] is not None for v in rows) else "false_alarms"

    def alarms(outcomes: dict[str, dict[str, Any]]) -> dict[str, tuple[float, float]]:
        return {k: (float(v[counted]), v["non_update_points"]) for k, v in outcomes.items() if v["task"] == "alarm"}

    out["false_alarm"] = {**paired_rate_difference(alarms(base), alarms(other), n_samples, seed, clusters),
                          "counted": "points" if counted == "false_alarm_points" else "events"}
    return out


def halumem_write_cost(run_dir: Path, sessions: int | None = None) -> dict[str, Any]:
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


def write_cost(run_dir: Path) -> dict[str, Any]:
    """What a checked write cost per turn: LLM calls (all and by purpose), tokens, seconds, and how many calls
    the response cache served (a cached call costs no LLM time, so seconds then understate a cold run).

    LoCoMo runs: every ingested turn (``ingest.jsonl``). Conflict-suite runs: the probes, the suite's
    checked writes (``cases.jsonl``; the suite records calls and seconds per probe, not tokens)."""
    run_dir = Path(run_dir)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    sha = metrics.get("metadata", {}).get("git_sha")
    if not (run_dir / "ingest.jsonl").exists():
        cases = _jsonl(run_dir / "cases.jsonl", "id")
        n = max(len(cases), 1)
        purposes: dict[str, float] = {}
        for case in cases:
            for purpose, count in (case.get("llm_calls_by_purpose") or {}).items():
                purposes[purpose] = purposes.get(purpose, 0.0) + count
        return {"unit": "probe", "turns": len(cases), "calls_per_turn": sum(int(c.get("llm_calls", 0)) for c in cases) / n,
                "tokens_per_turn": None, "seconds_per_turn": sum(float(c.get("seconds") or 0) for c in cases) / n,
                "by_purpose_per_turn": {p: {"calls": v / n} for p, v in sorted(purposes.items())}, "git_sha": sha}
    rows = _jsonl(run_dir / "ingest.jsonl")
    turns = sum(int(r.get("n_turns", 0)) for r in rows)
    seconds = sum(sum(r.get("add_latency_s") or []) for r in rows)
    calls = prompt = completion = cached = 0
    by_purpose: dict[str, dict[str, float]] = {}
    for r in rows:
        usage = r.get("usage_metered") or r.get("usage_reported") or {}
        calls += int(usage.get("calls", 0))
        prompt += int(usage.get("prompt_tokens", 0))
        completion += int(usage.get("completion_tokens", 0))
        cached += int((r.get("usage_reported") or {}).get("cached_calls", 0))
        for purpose, u in (usage.get("by_purpose") or {}).items():
            into = by_purpose.setdefault(purpose, {"calls": 0.0, "tokens": 0.0})
            into["calls"] += u.get("calls", 0)
            into["tokens"] += u.get("prompt_tokens", 0) + u.get("completion_tokens", 0)
    n = max(turns, 1)
    return {
        "unit": "turn",
        "turns": turns,
        "calls_per_turn": calls / n,
        "tokens_per_turn": (prompt + completion) / n,
        "completion_tokens_per_turn": completion / n,
        "seconds_per_turn": seconds / n if seconds else None,
        "cached_call_share": cached / calls if calls else None,
        "by_purpose_per_turn": {p: {k: v / n for k, v in u.items()} for p, u in sorted(by_purpose.items())},
        "git_sha": sha,
    }
