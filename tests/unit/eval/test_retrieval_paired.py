"""Paired differences of a retrieval-only run to its base, added to its metrics.json from both runs' ranked rows
(eval/retrieval_paired.py, scripts.add_fields): values by hand on generated rows, both intervals with their counts,
a run's held values never changed."""

from __future__ import annotations

import json

import pytest
import yaml

from eval.benchmarks.locomo.retrieval import retrieval_metrics
from eval.retrieval_paired import SECTION, add_retrieval_fields

BENCH = {"retrieval_ks": [1, 2], "ndcg_k": 2, "bootstrap_samples": 200, "seed": 0, "token_budgets": [5]}


def _rows(hit_first: bool, conversations: int = 6, per: int = 4) -> list[dict]:
    """Questions with one evidence turn each: the evidence ranked first (``hit_first``) or second; items of 4 tokens."""
    rows = []
    for c in range(conversations):
        for q in range(per):
            gold, other = f"D1:{q}", f"D2:{q}"
            ranked = [[gold], [other]] if hit_first else [[other], [gold]]
            rows.append({"key": f"conv-{c}:q{q}", "sample_id": f"conv-{c}", "qa_index": q, "category": 1 + q % 2, "evidence": [gold],
                         "retrieved_ids": ranked, "retrieved_tokens": [4, 4], "returned_tokens": 8})  # fmt: skip
    return rows


def _run(folder, rows) -> None:
    folder.mkdir(parents=True)
    (folder / "retrievals.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "config.yaml").write_text(yaml.safe_dump({"benchmark": BENCH}))
    metrics = {"benchmark": "locomo", "stages": ["ingest", "retrieve"], "retrieval": retrieval_metrics(rows, [1, 2], 2, 200, 0, [5])}
    (folder / "metrics.json").write_text(json.dumps(metrics))


def test_paired_differences_to_the_base_by_hand_with_both_intervals(tmp_path):
    _run(tmp_path / "base", _rows(hit_first=False))
    _run(tmp_path / "run", _rows(hit_first=True))
    report = add_retrieval_fields(tmp_path / "run", tmp_path / "base")
    assert not report.conflicts and report.added
    paired = json.loads((tmp_path / "run" / "metrics.json").read_text())[SECTION]
    recall1 = paired["turn"]["overall"]["recall@1"]
    assert recall1["mean"] == 1.0 and recall1["n"] == 24 and recall1["n_clusters"] == 6  # 1 - 0 on every question
    assert recall1["cluster_ci_low"] == recall1["cluster_ci_high"] == 1.0
    assert paired["turn"]["overall"]["recall@2"]["mean"] == 0.0  # both find it within 2
    assert paired["turn"]["per_group"]["2"]["recall@1"]["n"] == 12
    # at 5 tokens only the first item (4 tokens) fits: recall 1 against 0
    assert paired["evidence_recall_at_budget"]["overall"]["5"]["mean"] == 1.0
    again = add_retrieval_fields(tmp_path / "run", tmp_path / "base")
    assert not again.added and not again.conflicts  # nothing left to add, nothing changed


def test_a_held_value_that_would_change_leaves_the_run_untouched(tmp_path):
    _run(tmp_path / "run", _rows(hit_first=True))
    path = tmp_path / "run" / "metrics.json"
    metrics = json.loads(path.read_text())
    metrics["retrieval"]["turn"]["overall"]["recall@1"]["mean"] = 0.5
    path.write_text(json.dumps(metrics))
    report = add_retrieval_fields(tmp_path / "run", None)
    assert report.conflicts and json.loads(path.read_text()) == metrics


def test_the_base_run_gets_no_difference_to_itself(tmp_path):
    _run(tmp_path / "base", _rows(hit_first=False))
    add_retrieval_fields(tmp_path / "base", tmp_path / "base")
    assert SECTION not in json.loads((tmp_path / "base" / "metrics.json").read_text())


@pytest.mark.parametrize("hit_first", [True, False])
def test_recall_at_a_budget_matches_a_hand_count(hit_first):
    at = retrieval_metrics(_rows(hit_first), [1, 2], 2, 50, 0, [3, 4, 8])["evidence_recall_at_budget"]["overall"]
    assert at["3"]["mean"] == 0.0  # no item fits in 3 tokens
    assert at["4"]["mean"] == (1.0 if hit_first else 0.0)  # the first item only
    assert at["8"]["mean"] == 1.0  # both


def test_the_retrieval_table_and_figure_show_recall_at_the_fixed_budget(tmp_path):
    from eval.intervals import report_settings
    from eval.retrieval_table import recall_vs_tokens_figure, retrieval_table

    runs = []
    for name, (system, ablation), hit_first in (("run", ("mosaic", "oracle_extractor_no_conflict"), True), ("base", ("rag", "oracle_facts"), False)):
        rows = [{**r, "retrieved_tokens": [600, 600], "returned_tokens": 1200} for r in _rows(hit_first)]
        _run(tmp_path / name, rows)
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
    path = recall_vs_tokens_figure(runs, [], tmp_path / "figure.png")
    assert path is not None and path.stat().st_size > 0


def test_compare_runs_prints_both_intervals_for_retrieval_only_runs(tmp_path, capsys):
    from scripts.compare_runs import main as compare_runs

    for name, hit_first in (("base", False), ("run", True)):
        _run(tmp_path / name, _rows(hit_first))
        (tmp_path / name / "ingest.jsonl").write_text("")
    result = compare_runs([str(tmp_path / "base"), str(tmp_path / "run"), "--samples", "200"])
    assert result["benchmark"] == "locomo_retrieval"
    quality = result["comparisons"][0]["quality"]
    assert quality["recall"]["mean"] == 0.0 and quality["recall"]["n_clusters"] == 6  # recall@10: both find it within 2
    assert quality["budget"]["mean"] == 0.0  # 8 tokens returned: under the tables' 1,000-token budget, so uncut
    assert "by conversation (6)" in capsys.readouterr().out
