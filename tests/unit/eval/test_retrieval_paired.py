"""eval/retrieval_paired.py: the paired differences every benchmark's retrieval comparison shares, overall and per
group, by hand on scored questions."""

from __future__ import annotations

import pytest

from eval.retrieval_paired import base_record, paired_differences


def test_differences_are_paired_over_shared_questions_overall_and_per_group():
    base = {"a": ("x", {"recall@1": 0.0}), "b": ("x", {"recall@1": 1.0}), "c": ("y", {"recall@1": 0.0}), "d": ("y", {"recall@1": 0.0})}
    other = {"a": ("x", {"recall@1": 1.0}), "b": ("x", {"recall@1": 1.0}), "c": ("y", {"recall@1": 1.0}), "e": ("y", {"recall@1": 1.0})}
    clusters = {"a": "u1", "b": "u1", "c": "u2", "d": "u2", "e": "u2"}
    out = paired_differences(base, other, ["x", "y"], ["recall@1"], clusters, 200, 0, lambda group: group == "x")
    assert out["overall"]["recall@1"]["n"] == 2 and out["overall"]["recall@1"]["mean"] == pytest.approx(0.5)  # group x only
    assert out["per_group"]["y"]["recall@1"]["n"] == 1 and out["per_group"]["y"]["recall@1"]["mean"] == 1.0  # "d", "e" unpaired
    assert out["overall"]["recall@1"]["n_clusters"] == 1


def test_a_base_run_is_named_by_its_last_four_path_parts(tmp_path):
    folder = tmp_path / "runs" / "locomo" / "rag" / "oracle_facts" / "abc"
    folder.mkdir(parents=True)
    assert base_record(folder) == "locomo/rag/oracle_facts/abc"
