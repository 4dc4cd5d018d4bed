"""LoCoMo's paired retrieval differences to a base run (eval/benchmarks/locomo/retrieval_paired.py), added to a
run's metrics.json from both runs' ranked rows (scripts.add_fields) and paired by scripts.compare_runs: values by hand
on generated rows, both intervals with their counts."""

from __future__ import annotations

import json

import pytest
import yaml

from eval.added_fields import add_retrieval_fields
from eval.benchmarks.locomo.retrieval import retrieval_metrics
from eval.retrieval_paired import SECTION

BENCH = {"retrieval_ks": [1, 2], "ndcg_k": 2, "bootstrap_samples": 200, "seed": 0, "token_budgets": [5]}


def ranked_rows(hit_first: bool, conversations: int = 6, per: int = 4) -> list[dict]:
    """Questions with one evidence turn each: the evidence ranked first (``hit_first``) or second; items of 4 tokens."""
    rows = []
    for c in range(conversations):
        for q in range(per):
            gold, other = f"D1:{q}", f"D2:{q}"
            ranked = [[gold], [other]] if hit_first else [[other], [gold]]
            rows.append({"key": f"conv-{c}:q{q}", "sample_id": f"conv-{c}", "qa_index": q, "category": 1 + q % 2, "evidence": [gold],
                         "retrieved_ids": ranked, "retrieved_tokens": [4, 4], "returned_tokens": 8})  # fmt: skip
    return rows


def retrieval_run(folder, rows) -> None:
    folder.mkdir(parents=True)
    (folder / "retrievals.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "config.yaml").write_text(yaml.safe_dump({"benchmark": BENCH}))
    metrics = {"benchmark": "locomo", "stages": ["ingest", "retrieve"], "retrieval": retrieval_metrics(rows, [1, 2], 2, 200, 0, [5]),
               "metadata": {"benchmark_target": "eval.benchmarks.locomo.LoCoMoBenchmark"}}
    (folder / "metrics.json").write_text(json.dumps(metrics))


def test_paired_differences_to_the_base_by_hand_with_both_intervals(tmp_path):
    retrieval_run(tmp_path / "base", ranked_rows(hit_first=False))
    retrieval_run(tmp_path / "run", ranked_rows(hit_first=True))
    report = add_retrieval_fields(tmp_path / "run", tmp_path / "base")
    assert not report.mismatches and report.added
    paired = json.loads((tmp_path / "run" / "metrics.json").read_text())[SECTION]
    recall1 = paired["turn"]["overall"]["recall@1"]
    assert recall1["mean"] == 1.0 and recall1["n"] == 24 and recall1["n_clusters"] == 6  # 1 - 0 on every question
    assert recall1["cluster_ci_low"] == recall1["cluster_ci_high"] == 1.0
    assert paired["turn"]["overall"]["recall@2"]["mean"] == 0.0  # both find it within 2
    assert paired["turn"]["per_group"]["2"]["recall@1"]["n"] == 12
    # at 5 tokens only the first item (4 tokens) fits: recall 1 against 0
    assert paired["evidence_recall_at_budget"]["overall"]["5"]["mean"] == 1.0
    again = add_retrieval_fields(tmp_path / "run", tmp_path / "base")
    assert not again.added and not again.mismatches  # nothing left to add, nothing changed


@pytest.mark.parametrize("hit_first", [True, False])
def test_recall_at_a_budget_matches_a_hand_count(hit_first):
    at = retrieval_metrics(ranked_rows(hit_first), [1, 2], 2, 50, 0, [3, 4, 8])["evidence_recall_at_budget"]["overall"]
    assert at["3"]["mean"] == 0.0  # no item fits in 3 tokens
    assert at["4"]["mean"] == (1.0 if hit_first else 0.0)  # the first item only
    assert at["8"]["mean"] == 1.0  # both


def test_compare_runs_prints_both_intervals_for_retrieval_only_runs(tmp_path, capsys):
    from scripts.compare_runs import main as compare_runs

    for name, hit_first in (("base", False), ("run", True)):
        retrieval_run(tmp_path / name, ranked_rows(hit_first))
        (tmp_path / name / "ingest.jsonl").write_text("")
    result = compare_runs([str(tmp_path / "base"), str(tmp_path / "run"), "--samples", "200"])
    assert result["benchmark"] == "locomo_retrieval"
    quality = result["comparisons"][0]["quality"]
    assert quality["recall"]["mean"] == 0.0 and quality["recall"]["n_clusters"] == 6  # recall@10: both find it within 2
    assert quality["budget"]["mean"] == 0.0  # 8 tokens returned: under the tables' 1,000-token budget, so uncut
    assert "by conversation (6)" in capsys.readouterr().out
