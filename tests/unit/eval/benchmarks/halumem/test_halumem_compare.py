"""eval/benchmarks/halumem/compare.py: HaluMem runs paired by question, update point and session (labels, update
links, false alarms as a rate), optionally cut to their first sessions, and their cost per ingested turn."""

from __future__ import annotations

import pytest

from eval.benchmarks.halumem.compare import compare_halumem, write_cost
from tests.run_folders import halumem_run, writes_only_run


def test_halumem_runs_compare_qa_and_updates_by_key_and_can_be_cut_to_the_first_sessions(tmp_path):
    # questions 0, 2 are session 0's; 1, 3 session 1's
    base = halumem_run(tmp_path, "base", ["Correct", "Omission", "Hallucination", "Omission"], ["Correct", "Omission"])
    other = halumem_run(tmp_path, "other", ["Correct", "Correct", "Correct", None], ["Correct", "Correct"])
    whole = compare_halumem(base, other, n_samples=200)
    assert whole["n_shared"] == 6 and whole["qa_correct"]["mean"] == pytest.approx(2 / 4)
    assert whole["qa_hallucination"]["mean"] == pytest.approx(-1 / 4)  # a judge failure (None) counts as no label
    assert whole["qa_omission"]["mean"] == pytest.approx(-2 / 4) and whole["update_correct"]["mean"] == pytest.approx(1 / 2)
    first = compare_halumem(base, other, n_samples=200, sessions=1)  # session 0 only: questions 0 and 2, update 0
    assert first["n_shared"] == 3 and first["sessions"] == 1
    assert first["qa_correct"]["base"] == pytest.approx(1 / 2) and first["qa_correct"]["other"] == 1.0
    assert first["update_correct"]["mean"] == 0.0 and first["update_correct"]["n"] == 1
    cost = write_cost(other, sessions=1)
    assert (cost["turns"], cost["calls_per_turn"], cost["tokens_per_turn"]) == (2, 2.0, 22.0)
    assert write_cost(other)["calls_per_turn"] == pytest.approx(10 / 4)


def test_false_alarms_compare_alarmed_points_and_fall_back_to_events_when_a_run_has_none(tmp_path):
    """Events can outnumber points (one point, several written items), so the rate counts alarmed points; a run made
    before points were counted makes both sides count events, said in the result."""
    base = writes_only_run(tmp_path, "base", [["right"], ["missed"]], [5, 2], alarmed_points=[1, 1])
    other = writes_only_run(tmp_path, "other", [["right"], ["missed"]], [9, 4], alarmed_points=[3, 2])
    old = writes_only_run(tmp_path, "old", [["right"], ["missed"]], [6, 0])
    by_points = compare_halumem(base, other, n_samples=100)["false_alarm"]
    assert by_points["counted"] == "points" and by_points["base"] == pytest.approx(2 / 30) and by_points["other"] == pytest.approx(5 / 30)
    mixed = compare_halumem(old, other, n_samples=100)["false_alarm"]
    assert mixed["counted"] == "events" and mixed["base"] == pytest.approx(6 / 30) and mixed["other"] == pytest.approx(13 / 30)


def test_update_links_compare_by_point_and_false_alarms_as_a_rate_over_sessions(tmp_path):
    """Writes-only runs compare by their update links: points linked right (paired by point) and false alarms per
    non-update point (a ratio of sums, paired by session); QA and update cells stay empty."""
    base = writes_only_run(tmp_path, "base", [["missed", "right"], ["no_target"]], [1, 2])
    other = writes_only_run(tmp_path, "other", [["right", "right"], ["wrong"]], [4, 2])
    result = compare_halumem(base, other, n_samples=300)
    assert result["link_right"]["base"] == pytest.approx(1 / 3) and result["link_right"]["other"] == pytest.approx(2 / 3)
    assert result["link_right"]["mean"] == pytest.approx(1 / 3) and result["link_right"]["n"] == 3
    assert result["false_alarm"]["base"] == pytest.approx(3 / 30) and result["false_alarm"]["other"] == pytest.approx(6 / 30)
    assert result["false_alarm"]["mean"] == pytest.approx(3 / 30) and result["false_alarm"]["ci_low"] <= 3 / 30 <= result["false_alarm"]["ci_high"]
    assert result["qa_correct"]["mean"] is None and result["update_correct"]["mean"] is None
    assert compare_halumem(base, other, n_samples=100, sessions=1)["false_alarm"]["other"] == pytest.approx(4 / 10)
