"""HaluMem's retrieval-only table and figure panels (``benchmark.stages=[ingest, retrieve]``): question evidence
recall@k by gold fact id and by session with the paired difference to the base row (conf/report.yaml
``retrieval_base_row``) on the same user file, and the update-ranking outcomes; rows are read from each run's
``halumem_retrievals.jsonl`` with no LLM. The cells every benchmark's retrieval table shares are
eval/retrieval_table.py's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from eval.benchmarks.halumem.retrieval import _recall_within, session_of_id
from eval.benchmarks.locomo.budget_table import tokens_cell
from eval.compare import paired_difference
from eval.intervals import interval_note, report_settings
from eval.metrics import format_ci
from eval.retrieval_metrics import question_scores
from eval.retrieval_table import HEADLINE_K, cost_columns, diff_cell, is_base, mean_cell, run_label
from eval.rows import read_rows


def user_file(m: dict[str, Any]) -> str:
    """Which HaluMem file a run read, e.g. ``halumem_medium_user0.jsonl`` (else its variant)."""
    return str(m.get("user_file") or m.get("variant", "?"))


def question_recall(m: dict[str, Any], level: str, k: int = HEADLINE_K) -> dict[str, float]:
    """question key -> evidence recall@k at ``level`` (fact or session) from halumem_retrievals.jsonl."""
    path = Path(m.get("_path", "")).parent / "halumem_retrievals.jsonl"
    if not path.is_file():
        return {}
    out = {}
    for r in read_rows(path):
        if r.get("kind") != "qa":
            continue
        if level == "fact":
            gold, items = set(r["evidence_fact_ids"]), [{f} if f else set() for f in r["retrieved_fact_ids"]]
        else:
            gold, items = {session_of_id(f) for f in r["evidence_fact_ids"]}, [set(s) for s in r["retrieved_sessions"]]
        s = question_scores(gold, items, [k], k)
        if s is not None:
            out[r["key"]] = s[f"recall@{k}"]
    return out


def retrieval_table(metrics_list: list[dict[str, Any]], k: int = HEADLINE_K) -> pd.DataFrame:
    """One row per retrieval-only HaluMem run: question evidence recall@k (fact level for rows whose items carry gold
    fact ids, session level for all) with the paired difference to rag over oracle facts on the same user file, and the
    update-ranking outcomes (current version returned, replaced version returned, current ranked first)."""
    runs = [m for m in metrics_list if tuple(m.get("stages") or ()) == ("ingest", "retrieve")]
    rows = []
    for m in runs:
        stats = m["retrieval"]
        base = next((b for b in runs if is_base(b) and user_file(b) == user_file(m)), None)
        row: dict[str, Any] = {"row": run_label(m), "user file": user_file(m), "questions": m.get("counts", {}).get("questions"),
                               "update points": m.get("counts", {}).get("update_points")}  # fmt: skip
        for level in ("fact", "session"):
            cell = (stats.get(level) or {}).get("overall", {})
            row[f"QA evidence recall@{k} ({level})"] = format_ci(cell.get(f"recall@{k}"))
            if base is not None and base is not m and level in stats:
                row[f"diff to base ({level})"] = diff_cell(paired_difference(question_recall(base, level, k),
                                                                             question_recall(m, level, k), 1000, 0))
            else:
                row[f"diff to base ({level})"] = "base" if base is m else ""
            updates = (stats.get(level) or {}).get("updates", {})
            for name in ("current_first", "replaced_returned"):
                row[f"updates {name.replace('_', ' ')} ({level})"] = format_ci(updates.get(name))
        budget = int(report_settings()["table_token_budget"])
        for level in ("fact", "session"):
            row[f"QA recall @{budget} tokens ({level})"] = format_ci(((stats.get(level) or {}).get("evidence_recall_at_budget") or {}).get(str(budget)))
        row["QA tokens returned p50 / p95"] = tokens_cell({"returned_tokens": (stats.get("returned_tokens") or {}).get("qa")})
        overall = (stats.get("session") or {}).get("overall", {}).get(f"recall@{k}")
        row["interval shown"] = interval_note(overall, int(report_settings()["min_clusters_for_cluster_interval"]), cluster="user",
                                              cluster_names=[user_file(m)])  # fmt: skip
        rows.append({**row, **cost_columns(m)})
    table = pd.DataFrame(rows)
    table.attrs["caption"] = (
        f"HaluMem, retrieval only (no answerer, no judge): question evidence recall@{k} x100 [95% bootstrap CI] by gold fact id "
        "(rows whose items carry one: oracle rows) and by session (every row); 'diff to base': paired difference to rag over "
        "oracle facts on the same user. Updates: each gold update point searched with its own content (update_k results): "
        "'current first' = the point itself is returned above the memory it replaces (or that one is not returned), "
        "'replaced returned' = the replaced memory comes back at all (lower is better); session level compares the point's "
        "session with the replaced memory's earlier session. 'QA recall @N tokens': each question's list cut where its returned "
        "text reaches N tokens (eval/budget.py); 'tokens returned': median / p95 over questions. Each run is one user, so every "
        "interval resamples that user's questions and holds for that user only ('interval shown')."
    )
    return table


def recall_vs_tokens_panels(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The recall-vs-tokens figure's HaluMem panels (eval/retrieval_table.py draws them): each user at session level
    (every row has it); a row whose rows record no tokens is left out."""
    budgets = [int(b) for b in report_settings()["figure_token_budgets"]]
    panels: dict[str, dict[str, Any]] = {}
    for m in runs:
        folder = Path(m.get("_path", "")).parent
        rows = [r for r in read_rows(folder / "halumem_retrievals.jsonl") if r.get("kind") == "qa" and r["evidence_fact_ids"]] if folder.is_dir() else []
        if not rows or any(r.get("retrieved_tokens") is None for r in rows):
            continue
        golds = [{session_of_id(f) for f in r["evidence_fact_ids"]} for r in rows]
        items = [[set(x) for x in r["retrieved_sessions"]] for r in rows]
        panel = f"HaluMem {user_file(m)}, session level, {len(rows)} questions"
        panels.setdefault(panel, {})[run_label(m)] = {
            "budgets": {b: mean_cell([_recall_within(g, i, r["retrieved_tokens"], b) for g, i, r in zip(golds, items, rows)]) for b in budgets},
            "median_tokens": ((m["retrieval"].get("returned_tokens") or {}).get("qa") or {}).get("median"),
            "uncut": mean_cell([_recall_within(g, i, r["retrieved_tokens"], 10**9) for g, i, r in zip(golds, items, rows)])}  # fmt: skip
    return panels
