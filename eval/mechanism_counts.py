"""A finished run's mechanism counts as one flat table row, from its metrics.json.

Why: a comparison of rows of one system (whole-conversation rows, write-cost variants) says how the rows differ
in quality and cost; these counts say which mechanism did the work. ``scripts.compare_runs`` prints them under its
table for every compared run that recorded them (``system_metrics.mechanisms``). The layout of the counts is the
system's own, so the system's class flattens them (core.api.SummarisesMechanisms); nothing here knows a system.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.api import SummarisesMechanisms
from eval.record import load_metrics


def mechanisms(run: Path) -> dict[str, Any] | None:
    """The mechanism counts a run recorded (``system_metrics.mechanisms``), flattened by its system's class for one
    table row; None when it recorded none or its system does not summarise them."""
    record = load_metrics(run / "metrics.json")
    found = (record.system_metrics or {}).get("mechanisms")
    if not found:
        return None
    system = record.recorded_class("system")
    return system.mechanism_row(found) if isinstance(system, SummarisesMechanisms) else None


def mechanism_markdown(rows: dict[str, dict[str, Any]]) -> str:
    """One markdown row per run (its name, then every count); empty without rows."""
    if not rows:
        return ""
    keys = list(next(iter(rows.values())))
    lines = ["| row | " + " | ".join(keys) + " |", "|" + "---|" * (len(keys) + 1)]
    for name, counts in rows.items():
        lines.append(f"| {name} | " + " | ".join("" if counts.get(k) is None else f"{counts[k]:.4g}" if isinstance(counts[k], float) else str(counts[k]) for k in keys) + " |")
    return "\n".join(lines)
