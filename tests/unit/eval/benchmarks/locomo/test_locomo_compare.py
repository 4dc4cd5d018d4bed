"""eval/benchmarks/locomo/compare.py: LoCoMo runs paired by question (judge, F1, per category, conversation clusters)
and their write cost per ingested turn."""

from __future__ import annotations

import pytest

from eval.benchmarks.locomo.compare import compare_locomo, write_cost
from tests.run_folders import locomo_clustered_run, locomo_run


def test_locomo_runs_compare_by_question_and_category(tmp_path):
    base = locomo_run(tmp_path, "base", [1, 0, 0, 1, 0, 0])
    other = locomo_run(tmp_path, "other", [1, 1, 0, 1, 0, 1], calls=7)  # both gains in category 2
    result = compare_locomo(base, other, n_samples=300)
    assert result["n_shared"] == 6 and result["correct"]["mean"] == pytest.approx(2 / 6)
    assert result["f1"]["mean"] == pytest.approx(2 / 6)  # the right answer is the gold text: F1 1 vs 0
    assert set(result["per_category"]) == {"1", "2"} and result["per_category"]["2"]["mean"] == pytest.approx(2 / 3)
    assert result["per_category"]["1"]["mean"] == 0.0
    cost = write_cost(other)
    assert cost["calls_per_turn"] == pytest.approx(7 / 5) and cost["tokens_per_turn"] == pytest.approx(200)
    assert cost["seconds_per_turn"] == pytest.approx(1.0) and cost["by_purpose_per_turn"]["conflict"]["calls"] == pytest.approx(2 / 5)


def test_locomo_differences_carry_a_conversation_interval(tmp_path):
    # the gain sits in three of six conversations: per question it looks certain, per conversation far less so
    base = locomo_clustered_run(tmp_path, "base", [0, 0, 0, 0, 0, 0])
    other = locomo_clustered_run(tmp_path, "other", [1, 1, 1, 0, 0, 0], retrieved_text="one two three four five")
    correct = compare_locomo(base, other, n_samples=500)["correct"]
    assert correct["n"] == 120 and correct["n_clusters"] == 6 and correct["mean"] == pytest.approx(0.5)
    assert correct["cluster_ci_high"] - correct["cluster_ci_low"] > 2 * (correct["ci_high"] - correct["ci_low"])
