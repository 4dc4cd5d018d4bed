"""eval/compare.py: the paired bootstrap every benchmark's comparison shares, and finding a run's comparison from
the benchmark class its metrics.json records."""

from __future__ import annotations

import json

import pytest

from core.api import HarnessError
from eval.compare import comparison_of, paired_difference, paired_rate_difference, run_kind
from tests.run_folders import halumem_run, locomo_run


def test_paired_difference_uses_shared_keys_and_pairs_the_resamples():
    base = {"a": 0.0, "b": 1.0, "c": 1.0, "d": 0.0}
    other = {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0, "e": 0.0}  # "e" has no partner: left out
    stat = paired_difference(base, other, n_samples=500)
    assert stat["n"] == 4 and stat["mean"] == pytest.approx(0.5) and stat["base"] == 0.5 and stat["other"] == 1.0
    assert 0.0 <= stat["ci_low"] <= 0.5 <= stat["ci_high"] <= 1.0
    same = paired_difference(base, dict(base))
    assert (same["mean"], same["ci_low"], same["ci_high"]) == (0.0, 0.0, 0.0)  # identical runs: no spread at all


def test_a_rate_difference_is_a_ratio_of_sums_paired_by_group():
    base = {"s1": (1.0, 10.0), "s2": (1.0, 30.0)}
    other = {"s1": (3.0, 10.0), "s2": (3.0, 30.0), "s3": (9.0, 9.0)}  # s3 has no partner: left out
    stat = paired_rate_difference(base, other, n_samples=200)
    assert stat["base"] == pytest.approx(2 / 40) and stat["other"] == pytest.approx(6 / 40) and stat["mean"] == pytest.approx(4 / 40)


def test_a_run_is_compared_the_way_its_recorded_benchmark_says(tmp_path):
    locomo, halumem = locomo_run(tmp_path, "lo", [1, 0]), halumem_run(tmp_path, "hm", ["Correct"], ["Correct"])
    assert run_kind(locomo) == "locomo" and comparison_of(locomo).cluster_unit == "conversation"
    assert comparison_of(halumem).cluster_unit == "user" and comparison_of(halumem).cuts_sessions
    metrics = json.loads((locomo / "metrics.json").read_text())
    (locomo / "metrics.json").write_text(json.dumps({**metrics, "stages": ["ingest", "retrieve"]}))
    assert run_kind(locomo) == "locomo_retrieval" and comparison_of(locomo).fields[0][0] == "recall"


def test_a_run_without_a_recorded_benchmark_or_one_that_cannot_pair_is_refused(tmp_path):
    run = locomo_run(tmp_path, "lo", [1])
    (run / "metrics.json").write_text(json.dumps({"benchmark": "locomo"}))
    with pytest.raises(HarnessError, match="no benchmark_target"):
        comparison_of(run)
    (run / "metrics.json").write_text(json.dumps({"benchmark": "x", "metadata": {"benchmark_target": "eval.runner.RunContext"}}))
    with pytest.raises(HarnessError, match="declares no paired comparison"):
        comparison_of(run)
