"""HaluMem's Table 2: one column per measured run (percent, 95% CI), then labelled paper columns."""

from __future__ import annotations

from typing import Any, Callable

import pandas as pd

from eval.metrics import format_ci
from eval.tables import FAILURES_COLUMN, failures_cell, row_label

# Paper values (labelled column only; never mixed into results). MOSAIC paper, HaluMem-Medium.
PAPER_VALUES: dict[str, dict[str, float]] = {
    "paper: MOSAIC (HaluMem-Medium)": {
        "Extraction F1": 86.77,
        "QA correct": 73.10,
        "QA hallucination": 10.17,
        "QA omission": 16.74,
        "Update correct": 55.77,
    },
    "paper: MemOS (HaluMem-Medium)": {"Update correct": 62.11},
}


def _links(key: str) -> Callable[[dict[str, Any]], str]:
    """An update-link count (eval/benchmarks/halumem/update_links.py) as 'n of N', or '-' when the run has none."""

    def cell(m: dict[str, Any]) -> str:
        links = m.get("update_links")
        if not links:
            return "-"
        base = links["non_update_points"] if key == "false_alarms" else links["update_points"]
        return f"{links[key]} of {base}"

    return cell


# Issue 39: did the save-time conflict check link each real update to what it replaces (shown when a run has counts)
LINK_ROWS: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    ("Update links: right", _links("right")),
    ("Update links: wrong", _links("wrong")),
    ("Update links: missed", _links("missed")),
    ("Update links: nothing held to link", _links("no_target")),
    ("Update links: false alarms (non-update points)", _links("false_alarms")),
]


def make_table(metrics: list[dict[str, Any]], convention: str | None = None) -> Any:
    """Table 2: one column per measured run (percent, 95% CI), then labelled paper columns."""
    row_specs: list[tuple[str, Callable[[dict[str, Any]], dict[str, Any] | None]]] = [
        ("Extraction recall", lambda m: (m.get("extraction") or {}).get("recall")),
        ("Extraction weighted recall", lambda m: (m.get("extraction") or {}).get("weighted_recall")),
        ("Extraction target precision", lambda m: (m.get("extraction") or {}).get("target_precision")),
        ("Extraction accuracy", lambda m: (m.get("extraction") or {}).get("accuracy")),
        ("False-memory resistance", lambda m: (m.get("extraction") or {}).get("false_memory_resistance")),
        ("Extraction F1", lambda m: (m.get("extraction") or {}).get("f1")),
        ("Update correct", lambda m: (m.get("updating") or {}).get("correct")),
        ("Update hallucination", lambda m: (m.get("updating") or {}).get("hallucination")),
        ("Update omission", lambda m: (m.get("updating") or {}).get("omission")),
        ("QA correct", lambda m: (m.get("qa") or {}).get("correct")),
        ("QA hallucination", lambda m: (m.get("qa") or {}).get("hallucination")),
        ("QA omission", lambda m: (m.get("qa") or {}).get("omission")),
    ]
    columns: dict[str, list[str]] = {}
    link_rows = LINK_ROWS if any(run.get("update_links") for run in metrics) else []
    for run in metrics:
        meta = run.get("metadata", {})
        label = f"{row_label(run)} (HaluMem-{run.get('variant', '?')}, {meta.get('llm_model_id', '?')})"
        columns[label] = [format_ci(getter(run), digits=2, ci_digits=1, missing="-") for _, getter in row_specs]
        columns[label].append(failures_cell(run))
        columns[label] += [cell(run) for _, cell in link_rows]
    for paper_label, values in PAPER_VALUES.items():
        columns[paper_label] = [f"{values[name]:.2f}" if name in values else "" for name, _ in row_specs] + [""] + ["" for _ in link_rows]
    table = pd.DataFrame(columns, index=[name for name, _ in row_specs] + [FAILURES_COLUMN] + [name for name, _ in link_rows])
    table.index.name = "metric (%)"
    return table
