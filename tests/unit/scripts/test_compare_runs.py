"""scripts/compare_runs.py: the table, JSON and plot of a comparison, whichever benchmark's runs it pairs (asked of
the benchmark the base run records), the mechanism counts under it, and the runs it refuses."""

from __future__ import annotations

import json

import pytest

from scripts.compare_runs import main as compare_main
from tests.run_folders import conflict_run, halumem_run, locomo_clustered_run, locomo_run, writes_only_run


def test_the_script_writes_json_and_table_and_refuses_mixed_benchmarks(tmp_path):
    base = locomo_run(tmp_path, "base", [1, 0])
    other = locomo_run(tmp_path, "other", [1, 1])
    out = tmp_path / "out" / "cmp.json"
    result = compare_main([str(base), str(other), "--out", str(out), "--samples", "100"])
    assert json.loads(out.read_text())["comparisons"][0]["quality"]["correct"]["mean"] == result["comparisons"][0]["quality"]["correct"]["mean"]
    assert "judge - base" in out.with_suffix(".md").read_text()
    suite = conflict_run(tmp_path, "suite", (True, False, False))
    with pytest.raises(ValueError, match="compare runs of one benchmark"):
        compare_main([str(base), str(suite)])


def test_the_plot_draws_every_other_run_overall_and_per_category(tmp_path):
    from PIL import Image

    from scripts.compare_runs import compare, plot

    base = locomo_run(tmp_path, "base", [1, 0, 0, 1, 0, 1])
    others = [locomo_run(tmp_path, "a", [1, 1, 0, 1, 1, 1]), locomo_run(tmp_path, "b", [0, 0, 0, 1, 0, 0])]
    result = compare(base, others, n_samples=200)
    plot(result, tmp_path / "plot" / "rows.png", names=["a", "b"])
    with Image.open(tmp_path / "plot" / "rows.png") as image:
        assert image.format == "PNG" and image.size[0] > 0 and image.size[1] > 0
    assert set(result["comparisons"][0]["quality"]["per_category"]) == {"1", "2"}  # the two groups drawn below overall


MECHANISMS = {"entities": {"active": 5, "flagged": 1, "superseded": 2, "queued": 3, "rejected": 0, "turns_kept": 5},
              "conflict_events": {"update": 2, "reject": 0, "flag": 1},
              "retrieval": {"candidates_scanned": {"mean": 4.5}, "lsh_confident_hits": 5, "llm_routing_fallbacks": 1, "turn_matches": 7},
              "ncs": {"full_refreshes": 2, "drift_measurements": 1, "max_abs_score_drift": 0.001}, "leiden_reruns": 3}


def test_mosaic_runs_get_their_mechanism_counts_under_the_table(tmp_path):
    """What the removed conversation_rows script reported beside each MOSAIC row: now every comparison shows it."""
    base = locomo_run(tmp_path, "rag", [1, 0, 0, 1])
    other = locomo_run(tmp_path, "mosaic", [1, 1, 0, 1])
    metrics = json.loads((other / "metrics.json").read_text())
    recorded = {**metrics, "metadata": {**metrics["metadata"], "system": "mosaic"}, "system_metrics": {"mechanisms": MECHANISMS}}
    (other / "metrics.json").write_text(json.dumps(recorded))  # the system's class (conf/system/mosaic.yaml) flattens them
    out = tmp_path / "cmp.json"
    result = compare_main([str(base), str(other), "--out", str(out), "--samples", "100"])
    assert set(result["mechanisms"]) == {str(other)}  # rag records none: no row for it
    counts = json.loads(out.read_text())["mechanisms"][str(other)]
    assert counts["turn_matches"] == 7 and counts["entities_superseded"] == 2 and counts["leiden_reruns"] == 3
    assert f"| {other} | 5 | 1 | 2 |" in out.with_suffix(".md").read_text()
    assert "mechanisms" not in compare_main([str(base), str(base), "--samples", "100"])  # no MOSAIC run, no section


def test_the_script_compares_halumem_runs_and_refuses_a_session_cut_elsewhere(tmp_path):
    base = halumem_run(tmp_path, "base", ["Correct", "Omission"], ["Correct"])
    other = halumem_run(tmp_path, "other", ["Correct", "Correct"], ["Omission"])
    out = tmp_path / "cmp.json"
    metrics = json.loads((other / "metrics.json").read_text())
    recorded = {**metrics, "metadata": {**metrics["metadata"], "system": "mosaic"}, "system_metrics": {"mechanisms": MECHANISMS}}
    (other / "metrics.json").write_text(json.dumps(recorded))  # the system's class (conf/system/mosaic.yaml) flattens them
    result = compare_main([str(base), str(other), "--out", str(out), "--samples", "100", "--sessions", "2"])
    assert result["comparisons"][0]["quality"]["qa_correct"]["mean"] == pytest.approx(1 / 2)
    written = out.with_suffix(".md").read_text()
    assert "QA correct - base" in written and "Sessions 0-1 only" in written
    assert "Mechanism counts (each run's whole-run counts: not cut to the first 2 sessions)" in written  # not cut: said so
    locomo = locomo_run(tmp_path, "locomo", [1, 0])
    with pytest.raises(ValueError, match="--sessions cuts runs to their first sessions.*no sessions to cut"):
        compare_main([str(locomo), str(locomo), "--sessions", "1"])


def test_the_script_tables_update_links_of_writes_only_runs(tmp_path):
    base = writes_only_run(tmp_path, "base", [["missed", "right"], ["no_target"]], [1, 2])
    other = writes_only_run(tmp_path, "other", [["right", "right"], ["wrong"]], [4, 2])
    out = tmp_path / "cmp.json"
    compare_main([str(base), str(other), "--out", str(out), "--samples", "100"])
    table = out.with_suffix(".md").read_text()
    assert "update linked right - base" in table and "+33.3" in table and "+10.0" in table


def test_the_script_prints_both_intervals_and_the_tokens_returned(tmp_path, capsys):
    base = locomo_clustered_run(tmp_path, "base", [0, 0, 0, 0, 0, 0])
    other = locomo_clustered_run(tmp_path, "other", [1, 1, 1, 0, 0, 0], retrieved_text="one two three four five")
    result = compare_main([str(base), str(other), "--samples", "300"])
    table = capsys.readouterr().out
    assert "; by conversation (6): [" in table and "tokens returned p50 / p95" in table
    assert "| 5 / 5 |" in table  # other's searches return five one-token words per question (base: "3 / 3")
    assert result["comparisons"][0]["quality"]["returned_tokens"]["base"]["median"] == 3


def test_a_suite_comparison_plots_its_fields_and_costs_per_probe(tmp_path):
    base, other = conflict_run(tmp_path, "base", (True, False, False)), conflict_run(tmp_path, "other", (True, True, True))
    out = tmp_path / "cmp.json"
    result = compare_main([str(base), str(other), "--out", str(out), "--samples", "100", "--plot", str(tmp_path / "suite.png")])
    table = out.with_suffix(".md").read_text()
    assert "detection - base" in table and "Cost per probe (tokens are not recorded per probe)" in table and "by context (" in table
    assert "tokens returned" not in table and result["benchmark"] == "conflict" and (tmp_path / "suite.png").stat().st_size > 0
