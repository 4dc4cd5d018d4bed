"""HaluMem's columns of the extractor/organisation decomposition (eval/decomposition.py): update and QA labels and
the save-time conflict check's update links, from each row's largest run on one data slice (same file, same
sessions, same scoring protocol for every row: ``pick_slice``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.api import DecompositionPart
from eval.benchmarks.halumem.table import protocol_label
from eval.benchmarks.halumem.update_links import false_alarm_text
from eval.metrics import format_ci

NOTE = ("HaluMem cells come from one data slice (same file, same sessions, same scoring protocol: 'HaluMem data') for every row; a row "
        "with runs on other sessions or under the other protocol only is left empty here (results/bench/compare_halumem_eval_slice.md "
        "pairs the session-limited runs over their own sessions).")  # fmt: skip


def _size(metrics: dict[str, Any]) -> int:
    return int((metrics.get("overall") or {}).get("n") or (metrics.get("counts") or {}).get("questions") or 0)


def data_slice(metrics: dict[str, Any]) -> tuple[str, int, str]:
    """(input file's sha256, sessions added, scoring protocol): two HaluMem runs are comparable only when all three
    agree (an old-protocol update column cannot tell supersession from append-only; table.protocol_label)."""
    digests = ((metrics.get("metadata") or {}).get("input_files") or {}).values()
    return next(iter(digests), "?"), int((metrics.get("counts") or {}).get("sessions_added") or 0), protocol_label(metrics)


def pick_slice(runs: list[dict[str, Any]], row_of: Callable[[dict[str, Any]], Any]) -> tuple[str, int, str] | None:
    """The HaluMem data slice the table shows: the one most of the rows have a run on, then the fixed
    protocol, then the one with more sessions. Rows are compared over the same sessions under the same protocol
    only, so a row whose runs all cover other sessions (a session-limited slice) or were scored under the other
    protocol gets empty HaluMem cells rather than a cell that is not comparable."""
    rows_on: dict[tuple[str, int, str], set[Any]] = {}
    for metrics in runs:
        key = row_of(metrics)
        if key is not None:
            rows_on.setdefault(data_slice(metrics), set()).add(key)
    return max(rows_on, key=lambda sl: (len(rows_on[sl]), sl[2] == "fixed protocol", sl[1]), default=None)


def _data(metrics: dict[str, Any]) -> str:
    """Which HaluMem file, how much of it and under which protocol: the input's sha256 prefix tells the development
    user from the evaluation user (data/halumem-pilot/SHA256SUMS)."""
    counts = metrics.get("counts") or {}
    digests = ((metrics.get("metadata") or {}).get("input_files") or {}).values()
    return (f"{counts.get('sessions_added', 0)} sessions, {counts.get('questions', 0)} q, file {next(iter(digests), '?')[:8]}, "
            f"{protocol_label(metrics)}")


def _links(metrics: dict[str, Any] | None) -> str:
    """The save-time conflict check on HaluMem's real update events (rows of systems that check; append-only rows have none)."""
    if metrics is None:
        return ""
    links = metrics.get("update_links")
    if not links:
        return "no check (append-only)"
    n = links.get("update_points", 0)
    return (" / ".join(str(links.get(k, 0)) for k in ("right", "wrong", "missed", "no_target"))
            + f" of {n}; {false_alarm_text(links)}")  # fmt: skip


def _cells(metrics: dict[str, Any] | None, group: str) -> dict[str, str]:
    updating, qa = (metrics or {}).get("updating") or {}, (metrics or {}).get("qa") or {}
    shown = bool(metrics)
    return {
        "HaluMem data": _data(metrics) if metrics else "",
        "HaluMem update correct / halluc. / omission": " / ".join(format_ci(updating.get(k)) for k in ("correct", "hallucination", "omission")) if shown else "",
        "HaluMem QA correct / halluc. / omission": " / ".join(format_ci(qa.get(k)) for k in ("correct", "hallucination", "omission")) if shown else "",
        "HaluMem update links right / wrong / missed / no target; false alarms": _links(metrics),
    }  # fmt: skip


def decomposition(runs: list[dict[str, Any]], row_of: Callable[[dict[str, Any]], Any]) -> DecompositionPart:
    """``core.api.DecompositionColumns`` for ``HaluMemBenchmark``: each row's largest run on the shown data slice."""
    shown = pick_slice(runs, row_of)
    picked: dict[tuple[str, Any], dict[str, Any]] = {}
    for metrics in runs:
        key = row_of(metrics)
        if key is not None and data_slice(metrics) == shown and (("", key) not in picked or _size(metrics) > _size(picked[("", key)])):
            picked[("", key)] = metrics
    return DecompositionPart(label="HaluMem", runs=picked, cells=_cells, note=NOTE)
