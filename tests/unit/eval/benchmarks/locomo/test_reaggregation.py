"""Every published LoCoMo run folder re-aggregates to the metrics it was published with, using
today's code: its rows (predictions.jsonl, judgements.jsonl) and its own config (convention, bootstrap
samples, seed) give the same overall and per-category cells, CIs included. A refactor that changes how rows
are scored, paired or bootstrapped fails here. Fields added since (the cluster interval, conversations counted)
are additions: every value a run was published with is compared, and must be unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from eval.benchmarks.locomo.metrics import aggregate, paired_judgements
from eval.benchmarks.locomo.retrieval import is_retrieval_only, retrieval_metrics
from eval.intervals import report_settings
from eval.rows import read_rows
from tests.conftest import REPO as ROOT

PUBLISHED = sorted(p.parent for p in (ROOT / "results/published/runs/locomo").glob("*/*/*/metrics.json"))


def test_there_are_published_locomo_runs_to_check():
    assert len(PUBLISHED) >= 10


@pytest.mark.parametrize("folder", PUBLISHED, ids=lambda p: "/".join(p.parts[-3:]))
def test_a_published_locomo_run_reaggregates_to_its_metrics(folder: Path):
    published = json.loads((folder / "metrics.json").read_text())
    config = yaml.safe_load((folder / "config.yaml").read_text())
    benchmark = config["benchmark"]
    if is_retrieval_only(published):  # no answers: its retrieval metrics from its ranked rows, in question order
        rows = sorted(read_rows(folder / "retrievals.jsonl"), key=lambda r: (r["sample_id"], r["qa_index"]))
        seed = benchmark.get("seed", config.get("seed"))
        budgets = benchmark.get("token_budgets") or report_settings()["token_budgets"]
        again = retrieval_metrics(rows, benchmark["retrieval_ks"], benchmark["ndcg_k"], benchmark["bootstrap_samples"], seed, budgets)
        assert as_published(again, published["retrieval"]) == published["retrieval"]
        return
    predictions = sorted(read_rows(folder / "predictions.jsonl"), key=lambda p: (p["sample_id"], p["qa_index"]))  # question order
    judged = paired_judgements(predictions, read_rows(folder / "judgements.jsonl"), legacy=True)
    if published.get("gold") == "audited_excluded":
        pytest.skip("headline over audited questions: needs the audit file; none published so")
    seed = benchmark.get("seed", config.get("seed"))
    again = aggregate(predictions, judged, benchmark["convention"], benchmark["bootstrap_samples"], seed)
    assert as_published(again["overall"], published["overall"]) == published["overall"]
    assert as_published(again["per_category"], published["per_category"]) == published["per_category"]


def as_published(recomputed: object, published: object) -> object:
    """``recomputed`` cut to the keys ``published`` has (at every depth): the values a run was published with."""
    if isinstance(recomputed, dict) and isinstance(published, dict):
        return {k: as_published(recomputed.get(k), v) for k, v in published.items()}
    return recomputed
