"""MOSAIC's mechanism counts of a finished run as one flat table row (entities by state, conflict events,
retrieval and NCS counters, Leiden re-runs), read from its metrics.json.

Why: a comparison of MOSAIC rows (the whole-conversation rows, the write-cost variants) says how the
rows differ in quality and cost; these counts say which mechanism did the work. ``scripts.compare_runs`` prints
them under its table for every compared run that recorded them (``system_metrics.mechanisms``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval.runner import read_metrics


def mechanisms(run: Path) -> dict[str, Any] | None:
    """The mechanism counts a MOSAIC run recorded (``system_metrics.mechanisms``), flattened for one table row."""
    found = read_metrics(run / "metrics.json").get("system_metrics", {}).get("mechanisms")
    if not found:
        return None
    retrieval, ncs = found["retrieval"], found["ncs"]
    return {**{f"entities_{k}": v for k, v in found["entities"].items()},
            **{f"events_{k}": v for k, v in found["conflict_events"].items()},
            "scanned_per_query": retrieval["candidates_scanned"]["mean"], "lsh_confident_hits": retrieval["lsh_confident_hits"],
            "llm_routing_fallbacks": retrieval["llm_routing_fallbacks"], "turn_matches": retrieval.get("turn_matches", 0),
            "ncs_full_refreshes": ncs["full_refreshes"], "ncs_drift_measurements": ncs["drift_measurements"],
            "ncs_max_drift": ncs["max_abs_score_drift"], "leiden_reruns": found["leiden_reruns"]}  # fmt: skip


def mechanism_markdown(rows: dict[str, dict[str, Any]]) -> str:
    """One markdown row per run (its name, then every count); empty without rows."""
    if not rows:
        return ""
    keys = list(next(iter(rows.values())))
    lines = ["| row | " + " | ".join(keys) + " |", "|" + "---|" * (len(keys) + 1)]
    for name, counts in rows.items():
        lines.append(f"| {name} | " + " | ".join("" if counts.get(k) is None else f"{counts[k]:.4g}" if isinstance(counts[k], float) else str(counts[k]) for k in keys) + " |")
    return "\n".join(lines)
