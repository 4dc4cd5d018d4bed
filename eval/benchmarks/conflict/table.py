"""Table 3 from the conflict suite's metrics.json files, and the README's few columns of it."""

from __future__ import annotations

from typing import Any

import pandas as pd

from eval.benchmarks.conflict.suite import CONFLICT_TYPES
from eval.metrics import format_ci
from eval.tables import FAILURES_COLUMN, failures_cell, is_paper_configuration, row_label

# Paper values for Table 3 (MOSAIC paper, hypertension suite, 50 injected errors). Labelled column only.
# The paper's suite is not public: its row names its own suite, never this project's hypertension suite.
PAPER_SUITE = "the paper's own suite (not public)"
# Which interval the conflict tables show: cases of one context probe the same stored memories (the cluster of
# eval/intervals.py); the development suites have one context each, too few for a context interval.
INTERVAL_NOTE = "Intervals resample cases; cases of one context share its stored memories, so an interval holds for the suite's contexts only. "
PAPER_SUITE_NOTE = ("The paper's values come from its own 50-error suite, which is not public; data/conflicts/hypertension.json "
                    "was written for this project after the paper's description, so its rows are not the paper's cases.")
PAPER_COLUMN = "paper: MOSAIC 66 overall, numeric 64.3, semantic 69.2, logical 65.2, implicit 72.7, explicit 64.1; baselines 2-14%"
PAPER_VALUES = {"overall": 66.0, "numeric": 64.3, "semantic": 69.2, "logical": 65.2, "explicit": 64.1, "implicit": 72.7}


def _suite_label(metrics: dict[str, Any]) -> str:
    """The suite's name, and which slice of it when the run did not score every case."""
    cut = metrics.get("slice") or {}
    parts = []
    if cut.get("cases_per_group"):
        parts.append(f"first {cut['cases_per_group']} per group")
    if cut.get("limit_cases"):
        parts.append(f"first {cut['limit_cases']}")
    name = str(metrics.get("suite", ""))
    return f"{name} (slice: {', '.join(parts)})" if parts else name


def conflict_table(metrics_list: list[dict[str, Any]]) -> pd.DataFrame:
    """Detection (strict) per type and false alarms, one row per run, plus the labelled paper column."""
    columns = ["overall", "numeric", "semantic", "logical", "explicit", "implicit", "false alarms"]
    rows = []
    for m in metrics_list:
        label = row_label(m)
        no_signal = m.get("conflict_signal") is False
        silent = m.get("conflict_events_seen", 0) == 0
        cells = {
            "overall": m.get("detection_rate"),
            **{t: m.get("by_type", {}).get(t) for t in CONFLICT_TYPES},
            "explicit": m.get("explicit"),
            "implicit": m.get("implicit"),
            "false alarms": m.get("false_alarm_rate"),
        }
        row: dict[str, Any] = {"system": label, "suite": _suite_label(m)}
        for col in columns:
            if no_signal:
                row[col] = "0 by construction"
            elif silent:
                row[col] = "0 (no conflict signal raised)"
            else:
                row[col] = format_ci(cells[col])
        row["precision"] = "" if no_signal else format_ci(m.get("precision"))
        # a system that raised no signal is "0 (no conflict signal raised)" in every detection column, lenient too
        row["lenient overall"] = "" if no_signal else "0 (no conflict signal raised)" if silent else format_ci(m.get("lenient", {}).get("detection_rate"))
        row["n (conflict/other)"] = f"{m.get('n_conflicting', 0)}/{m.get('n_non_conflicting', 0)}"
        row["LLM calls/case"] = round((m.get("llm_calls_per_case") or {}).get("mean") or 0.0, 2)
        row["misses"] = misses_cell(m)
        row[FAILURES_COLUMN] = failures_cell(m)
        rows.append(row)
    paper = {"system": PAPER_COLUMN, "suite": PAPER_SUITE}
    paper.update({c: (f"{PAPER_VALUES[c]:.1f}" if c in PAPER_VALUES else "not reported") for c in columns})
    paper.update({"precision": "not reported", "lenient overall": "", "n (conflict/other)": "50/0", "LLM calls/case": "",
                  "misses": "", FAILURES_COLUMN: ""})
    rows.append(paper)
    table = pd.DataFrame(rows).set_index("system")
    table.attrs["caption"] = (
        "Table 3: injected-conflict detection, % with 95% bootstrap CI (strict: event against a memory from a "
        "conflicts_with turn); false alarms = share of non-conflicting probes that raised any event. "
        "Append-only systems raise no conflict signal: 0 by construction. Misses: conflicting probes not detected "
        "(strict). Failures: rows / ingested turns (context and probes) the system failed to store; n/a: not recorded. "
        + INTERVAL_NOTE + PAPER_SUITE_NOTE
    )
    return table


