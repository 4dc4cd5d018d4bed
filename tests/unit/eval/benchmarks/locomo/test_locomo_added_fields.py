"""Fields a published LoCoMo run lacks, added from its rows without changing a value it holds
(eval/benchmarks/locomo/added_fields.py, scripts/add_fields.py)."""

from __future__ import annotations

import json
import shutil

from eval.added_fields import ADDED_RECORD
from eval.benchmarks.locomo.added_fields import add_fields
from tests.conftest import REPO

# a published quickstart run (20 questions of the development conversation)
QUICKSTART = REPO / "results/published/runs/locomo/rag/none/26cb1a02f252"
NEW = ("n_clusters", "cluster_ci_low", "cluster_ci_high")


def strip_new(node):
    """The metrics as a run made before the new fields existed wrote them."""
    if isinstance(node, dict):
        return {k: strip_new(v) for k, v in node.items()
                if k not in (*NEW, "conversations", "returned_tokens", "evidence_recall_at_budget", ADDED_RECORD)}
    return node


def test_a_run_made_before_the_fields_gets_them_and_keeps_every_value(tmp_path):
    run = shutil.copytree(QUICKSTART, tmp_path / "run")
    old = strip_new(json.loads((run / "metrics.json").read_text()))
    (run / "metrics.json").write_text(json.dumps(old, indent=2))
    report = add_fields(run)
    assert not report.mismatches and report.added
    new = json.loads((run / "metrics.json").read_text())
    assert strip_new(new) == old  # nothing the run held has changed
    assert new["overall"]["judge"]["n_clusters"] == 1 and new["overall"]["judge"]["cluster_ci_low"] is not None
    assert new["conversations"] == ["conv-26"] and new["returned_tokens"]["median"] > 0
    assert set(new["evidence_recall_at_budget"]) == {"250", "500", "1000", "2000"}
    assert new[ADDED_RECORD]["fields"] == ["cluster_ci_high", "cluster_ci_low", "conversations", "evidence_recall_at_budget",
                                           "n_clusters", "returned_tokens"]  # fmt: skip
    assert add_fields(run).added == []  # a second pass has nothing to add


def test_a_run_whose_values_would_change_is_left_untouched(tmp_path):
    run = shutil.copytree(QUICKSTART, tmp_path / "run")
    old = strip_new(json.loads((run / "metrics.json").read_text()))
    old["overall"]["judge"]["mean"] += 0.01
    (run / "metrics.json").write_text(json.dumps(old, indent=2))
    before = (run / "metrics.json").read_text()
    report = add_fields(run)
    assert report.mismatches and report.mismatches[0].startswith("overall.judge.mean: published")
    assert (run / "metrics.json").read_text() == before
