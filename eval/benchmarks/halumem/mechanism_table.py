"""results/tables/mechanism.md: MOSAIC's save-time check against its ceiling, from published HaluMem runs only.

Rows per HaluMem file (the development and the evaluation user are told apart by the input file's sha256): rag
over oracle facts (append-only: the floor of what a supersession can change); MOSAIC over oracle facts with the
check off (``system.conflict.enabled=false``); the same with the gold judge (``ablation=oracle_judge``); the same
with the model judge (``ablation=oracle_extractor``) where a run exists. The mechanism columns (stale leak,
current-first, evidence recall) exist only for runs with ``benchmark.mechanism_probes`` (mechanism.py); a paired
difference is taken against the check-off row of the same file, over the same questions or points. Nothing here
is computed from dataset text: the rows hold gold ids and booleans.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from eval.benchmarks.halumem.mechanism import evidence_recall, successors
from eval.benchmarks.halumem.update_links import false_alarm_text
from eval.metrics import bootstrap_ci, format_ci
from eval.rows import read_rows

# (system, ablation, conflict check on) -> the row's name, in the table's order
ROWS: tuple[tuple[tuple[str, str, bool], str], ...] = (
    (("rag", "oracle_facts", False), "rag over oracle facts (append-only)"),
    (("mosaic", "oracle_extractor", False), "MOSAIC, oracle extractor, check off"),
    (("mosaic", "oracle_judge", True), "MOSAIC, oracle extractor, gold judge"),
    (("mosaic", "oracle_extractor", True), "MOSAIC, oracle extractor, model judge"),
)
CHECK_OFF = ("mosaic", "oracle_extractor", False)


def is_probe_only(metrics: dict[str, Any]) -> bool:
    """A writes-and-probes run (no task scored): a mechanism row, never a Table 2 column."""
    return bool(metrics.get("mechanism")) and metrics.get("extraction") is None and not metrics.get("updating") and not metrics.get("qa")


def _identity(metrics: dict[str, Any]) -> tuple[str, str, bool] | None:
    meta = metrics.get("metadata", {})
    overrides = [o for o in meta.get("overrides", []) if isinstance(o, str) and o.startswith("system.")]
    check_on = "system.conflict.enabled=false" not in overrides and str(meta.get("system")) != "rag"
    if [o for o in overrides if o != "system.conflict.enabled=false"]:
        return None  # other system settings: a variant, not one of these rows
    return str(meta.get("system")), str(meta.get("ablation") or "none"), check_on


def _file(metrics: dict[str, Any]) -> str:
    digests = ((metrics.get("metadata") or {}).get("input_files") or {}).values()
    return next(iter(digests), "?")[:8]


def _per_item(metrics: dict[str, Any]) -> tuple[dict[str, tuple[float, float]], dict[str, tuple[bool, bool]]]:
    """Per question (strict, chain-aware recall) and per linked point (stale leak, current-first), keyed alike in
    every run of one file."""
    path = Path(metrics["_path"]).parent / "halumem_mechanism.jsonl"
    rows = read_rows(path, key_field=None) if path.is_file() else []
    chain = successors({new: tuple(olds) for row in rows for new, olds in row.get("replaces", {}).items()})
    questions = {f"{row['session']}:q{q['q']}": evidence_recall(q["evidence_fact_ids"], q["retrieved_fact_ids"], chain, int(row["session"]))
                 for row in rows for q in row.get("questions", [])}  # fmt: skip
    points = {f"{row['session']}:p{p['index']}": (bool(p["stale_leak"]), bool(p["current_first"])) for row in rows for p in row.get("points", [])}
    return questions, points


def _paired(mine: dict[str, Any], base: dict[str, Any], pick: int, n_boot: int = 1000) -> str:
    """Mean difference (this row - check off) over the keys both have, with a bootstrap CI over those keys."""
    keys = sorted(set(mine) & set(base))
    if not keys or mine is base:
        return ""
    return format_ci(bootstrap_ci([float(mine[k][pick]) - float(base[k][pick]) for k in keys], n_boot, 0))


def _misses(metrics: dict[str, Any]) -> str:
    stats = ((metrics.get("system_metrics") or {}).get("conflict")) or {}
    if "gold_partners_held" not in stats or not stats.get("gold_judgements"):
        return ""
    return (f"{stats['gold_partners_retired']} of {stats['gold_partners_held']} retired; not a candidate {stats['gold_partner_not_candidate']}, "
            f"past n_facts {stats['gold_partner_not_shown']}, ruled out before the judge {stats['gold_partner_ruled_out']}; "
            f"numeric rule right / wrong {stats['numeric_gold_right']} / {stats['numeric_gold_wrong']}")  # fmt: skip


def _links(metrics: dict[str, Any]) -> str:
    links = metrics.get("update_links")
    if not links:
        return "no check (append-only)"
    verdicts = links.get("right_by_verdict") or {}
    flagged = sum(n for v, n in verdicts.items() if v != "update")
    return (" / ".join(str(links.get(k, 0)) for k in ("right", "wrong", "missed", "no_target")) + f" of {links.get('update_points', 0)}"
            + (f" ({flagged} right but flagged, not updated)" if flagged else "") + f"; false alarms {false_alarm_text(links)}")  # fmt: skip


def _conflict_calls(metrics: dict[str, Any]) -> str:
    usage = ((metrics.get("metadata") or {}).get("llm_usage") or {})
    by = usage.get("by_purpose") or {}
    return f"{by.get('conflict', {}).get('calls', 0)} / {usage.get('calls', 0)}"


def mechanism_rows(halumem_runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (file, row kind) that has a published run; the latest path wins where a kind has several."""
    wanted = dict(ROWS)
    picked: dict[tuple[str, tuple[str, str, bool]], dict[str, Any]] = {}
    for metrics in halumem_runs:
        key = _identity(metrics)
        if key in wanted and (metrics.get("mechanism") or key == ("mosaic", "oracle_extractor", True)):
            picked[(_file(metrics), key)] = metrics
    rows = []
    for file in sorted({f for f, _ in picked}):
        base = picked.get((file, CHECK_OFF))
        base_q, base_p = _per_item(base) if base else ({}, {})
        for key, name in ROWS:
            metrics = picked.get((file, key))
            if metrics is None:
                continue
            mech = metrics.get("mechanism") or {}
            questions, points = _per_item(metrics)
            rows.append({
                "row": name,
                "HaluMem file": f"{file}, {(metrics.get('counts') or {}).get('sessions_added', 0)} sessions",
                "supersessions right / wrong / missed / no target": _links(metrics) if key[2] else "no check",
                "gold partners: retired, or why not": _misses(metrics),
                "stale leak": format_ci(mech.get("stale_leak")),
                "current-first": format_ci(mech.get("current_first")),
                "evidence recall strict": format_ci(mech.get("evidence_recall_strict")),
                "evidence recall chain-aware": format_ci(mech.get("evidence_recall_chain")),
                "strict - check off (paired)": _paired(questions, base_q, 0) if metrics is not base else "",
                "chain-aware - check off (paired)": _paired(questions, base_q, 1) if metrics is not base else "",
                "stale leak - check off (paired)": _paired(points, base_p, 0) if metrics is not base else "",
                "LLM calls: conflict / all": _conflict_calls(metrics),
                "run": str(Path(metrics["_path"]).parent.name),
            })  # fmt: skip
    return rows


def mechanism_table(halumem_runs: list[dict[str, Any]]) -> pd.DataFrame:
    table = pd.DataFrame(mechanism_rows(halumem_runs))
    if not table.empty:
        table = table.set_index("row")
    table.attrs["caption"] = (
        "MOSAIC's save-time check against its ceiling on HaluMem (eval/benchmarks/halumem/mechanism_table.py), x100 "
        "[95% bootstrap CI]. Rows: append-only rag over the gold memory points; MOSAIC over the same points with the "
        "check off, with a gold judge (ablation=oracle_judge: the judge's answer from HaluMem's update labels, "
        "everything else MOSAIC's own) and with the 1.5B model judge where a run exists. Stale leak: linked update "
        "points whose replaced fact still comes back in the top 10 for the update's own content; current-first: the "
        "current version ranks above the replaced one for the replaced memory's own text; chain-aware recall counts a "
        "cited fact found when a version that replaced it comes back. Paired columns: this row minus the check-off "
        "row of the same file, over the questions (or linked points) both have. 'Gold partners' counts each held fact "
        "a gold label names and where it went. Files by the prefix of their sha256: sha256-29ef6e1a the development "
        "user (user 0), sha256-e11913ca the evaluation user (user 3)."
    )
    return table
