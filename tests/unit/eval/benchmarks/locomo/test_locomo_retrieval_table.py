"""LoCoMo's retrieval-only table and recall-vs-tokens panels (eval/benchmarks/locomo/retrieval_table.py): recall at the
tables' fixed token budget and its paired difference to the configured base row."""

from __future__ import annotations

import json

from eval.benchmarks.locomo.retrieval import retrieval_metrics
from eval.benchmarks.locomo.retrieval_table import recall_vs_tokens_panels, retrieval_table
from eval.retrieval_table import recall_vs_tokens_figure
from tests.unit.eval.benchmarks.locomo.test_locomo_retrieval_paired import ranked_rows, retrieval_run


def test_the_retrieval_table_and_figure_show_recall_at_the_fixed_budget(tmp_path):
    from eval.intervals import report_settings

    runs = []
    for name, (system, ablation), hit_first in (("run", ("mosaic", "oracle_extractor_no_conflict"), True), ("base", ("rag", "oracle_facts"), False)):
        rows = [{**r, "retrieved_tokens": [600, 600], "returned_tokens": 1200} for r in ranked_rows(hit_first)]
        retrieval_run(tmp_path / name, rows)
        metrics = json.loads((tmp_path / name / "metrics.json").read_text())
        metrics["retrieval"] = retrieval_metrics(rows, [1, 2], 2, 200, 0, report_settings()["token_budgets"])
        runs.append({**metrics, "_path": str(tmp_path / name / "metrics.json"), "slice": {"questions_selected": 24, "conversations_selected": 6},
                     "metadata": {"system": system, "ablation": ablation, "overrides": []}})  # fmt: skip
    budget = int(report_settings()["table_token_budget"])
    assert budget == 1000  # one 600-token item fits, two do not
    table = retrieval_table(runs, k=1).set_index("row")
    mosaic = table.loc[[r for r in table.index if "oracle_extractor" in r][0]]
    assert mosaic[f"recall @{budget} tokens"].startswith("100.0") and mosaic[f"diff to base @{budget} tokens"].startswith("+100.0")
    assert mosaic["tokens returned p50 / p95"] == "1200 / 1200"
    path = recall_vs_tokens_figure(recall_vs_tokens_panels(runs), tmp_path / "figure.png")
    assert path is not None and path.stat().st_size > 0