def misses_cell(metrics: dict[str, Any]) -> str:
    """Conflicting probes not detected (strict), as ``"27 of 50"``, from the run's per-reason miss counts."""
    misses = metrics.get("misses")
    if not isinstance(misses, dict) or metrics.get("conflict_signal") is False:
        return ""
    count = sum(int(n) for by_reason in misses.values() if isinstance(by_reason, dict) for n in by_reason.values())
    return f"{count} of {metrics.get('n_conflicting', '?')}"


def _paper_setting(m: dict[str, Any]) -> bool:
    """MOSAIC, configured as the paper did, on the suite written after the paper's description."""
    return str(m.get("metadata", {}).get("system", "")) == "mosaic" and m.get("suite") == "hypertension" and is_paper_configuration(m)


def headline_table(metrics_list: list[dict[str, Any]]) -> pd.DataFrame:
    """The README's view of Table 3: detection, false alarms, precision, misses and failures per run; the paper's
    detection only beside MOSAIC run as the paper configured it on the paper's suite."""
    # the gold-judge study is a ceiling, not a system: its rows stay in conflict.md, out of the README view
    metrics_list = [m for m in metrics_list if not m.get("oracle_conflicts")]
    if not metrics_list:
        return pd.DataFrame()
    rows = []
    for m in sorted(metrics_list, key=lambda run: (_suite_label(run), row_label(run))):
        signal = m.get("conflict_signal") is not False
        silent = "0 (no conflict signal raised)" if m.get("conflict_events_seen", 0) == 0 else None  # as conflict_table says it
        rows.append({
            "system": row_label(m),
            "suite": _suite_label(m),
            "detection": (silent or format_ci(m.get("detection_rate"))) if signal else "0 by construction",
            "false alarms": (silent or format_ci(m.get("false_alarm_rate"))) if signal else "0 by construction",
            "precision": format_ci(m.get("precision")) if signal else "",
            "misses": misses_cell(m),
            FAILURES_COLUMN: failures_cell(m),
            "LLM calls/case": round((m.get("llm_calls_per_case") or {}).get("mean") or 0.0, 2),
        })  # fmt: skip
    if any(_paper_setting(m) for m in metrics_list):  # shown where MOSAIC ran as the paper configured it, as its own row
        rows.append({"system": "paper: MOSAIC (reported)", "suite": PAPER_SUITE, "detection": f"{PAPER_VALUES['overall']:.1f}",
                     "false alarms": "not reported", "precision": "not reported", "misses": "", FAILURES_COLUMN: "", "LLM calls/case": ""})  # fmt: skip
    table = pd.DataFrame(rows).set_index("system")
    table.attrs["caption"] = (
        "Injected conflicts (Table 3, headline columns; every column in results/tables/conflict.md). % [95% bootstrap "
        "CI]; detection is strict; false alarms: share of non-conflicting probes that raised any event. 'paper: "
        "MOSAIC (reported)' is copied from the MOSAIC paper (its own LLM), not measured here. " + INTERVAL_NOTE + PAPER_SUITE_NOTE
    )
    return table
