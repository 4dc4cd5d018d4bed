"""Small helpers every benchmark's ``make_table`` can share: percentile pairs and md/csv/tex writers
(the CI cell is ``eval.metrics.format_ci``, beside the bootstrap it formats)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.api import LabelsRows
from eval.record import RecordedMetrics

if TYPE_CHECKING:  # tables are DataFrames, but nothing here calls pandas itself: a finished run's rerun stays light
    import pandas as pd


def format_pair(stat: dict[str, Any], keys: tuple[str, str] = ("p50", "p95"), digits: int = 2) -> str:
    """Two percentiles as ``"0.41 / 0.93"``; empty when missing."""
    values = [stat.get(k) for k in keys]
    if any(v is None for v in values):
        return ""
    return " / ".join(f"{v:.{digits}f}" for v in values)


def _system_settings(record: RecordedMetrics) -> dict[str, str]:
    """The ``system.*`` values a run recorded: the command line's, overridden by what the system reported in its
    ``system_metrics`` (the values it actually ran with)."""
    settings = dict(setting.split("=", 1) for setting in record.system_overrides if "=" in setting)
    settings.update({key: str(value) for key, value in (record.system_metrics or {}).items() if isinstance(value, str | int | float | bool)})
    return settings


def system_label(metrics: dict[str, Any]) -> str:
    """The name of what a row measures: a label the system reported for the run (``system_metadata.row_label``),
    else the one its class gives the recorded settings (core.api.LabelsRows), else the system's config name."""
    record = RecordedMetrics.of(metrics)
    meta = metrics.get("metadata", {})
    reported = (meta.get("system_metadata") or {}).get("row_label")
    if reported:
        return reported
    system = str(meta.get("system", metrics.get("system", "?")))
    cls = record.recorded_class("system")
    label = cls.row_label(_system_settings(record)) if isinstance(cls, LabelsRows) else None
    return label or system


def row_label(metrics: dict[str, Any]) -> str:
    """A results row's name: what the system measures (``system_label``), its ablation, and the
    ``system.*`` values its command line set (a sweep's ``system.retrieval.k=1`` becomes ``(retrieval.k=1)``),
    so runs that differ only by such a value do not share a name in a table."""
    meta = metrics.get("metadata", {})
    system = system_label(metrics)
    ablation = meta.get("ablation")
    label = system if ablation in (None, "none", "") else f"{system} / {ablation}"
    settings = RecordedMetrics.of(metrics).system_overrides
    label = f"{label} ({', '.join(settings)})" if settings else label
    return f"{label} {NOT_CLEAN_MARK}" if metrics.get(PROVENANCE_FLAGS) else label


# Set by scripts/make_tables.py on each published run it reads: why the run is not from one clean commit (empty when
# it is). A row of such a run carries NOT_CLEAN_MARK in every table, and each table's footnote lists the reasons.
PROVENANCE_FLAGS = "_provenance_flags"
NOT_CLEAN_MARK = "†"


def is_paper_configuration(metrics: dict[str, Any]) -> bool:
    """Whether a run is a system as the paper configured it: no ablation, no renamed variant, no ``system.*``
    value set on the command line. Only such a row may carry the paper's reported value."""
    meta = metrics.get("metadata", {})
    if meta.get("ablation") not in (None, "none", ""):
        return False
    overrides = RecordedMetrics.of(metrics).metadata.overrides
    return not any(o.lstrip("+~").startswith(("system.", "ablation", "ablation_name")) for o in overrides)


def _jsonl_rows(path: Path) -> list[dict[str, Any]] | None:
    """Rows of a JSONL file (damaged lines skipped: a table must render any published folder); None if absent."""
    if not path.is_file():
        return None
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return [r for r in rows if isinstance(r, dict)]


def failure_counts(metrics: dict[str, Any] | RecordedMetrics) -> tuple[int | None, int | None]:
    """(failed rows, failed ingest turns) of a run: ``failures.rows`` / ``failures.ingest_turns`` of metrics.json,
    else what runs from before that block recorded: ``ingest.failures`` and ``overall.judge_failures`` with each
    prediction row's ``answer_failure``, or each probe's ``failures`` in cases.jsonl plus each context's in
    ingests.jsonl; None where nothing was recorded."""
    record = RecordedMetrics.of(metrics)
    if record.failures is not None:
        return record.failures.rows, record.failures.ingest_turns
    folder = record.folder
    rows: int | None = None
    ingest: int | None = None
    if isinstance(metrics.get("ingest"), dict) and isinstance(metrics["ingest"].get("failures"), int):
        ingest = metrics["ingest"]["failures"]  # AddReport failures summed over sessions
    predictions = _jsonl_rows(folder / "predictions.jsonl") if folder else None
    if predictions is not None and isinstance((metrics.get("overall") or {}).get("judge_failures"), int):
        rows = metrics["overall"]["judge_failures"] + sum(bool(p.get("answer_failure")) for p in predictions)
    cases = _jsonl_rows(folder / "cases.jsonl") if folder else None
    contexts = _jsonl_rows(folder / "ingests.jsonl") if folder else None
    if cases is not None and contexts is not None and all("failures" in c for c in contexts):
        ingest = sum(int(c.get("failures") or 0) for c in cases) + sum(int(c["failures"]) for c in contexts)
    if cases and all("failures" in c for c in cases):  # each probe recorded its write's failures: 0 is a count, not n/a
        rows = sum(int(c["failures"] or 0) > 0 for c in cases)
    return rows, ingest


def failures_cell(metrics: dict[str, Any] | RecordedMetrics) -> str:
    """``"rows / ingest turns"``, e.g. ``"0 / 20"``; ``n/a`` for what a run did not record."""
    return " / ".join("n/a" if n is None else str(n) for n in failure_counts(metrics))


FAILURES_COLUMN = "failures (rows / ingest turns)"


def to_markdown(table: pd.DataFrame) -> str:
    """GitHub Markdown without the optional ``tabulate`` dependency; caption (attrs) on top."""
    frame = table.reset_index() if table.index.name else table
    header = [str(c) for c in frame.columns]
    cell = lambda v: str(v).replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    caption = table.attrs.get("caption")
    return (f"{caption}\n\n" if caption else "") + "\n".join(lines)


def write_tables(table: pd.DataFrame, stem: Path) -> list[Path]:
    """Write ``<stem>.md``, ``<stem>.csv`` and ``<stem>.tex``; return the paths."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    caption = table.attrs.get("caption", "")
    paths = [stem.with_suffix(".md"), stem.with_suffix(".csv"), stem.with_suffix(".tex")]
    paths[0].write_text(to_markdown(table) + "\n", encoding="utf-8")
    table.to_csv(paths[1])
    paths[2].write_text((table.reset_index() if table.index.name else table).to_latex(index=False, escape=True, caption=caption or None) + "\n", encoding="utf-8")
    return paths
