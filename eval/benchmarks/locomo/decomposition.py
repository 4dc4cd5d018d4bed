"""LoCoMo's columns of the extractor/organisation decomposition (eval/decomposition.py): judge accuracy and token F1
of each row's run, one block of rows per slice (``table.slice_label``), so rows of one slice compare like with like."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.api import DecompositionPart
from eval.benchmarks.locomo.table import slice_label
from eval.metrics import format_ci


def _cells(metrics: dict[str, Any] | None, group: str) -> dict[str, str]:
    overall = (metrics or {}).get("overall", {})
    return {"LoCoMo slice": group, "LoCoMo judge": format_ci(overall.get("judge")), "LoCoMo token F1": format_ci(overall.get("f1"))}


def decomposition(runs: list[dict[str, Any]], row_of: Callable[[dict[str, Any]], Any]) -> DecompositionPart:
    """``core.api.DecompositionColumns`` for ``LoCoMoBenchmark``: each row's run per slice (the last one listed)."""
    picked: dict[tuple[str, Any], dict[str, Any]] = {}
    for metrics in runs:
        key = row_of(metrics)
        if key is not None:
            picked[(slice_label(metrics), key)] = metrics
    return DecompositionPart(label="LoCoMo", runs=picked, cells=_cells, by_group=True)
