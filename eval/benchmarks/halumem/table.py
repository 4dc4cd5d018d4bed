"""HaluMem's Table 2: one column per measured run (percent, 95% CI), then labelled paper columns."""

from __future__ import annotations

from typing import Any, Callable

import pandas as pd

from eval.benchmarks.halumem.mechanism_table import is_probe_only
from eval.benchmarks.halumem.metrics import PROTOCOL
from eval.benchmarks.halumem.update_links import false_alarm_text
from eval.intervals import interval_note, report_settings
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
}

# Reported, not measured: HaluMem's own leaderboard (README of github.com/MemTensor/HaluMem/tree/2fc3737,
# "HaluMem-Medium Dataset": all 20 users, their systems' hosted APIs, GPT-4o as judge). Zep publishes no
# extraction metrics (no API lists a session's memories). The MOSAIC paper quotes MemOS's update correct from it.
_REPORTED_ROWS = ("Extraction recall", "Extraction weighted recall", "Extraction target precision", "Extraction accuracy",
                  "False-memory resistance", "Extraction F1", "Update correct", "Update hallucination", "Update omission",
                  "QA correct", "QA hallucination", "QA omission")  # fmt: skip
REPORTED_VALUES: dict[str, dict[str, float]] = {
    f"reported by HaluMem: {name} (HaluMem-Medium, 20 users)": dict(zip(_REPORTED_ROWS[-len(values):], values))
    for name, values in (
        ("MemOS", (74.07, 84.81, 86.25, 59.55, 44.94, 79.70, 62.11, 0.42, 37.48, 67.23, 15.17, 17.59)),
        ("Mem0", (42.91, 65.03, 86.26, 60.86, 56.80, 57.31, 25.50, 0.45, 74.02, 53.02, 19.17, 27.81)),
        ("Zep", (47.28, 0.42, 52.31, 55.47, 21.92, 22.62)),
    )
}


def _links(key: str) -> Callable[[dict[str, Any]], str]:
    """An update-link count (eval/benchmarks/halumem/update_links.py) as 'n of N', or '-' when the run has none."""

    def cell(m: dict[str, Any]) -> str:
        links = m.get("update_links")
        if not links:
            return "-"
        return false_alarm_text(links) if key == "false_alarms" else f"{links[key]} of {links['update_points']}"

    return cell


# Did the save-time conflict check link each real update to what it replaces (shown when a run has counts)
LINK_ROWS: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    ("Update links: right", _links("right")),
    ("Update links: wrong", _links("wrong")),
    ("Update links: missed", _links("missed")),
    ("Update links: nothing held to link", _links("no_target")),
    ("Update links: false alarms (non-update points alarmed)", _links("false_alarms")),
]


def _slice(run: dict[str, Any]) -> str:
    """', sessions 0-9 only' for a session-limited run (benchmark.limit_sessions), so its column is not read as the
    whole user's."""
    for override in (run.get("metadata") or {}).get("overrides") or []:
        if isinstance(override, str) and override.startswith("benchmark.limit_sessions="):
            value = override.split("=", 1)[1]
            if value.isdigit():
                return f", sessions 0-{int(value) - 1} only"
    return ""


def protocol_label(run: dict[str, Any]) -> str:
    """'fixed protocol' for a run scored after the audit against HaluMem's toolkit (metrics.PROTOCOL), else 'old
    protocol': its update judge called old-plus-new Correct, so its update column cannot tell supersession from
    append-only, and its accuracy verdicts mirrored the gold-field answer (docs/halumem.md, deviations 1 and 3)."""
    return "fixed protocol" if run.get("protocol") == PROTOCOL else "old protocol"


# Overrides that say where a run writes or logs, not what it measures: two commands differing only in them are one row
_NOT_MEASURED = ("results_dir=", "logger=")


def _command(run: dict[str, Any]) -> tuple[tuple[str, ...], Any]:
    """What makes two runs the same row: the command's overrides (less _NOT_MEASURED) and the input file's hash."""
    meta = run.get("metadata") or {}
    overrides = (str(o) for o in meta.get("overrides") or ())
    return tuple(o for o in overrides if not o.startswith(_NOT_MEASURED)), meta.get("input_hash")


