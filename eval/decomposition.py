"""The extractor/organisation decomposition: {turns, oracle facts} x {append-only rag, MOSAIC}.

Every system that extracts with the small local model loses to raw-turn retrieval, so the question "does the
model extract badly or does MOSAIC organise badly" needs four rows under one protocol: rag over turns, rag over
the benchmark's gold facts (``ablation=oracle_facts``), MOSAIC with its model extractor, and MOSAIC with the gold
facts in place of its extraction call (``ablation=oracle_extractor``). This module only picks those runs out of
the published ones and lays them side by side; it computes nothing new.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from eval.benchmarks.halumem.table import protocol_label
from eval.benchmarks.halumem.update_links import false_alarm_text
from eval.metrics import format_ci
from eval.tables import failures_cell

FAILURES = "failures (rows / ingest turns)"
# (system config name, ablation) -> the row's name, in the table's order
ROWS: tuple[tuple[tuple[str, str], str], ...] = (
    (("rag", "none"), "rag over turns"),
    (("rag", "oracle_facts"), "rag over oracle facts"),
    (("mosaic", "none"), "MOSAIC, model extractor"),
    (("mosaic", "oracle_extractor"), "MOSAIC, oracle extractor"),
)


def _identity(metrics: dict[str, Any]) -> tuple[str, str] | None:
    """(system, ablation) of a run that is a decomposition row; None for runs with command-line system settings."""
    meta = metrics.get("metadata", {})
    if any(isinstance(o, str) and o.startswith("system.") for o in meta.get("overrides", [])):
        return None
    return str(meta.get("system")), str(meta.get("ablation") or "none")


def _size(metrics: dict[str, Any]) -> int:
    return int((metrics.get("overall") or {}).get("n") or (metrics.get("counts") or {}).get("questions") or 0)


def _halumem_slice(metrics: dict[str, Any]) -> tuple[str, int, str]:
    """(input file's sha256, sessions added, scoring protocol): two HaluMem runs are comparable only when all three
    agree (an old-protocol update column cannot tell supersession from append-only; table.protocol_label)."""
    digests = ((metrics.get("metadata") or {}).get("input_files") or {}).values()
    return next(iter(digests), "?"), int((metrics.get("counts") or {}).get("sessions_added") or 0), protocol_label(metrics)


def pick_halumem_slice(runs: list[dict[str, Any]]) -> tuple[str, int, str] | None:
    """The HaluMem data slice the table shows: the one most of the four rows have a run on, then the fixed
    protocol, then the one with more sessions. Rows are compared over the same sessions under the same protocol
    only, so a row whose runs all cover other sessions (a session-limited slice) or were scored under the other
    protocol gets empty HaluMem cells rather than a cell that is not comparable."""
    rows_on: dict[tuple[str, int, str], set[tuple[str, str]]] = {}
    for metrics in runs:
        key = _identity(metrics)
        if key in dict(ROWS):
            rows_on.setdefault(_halumem_slice(metrics), set()).add(key)  # type: ignore[arg-type]
    return max(rows_on, key=lambda sl: (len(rows_on[sl]), sl[2] == "fixed protocol", sl[1]), default=None)


def _halumem_data(metrics: dict[str, Any]) -> str:
    """Which HaluMem file, how much of it and under which protocol: the input's sha256 prefix tells the development
    user from the evaluation user (data/halumem-pilot/SHA256SUMS)."""
    counts = metrics.get("counts") or {}
    digests = ((metrics.get("metadata") or {}).get("input_files") or {}).values()
    return (f"{counts.get('sessions_added', 0)} sessions, {counts.get('questions', 0)} q, file {next(iter(digests), '?')[:8]}, "
            f"{protocol_label(metrics)}")


def _links(metrics: dict[str, Any] | None) -> str:
    """The save-time conflict check on HaluMem's real update events (MOSAIC rows; append-only rows have none)."""
    if metrics is None:
        return ""
    links = metrics.get("update_links")
    if not links:
        return "no check (append-only)"
    n = links.get("update_points", 0)
    return (" / ".join(str(links.get(k, 0)) for k in ("right", "wrong", "missed", "no_target"))
            + f" of {n}; {false_alarm_text(links)}")  # fmt: skip


def decomposition_rows(runs_by_benchmark: dict[str, list[dict[str, Any]]], locomo_slice: Any) -> list[dict[str, Any]]:
    """Four rows per LoCoMo slice that has any decomposition run (``locomo_slice(metrics) -> str`` names it), so
    rows of one slice compare like with like; the HaluMem columns come from each system's largest HaluMem run on
    one data slice (``pick_halumem_slice``: same file, same sessions for every row). A cell with no published run
    on that slice stays empty."""
    wanted = dict(ROWS)
    locomo: dict[tuple[str, tuple[str, str]], dict[str, Any]] = {}
    halumem: dict[tuple[str, str], dict[str, Any]] = {}
    for metrics in runs_by_benchmark.get("locomo", []):
        key = _identity(metrics)
        if key in wanted:
            locomo[(locomo_slice(metrics), key)] = metrics
    halumem_runs = runs_by_benchmark.get("halumem", [])
    shown = pick_halumem_slice(halumem_runs)
    for metrics in halumem_runs:
        key = _identity(metrics)
        if key in wanted and _halumem_slice(metrics) == shown and (key not in halumem or _size(metrics) > _size(halumem[key])):
            halumem[key] = metrics
    slices = sorted({name for name, _ in locomo}) or [""]
    rows = []
    for slice_name in slices:
        for key, name in ROWS:
            lo, hm = locomo.get((slice_name, key)), halumem.get(key)
            updating, qa = (hm or {}).get("updating") or {}, (hm or {}).get("qa") or {}
            rows.append({
                "row": name,
                "LoCoMo slice": slice_name,
                "LoCoMo judge": format_ci((lo or {}).get("overall", {}).get("judge")),
                "LoCoMo token F1": format_ci((lo or {}).get("overall", {}).get("f1")),
                "HaluMem data": _halumem_data(hm) if hm else "",
                "HaluMem update correct / halluc. / omission": " / ".join(format_ci(updating.get(k)) for k in ("correct", "hallucination", "omission")) if hm else "",
                "HaluMem QA correct / halluc. / omission": " / ".join(format_ci(qa.get(k)) for k in ("correct", "hallucination", "omission")) if hm else "",
                "HaluMem update links right / wrong / missed / no target; false alarms": _links(hm),
                FAILURES: "; ".join(f"{bench} {failures_cell(m)}" for bench, m in (("LoCoMo", lo), ("HaluMem", hm)) if m),
            })  # fmt: skip
    return rows


def decomposition_table(runs_by_benchmark: dict[str, list[dict[str, Any]]], locomo_slice: Any) -> pd.DataFrame:
    table = pd.DataFrame(decomposition_rows(runs_by_benchmark, locomo_slice)).set_index("row")
    table.attrs["caption"] = (
        "Extractor or organisation? The same runs as Tables 1 and 2, picked by (system, ablation): rag and MOSAIC, "
        "each over what the local model extracts (for rag: the raw turns) and over the benchmark's gold facts "
        "(ablation=oracle_facts / oracle_extractor). x100 [95% bootstrap CI]; an empty cell has no published run yet. "
        "HaluMem cells come from one data slice (same file, same sessions, same scoring protocol: 'HaluMem data') for "
        "every row; a row with runs on other sessions or under the other protocol only is left empty here (results/bench/compare_halumem_eval_slice.md pairs the "
        "session-limited runs over their own sessions). Failures are named by benchmark: rows / ingest turns."
    )
    return table
