"""What the retrieval-only tables of every benchmark share (``benchmark.stages=[ingest, retrieve]``): a row's label and
costs, a paired-difference cell, which run is the base row every other is paired with, and the recall-vs-tokens figure.

Why its own module: a retrieval-only run has no answers and no judge, so it is never a row of a benchmark's main
table; each benchmark builds its own retrieval table from its runs' metrics.json and ranked rows (no LLM;
eval/benchmarks/<name>/retrieval_table.py), and ``scripts/make_tables.py`` writes them with these cells.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eval.budget import plot_recall_vs_tokens
from eval.intervals import chosen_interval, report_settings
from eval.tables import row_label

HEADLINE_K = 10  # the k of the tables' recall@k columns


def _meta(m: dict[str, Any]) -> dict[str, Any]:
    return m.get("metadata", {})


def base_row() -> tuple[str, str]:
    """(system, ablation) of the row every other is paired with (conf/report.yaml ``retrieval_base_row``)."""
    row = report_settings()["retrieval_base_row"]
    return str(row["system"]), str(row["ablation"])


def system_settings(m: dict[str, Any]) -> tuple[str, ...]:
    """The run's command-line ``system.*`` settings, sorted (a base row has none)."""
    return tuple(sorted(str(o) for o in _meta(m).get("overrides", []) if str(o).startswith("system.")))


def is_base(m: dict[str, Any]) -> bool:
    """Whether a run is a base row: the configured (system, ablation) with no command-line system setting."""
    return (_meta(m).get("system"), _meta(m).get("ablation")) == base_row() and not system_settings(m)


def run_label(m: dict[str, Any]) -> str:
    """The row's name: what it measures (``eval.tables.row_label``), marked retrieval only or read from a full run."""
    return f"{row_label(m)} [{'from its full run, top ' + str(m.get('top_k')) if m.get('from_full_run') else 'retrieval only'}]"


def wall_seconds(m: dict[str, Any]) -> float | None:
    """Wall time over every invocation of the run folder (provenance.json), else the last invocation's."""
    folder = Path(m.get("_path", "")).parent
    record = folder / "provenance.json"
    if record.is_file():
        calls = json.loads(record.read_text(encoding="utf-8")).get("invocations", [])
        walls = [c.get("wall_s") for c in calls if c.get("wall_s") is not None]
        if walls:
            return float(sum(walls))
    return _meta(m).get("wall_s_this_invocation")


def diff_cell(stat: dict[str, Any]) -> str:
    """A paired difference in points with its CI, ``+1.2 [-0.4, +2.9]``; empty when undefined. The cluster
    (conversation or user) interval where the pairs span enough clusters (conf/report.yaml), else the per-item one."""
    if stat.get("mean") is None or stat.get("ci_low") is None:
        return ""
    prefix = "cluster_" if chosen_interval(stat, int(report_settings()["min_clusters_for_cluster_interval"])) == "cluster" else ""
    return f"{stat['mean'] * 100:+.1f} [{stat[prefix + 'ci_low'] * 100:+.1f}, {stat[prefix + 'ci_high'] * 100:+.1f}]"


def cost_columns(m: dict[str, Any]) -> dict[str, Any]:
    """What a row cost: LLM calls and tokens (every invocation) and wall time (every invocation)."""
    usage = _meta(m).get("llm_usage") or {}
    wall = wall_seconds(m)
    return {"LLM calls": usage.get("calls", ""),
            "LLM tokens": (usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0) if usage else "",
            "wall time (s)": f"{wall:.0f}" if wall is not None else ""}  # fmt: skip


def mean_cell(values: list[float]) -> dict[str, Any]:
    return {"mean": sum(values) / len(values) if values else None}


def recall_vs_tokens_figure(panels: dict[str, dict[str, Any]], path: Path) -> Path | None:
    """Evidence recall against the token budget for the retrieval rows (eval/budget.py's cut, conf/report.yaml's figure
    budgets), one panel per set of questions as each benchmark draws them (its ``recall_vs_tokens_panels``). Means only:
    intervals are in the tables."""
    if not panels:
        return None
    title = ("Retrieval only: evidence recall with each row's ranked list cut at a token budget (lines) and whole (stars, at the median\n"
             "tokens returned); published retrieval rows, budgets from conf/report.yaml, intervals in results/tables/retrieval*.md")  # fmt: skip
    return plot_recall_vs_tokens(panels, path, title)