def rescored(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Old-protocol runs that a fixed-protocol run of the same command on the same input re-scores (the method
    unchanged, only the metric): Table 2 shows the re-score in their place; results/published keeps both."""
    fixed = {_command(run) for run in runs if protocol_label(run) == "fixed protocol"}
    return [run for run in runs if protocol_label(run) == "old protocol" and _command(run) in fixed]


def interval_cell(run: dict[str, Any]) -> str:
    """Which interval the run's cells show: the user interval from conf/report.yaml's number of users up, else the
    per-item one (over one user: it holds for that user only). A run made before users were counted in its
    intervals is described by its user count."""
    stat = dict((run.get("qa") or run.get("updating") or {}).get("correct") or {})
    if stat and stat.get("n_clusters") is None and (run.get("counts") or {}).get("users") == 1:
        stat["n_clusters"] = 1
    return interval_note(stat, int(report_settings()["min_clusters_for_cluster_interval"]), item="item", cluster="user")


def tokens_cell(run: dict[str, Any]) -> str:
    """Tokens each QA search returned, ``median / p95`` (eval/tokens.py); '-' for a run that did not count them."""
    summary = (run.get("returned_tokens") or {}).get("qa") or {}
    return "-" if summary.get("median") is None else f"{summary['median']:.0f} / {summary['p95']:.0f}"


EXTRA_ROWS = ["Interval shown", "Tokens returned per QA search (p50 / p95)"]


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
        ("Update other", lambda m: (m.get("updating") or {}).get("other")),
        ("Update: new version ranked above the replaced one (no judge)",
         lambda m: ((m.get("updating") or {}).get("version_ranking") or {}).get("new_above_old")),
        ("QA correct", lambda m: (m.get("qa") or {}).get("correct")),
        ("QA hallucination", lambda m: (m.get("qa") or {}).get("hallucination")),
        ("QA omission", lambda m: (m.get("qa") or {}).get("omission")),
    ]
    metrics = [run for run in metrics if not is_probe_only(run)]  # mechanism rows (results/tables/mechanism.md), no task scored
    replaced = rescored(metrics)
    metrics = [run for run in metrics if not any(run is old for old in replaced)]
    columns: dict[str, list[str]] = {}
    link_rows = LINK_ROWS if any(run.get("update_links") for run in metrics) else []
    for run in metrics:
        meta = run.get("metadata", {})
        label = f"{row_label(run)} (HaluMem-{run.get('variant', '?')}, {meta.get('llm_model_id', '?')}{_slice(run)}; {protocol_label(run)})"
        columns[label] = [format_ci(getter(run), digits=2, ci_digits=1, missing="-") for _, getter in row_specs]
        columns[label].append(failures_cell(run))
        columns[label] += [cell(run) for _, cell in link_rows]
        columns[label] += [interval_cell(run), tokens_cell(run)]
    for paper_label, values in {**PAPER_VALUES, **REPORTED_VALUES}.items():
        columns[paper_label] = ([f"{values[name]:.2f}" if name in values else "" for name, _ in row_specs] + [""] + ["" for _ in link_rows]
                                + ["" for _ in EXTRA_ROWS])  # fmt: skip
    table = pd.DataFrame(columns, index=[name for name, _ in row_specs] + [FAILURES_COLUMN] + [name for name, _ in link_rows] + EXTRA_ROWS)
    table.index.name = "metric (%)"
    table.attrs["caption"] = caption(metrics, len(replaced))
    return table


def caption(metrics: list[dict[str, Any]], n_replaced: int = 0) -> str:
    """What the measured columns measured (users, questions, judge: from the runs) beside what the labelled
    columns are, so the two kinds are not read as one comparison."""
    users = sorted({str((run.get("counts") or {}).get("users", "?")) for run in metrics})
    questions = sorted({int((run.get("counts") or {}).get("questions") or 0) for run in metrics})
    judges = sorted({str(run.get("metadata", {}).get("judge_model_id", "?")) for run in metrics})
    return (
        f"Table 2 (HaluMem-Medium), % with 95% bootstrap CI. Measured columns: {' or '.join(users)} user(s) per run, "
        f"{' or '.join(map(str, questions))} questions per run, judged by {', '.join(judges)} (the local model, not GPT-4o). "
        "'paper:' columns are the MOSAIC paper's values; 'reported by HaluMem:' columns are HaluMem's leaderboard "
        "(20 users, the systems' hosted APIs, GPT-4o as judge). Neither kind was measured here, and they cover other "
        "users, more questions and another judge: compare measured columns with each other only. "
        "'fixed protocol' columns are scored as docs/halumem.md's deviation table says (update Correct needs the "
        "original replaced or marked outdated; accuracy asked apart from the gold-field question; '(valid)' ratios "
        "with failures counted); 'old protocol' columns were judged before that audit, so their update column cannot "
        "tell supersession from append-only: compare them with each other only"
        + (f"; {n_replaced} old-protocol run(s) re-scored under the fixed protocol are shown by their re-score "
           "(results/published keeps both)." if n_replaced else ".")
    )
