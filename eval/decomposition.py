"""The extractor/organisation decomposition: {turns, oracle facts} x {a flat baseline, an organising memory}.

Every system that extracts with the small local model loses to raw-turn retrieval, so the question "does the
model extract badly or does the memory organise badly" needs rows under one protocol: each system over what it
extracts and over the benchmark's gold facts. Which (system, ablation) pairs are the rows, and which benchmarks give
columns, is conf/report.yaml ``decomposition``; each benchmark picks its runs for the rows and writes its own cells
(``core.api.DecompositionColumns``, found from each run's recorded ``benchmark_target``). This module only lays
them side by side; it computes nothing new.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pandas as pd

from core.api import DecompositionColumns, DecompositionPart
from eval.intervals import report_settings
from eval.tables import failures_cell

FAILURES = "failures (rows / ingest turns)"
RowKey = tuple[str, str]  # (system config name, ablation)


def _settings() -> dict[str, Any]:
    return report_settings()["decomposition"]


def rows() -> tuple[tuple[RowKey, str], ...]:
    """((system, ablation), the row's name), in the table's order (conf/report.yaml ``decomposition.rows``)."""
    return tuple(((str(r["system"]), str(r["ablation"])), str(r["label"])) for r in _settings()["rows"])


def identity(metrics: dict[str, Any]) -> RowKey | None:
    """(system, ablation) of a run; None for runs with command-line system settings (no row shows them)."""
    meta = metrics.get("metadata", {})
    if any(isinstance(o, str) and o.startswith("system.") for o in meta.get("overrides", [])):
        return None
    return str(meta.get("system")), str(meta.get("ablation") or "none")


@cache
def _class(target: str) -> Any:
    from hydra.utils import get_class

    return get_class(target)


def _benchmark_class(metrics: dict[str, Any]) -> Any:
    return _class(str(metrics.get("metadata", {}).get("benchmark_target") or metrics.get("benchmark_target")))


def decomposition_parts(runs_by_benchmark: dict[str, list[dict[str, Any]]]) -> list[DecompositionPart]:
    """Each configured benchmark's columns, from its runs (grouped by the class their records name)."""
    wanted = dict(rows())

    def row_of(metrics: dict[str, Any]) -> RowKey | None:
        key = identity(metrics)
        return key if key in wanted else None

    all_runs = [m for runs in runs_by_benchmark.values() for m in runs]
    parts = []
    for target in _settings()["benchmarks"]:
        cls = _class(str(target))
        if not isinstance(cls, DecompositionColumns):
            raise TypeError(f"conf/report.yaml decomposition.benchmarks: {target} declares no decomposition columns (core.api.DecompositionColumns)")
        parts.append(cls.decomposition([m for m in all_runs if _benchmark_class(m) is cls], row_of))
    return parts


def decomposition_rows(runs_by_benchmark: dict[str, list[dict[str, Any]]], parts: list[DecompositionPart] | None = None) -> list[dict[str, Any]]:
    """The configured rows once per group of a benchmark that groups them (e.g. a data slice, so rows of one group
    compare like with like); the other benchmarks fill every group's rows with the same runs. A cell with no
    published run stays empty."""
    parts = decomposition_parts(runs_by_benchmark) if parts is None else parts
    groups = sorted({group for part in parts if part.by_group for group, _ in part.runs}) or [""]
    out = []
    for group in groups:
        for key, name in rows():
            picked = [(part, part.runs.get((group if part.by_group else "", key))) for part in parts]
            row: dict[str, Any] = {"row": name}
            for part, metrics in picked:
                row.update(part.cells(metrics, group))
            row[FAILURES] = "; ".join(f"{part.label} {failures_cell(m)}" for part, m in picked if m)
            out.append(row)
    return out


def decomposition_table(runs_by_benchmark: dict[str, list[dict[str, Any]]]) -> pd.DataFrame:
    parts = decomposition_parts(runs_by_benchmark)
    table = pd.DataFrame(decomposition_rows(runs_by_benchmark, parts)).set_index("row")
    notes = "".join(f"{part.note} " for part in parts if part.note)
    table.attrs["caption"] = (f"{_settings()['caption']} x100 [95% bootstrap CI]; an empty cell has no published run yet. {notes}"
                              "Failures are named by benchmark: rows / ingest turns.")  # fmt: skip
    return table
