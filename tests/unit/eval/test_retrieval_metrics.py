"""Retrieval metrics against gold evidence (eval/retrieval_metrics.py): recall@k, any-hit@k, NDCG@k by hand."""

from __future__ import annotations

import math

import pytest

from eval.retrieval_metrics import by_group, metric_names, question_scores, ranked_units, summarise


def session_of(turn_id: str) -> str:
    """A coarser unit, as a benchmark maps its ids: ``D2:7`` -> ``D2``."""
    return turn_id.split(":", 1)[0]


def test_recall_and_any_hit_count_gold_units_covered_by_the_first_k_items():
    items = ranked_units([["D1:1"], ["D2:3", "D1:2"], ["D3:1"]])
    s = question_scores({"D1:2", "D3:1"}, items, [1, 2, 3], 3)
    assert (s["recall@1"], s["recall@2"], s["recall@3"]) == (0.0, 0.5, 1.0)
    assert (s["any_hit@1"], s["any_hit@2"], s["any_hit@3"]) == (0.0, 1.0, 1.0)


def test_ndcg_gives_a_gold_unit_its_gain_once_and_stays_within_one():
    """Three facts citing the one gold turn: only the first earns a gain (else NDCG would pass 1)."""
    items = ranked_units([["D1:1"], ["D1:1"], ["D1:1"]])
    assert question_scores({"D1:1"}, items, [1], 10)["ndcg@10"] == 1.0
    late = question_scores({"D1:1", "D2:1"}, ranked_units([["D9:9"], ["D1:1"], ["D2:1"]]), [3], 10)["ndcg@10"]
    ideal = 1 + 1 / math.log2(3)
    assert late == pytest.approx((1 / math.log2(3) + 1 / math.log2(4)) / ideal)


def test_session_level_maps_turns_to_their_session_and_no_gold_is_unscored():
    items = ranked_units([["D2:7"]], session_of)
    assert question_scores({session_of("D2:1")}, items, [1], 10)["recall@1"] == 1.0
    assert question_scores(set(), items, [1], 10) is None
    assert question_scores({"D2:1"}, [], [1], 10)["recall@1"] == 0.0  # nothing retrieved


def test_summaries_per_group_carry_a_ci_for_every_metric():
    names = metric_names([1], 10)
    scored = [(1, {"recall@1": 1.0, "any_hit@1": 1.0, "ndcg@10": 1.0}), (2, {"recall@1": 0.0, "any_hit@1": 0.0, "ndcg@10": 0.0})]
    groups = by_group(scored, names, 100, 0)
    assert groups["1"]["recall@1"]["mean"] == 1.0 and groups["2"]["n"] == 1
    overall = summarise([s for _, s in scored], names, 100, 0)
    assert overall["recall@1"]["mean"] == 0.5 and overall["recall@1"]["ci_low"] is not None
