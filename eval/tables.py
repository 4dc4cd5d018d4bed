"""Small helpers every benchmark's ``make_table`` can share: percentile pairs and md/csv/tex writers
(the CI cell is ``eval.metrics.format_ci``, beside the bootstrap it formats)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd


def format_pair(stat: dict[str, Any], keys: tuple[str, str] = ("p50", "p95"), digits: int = 2) -> str:
    """Two percentiles as ``"0.41 / 0.93"``; empty when missing."""
    values = [stat.get(k) for k in keys]
    if any(v is None for v in values):
        return ""
    return " / ".join(f"{v:.{digits}f}" for v in values)


def row_label(metrics: dict[str, Any]) -> str:
    """A results row's name: the system's (or the label it reports, e.g. Zep's), its ablation, and the
    ``system.*`` values its command line set (a sweep's ``system.conflict.k=1`` becomes ``(conflict.k=1)``),
    so runs that differ only by such a value do not share a name in a table."""
    meta = metrics.get("metadata", {})
    system = meta.get("system_metadata", {}).get("row_label") or meta.get("system", metrics.get("system", "?"))
    ablation = meta.get("ablation")
    label = system if ablation in (None, "none", "") else f"{system} / {ablation}"
    settings = [o.removeprefix("system.") for o in meta.get("overrides", []) if isinstance(o, str) and o.startswith("system.")]
    return f"{label} ({', '.join(settings)})" if settings else label


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
