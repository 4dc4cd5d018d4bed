"""eval/added_fields.py: recomputed fields merged into a run's metrics.json without changing a value it holds, the
recomputation asked of the benchmark the run records."""

from __future__ import annotations

import json

from eval.added_fields import add_retrieval_fields, merge_new
from eval.retrieval_paired import SECTION
from tests.unit.eval.benchmarks.locomo.test_locomo_retrieval_paired import ranked_rows, retrieval_run


def test_merge_adds_missing_keys_and_reports_values_that_differ():
    existing = {"a": {"mean": 0.5, "ci_low": 0.4}, "b": 1}
    added, mismatches = [], []
    merge_new(existing, {"a": {"mean": 0.5, "ci_low": 0.3, "n_clusters": 1}, "c": [1]}, "", added, mismatches)
    assert existing == {"a": {"mean": 0.5, "ci_low": 0.4, "n_clusters": 1}, "b": 1, "c": [1]}
    assert added == ["a.n_clusters", "c"] and mismatches == ["a.ci_low: published 0.4, recomputed 0.3"]


def test_a_held_value_that_would_change_leaves_the_run_untouched(tmp_path):
    retrieval_run(tmp_path / "run", ranked_rows(hit_first=True))
    path = tmp_path / "run" / "metrics.json"
    metrics = json.loads(path.read_text())
    metrics["retrieval"]["turn"]["overall"]["recall@1"]["mean"] = 0.5
    path.write_text(json.dumps(metrics))
    report = add_retrieval_fields(tmp_path / "run", None)
    assert report.mismatches and json.loads(path.read_text()) == metrics


def test_the_base_run_gets_no_difference_to_itself(tmp_path):
    retrieval_run(tmp_path / "base", ranked_rows(hit_first=False))
    add_retrieval_fields(tmp_path / "base", tmp_path / "base")
    assert SECTION not in json.loads((tmp_path / "base" / "metrics.json").read_text())


def test_a_run_whose_benchmark_recomputes_no_retrieval_is_skipped_untouched(tmp_path):
    retrieval_run(tmp_path / "run", ranked_rows(hit_first=True))
    path = tmp_path / "run" / "metrics.json"
    metrics = {**json.loads(path.read_text()), "metadata": {"benchmark_target": "eval.benchmarks.conflict.ConflictBenchmark"}}
    path.write_text(json.dumps(metrics))
    report = add_retrieval_fields(tmp_path / "run", None)
    assert report.skipped and "ConflictBenchmark" in report.skipped and json.loads(path.read_text()) == metrics
    (tmp_path / "run" / "retrievals.jsonl").unlink()
    path.write_text(json.dumps({**metrics, "metadata": {"benchmark_target": "eval.benchmarks.locomo.LoCoMoBenchmark"}}))
    assert add_retrieval_fields(tmp_path / "run", None).skipped  # no rows to recompute from
