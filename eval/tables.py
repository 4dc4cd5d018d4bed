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
