"""eval.compare and scripts/compare_runs: paired differences over shared items, write cost per turn."""

from __future__ import annotations

import json

import pytest

from eval.compare import compare_conflict, compare_halumem, compare_locomo, halumem_write_cost, paired_difference, write_cost
from scripts.compare_runs import main as compare_main


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _locomo_run(tmp_path, name, correct, calls=10, turns=5, seconds=(2.0, 3.0), cached=0):
    run = tmp_path / name
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps({"benchmark": "locomo", "metadata": {"git_sha": "abc"}}))
    keys = [f"conv-x:q{i}" for i in range(len(correct))]
    _write(run / "predictions.jsonl", [{"key": k, "category": 1 + i % 2, "prediction": "red bike" if c else "blue car", "gold": "red bike"}
                                       for i, (k, c) in enumerate(zip(keys, correct))])  # fmt: skip
    _write(run / "judgements.jsonl", [{"key": k, "correct": bool(c)} for k, c in zip(keys, correct)])
    usage = {"calls": calls, "prompt_tokens": 900, "completion_tokens": 100, "cached_calls": cached,
             "by_purpose": {"extraction": {"calls": turns, "prompt_tokens": 400, "completion_tokens": 100},
                            "conflict": {"calls": calls - turns, "prompt_tokens": 500, "completion_tokens": 0}}}  # fmt: skip
    _write(run / "ingest.jsonl", [{"key": "conv-x", "n_turns": turns, "usage_reported": usage, "usage_metered": usage,
                                   "add_latency_s": list(seconds)}])  # fmt: skip
    return run


def test_paired_difference_uses_shared_keys_and_pairs_the_resamples():
    base = {"a": 0.0, "b": 1.0, "c": 1.0, "d": 0.0}
    other = {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0, "e": 0.0}  # "e" has no partner: left out
    stat = paired_difference(base, other, n_samples=500)
    assert stat["n"] == 4 and stat["mean"] == pytest.approx(0.5) and stat["base"] == 0.5 and stat["other"] == 1.0
    assert 0.0 <= stat["ci_low"] <= 0.5 <= stat["ci_high"] <= 1.0
    same = paired_difference(base, dict(base))
    assert (same["mean"], same["ci_low"], same["ci_high"]) == (0.0, 0.0, 0.0)  # identical runs: no spread at all


def test_locomo_runs_compare_by_question_and_category(tmp_path):
    base = _locomo_run(tmp_path, "base", [1, 0, 0, 1, 0, 0])
    other = _locomo_run(tmp_path, "other", [1, 1, 0, 1, 0, 1], calls=7)  # both gains in category 2
    result = compare_locomo(base, other, n_samples=300)
    assert result["n_shared"] == 6 and result["correct"]["mean"] == pytest.approx(2 / 6)
    assert result["f1"]["mean"] == pytest.approx(2 / 6)  # the right answer is the gold text: F1 1 vs 0
    assert set(result["per_category"]) == {"1", "2"} and result["per_category"]["2"]["mean"] == pytest.approx(2 / 3)
    assert result["per_category"]["1"]["mean"] == 0.0
    cost = write_cost(other)
    assert cost["calls_per_turn"] == pytest.approx(7 / 5) and cost["tokens_per_turn"] == pytest.approx(200)
    assert cost["seconds_per_turn"] == pytest.approx(1.0) and cost["by_purpose_per_turn"]["conflict"]["calls"] == pytest.approx(2 / 5)


def test_conflict_runs_compare_detection_and_false_alarms(tmp_path):
    runs = {}
    for name, hits in (("base", (True, False, False)), ("other", (True, True, True))):
        run = tmp_path / name
        run.mkdir()
        (run / "metrics.json").write_text(json.dumps({"benchmark": "conflict", "llm_calls_per_case": {"mean": 2.0}}))
        _write(run / "cases.jsonl", [
            {"id": "c1", "conflict": True, "type": "numeric", "detected_strict": hits[0], "detected_lenient": hits[0], "llm_calls": 2,
             "llm_calls_by_purpose": {"extraction": 1, "conflict": 1}, "seconds": 1.0},
            {"id": "c2", "conflict": True, "type": "logical", "detected_strict": hits[1], "detected_lenient": hits[1], "llm_calls": 1,
             "llm_calls_by_purpose": {"extraction": 1}, "seconds": 1.0},
            {"id": "n1", "conflict": False, "detected_strict": False, "detected_lenient": hits[2], "llm_calls": 1,
             "llm_calls_by_purpose": {"extraction": 1}, "seconds": 1.0},
        ])  # fmt: skip
        runs[name] = run
    result = compare_conflict(runs["base"], runs["other"], n_samples=200)
    assert result["detected"]["mean"] == pytest.approx(0.5) and result["detected"]["n"] == 2
    assert result["false_alarm"]["mean"] == pytest.approx(1.0) and result["false_alarm"]["n"] == 1
    cost = write_cost(runs["other"])
    assert cost["unit"] == "probe" and cost["calls_per_turn"] == pytest.approx(4 / 3) and cost["tokens_per_turn"] is None


def test_the_script_writes_json_and_table_and_refuses_mixed_benchmarks(tmp_path):
    base = _locomo_run(tmp_path, "base", [1, 0])
    other = _locomo_run(tmp_path, "other", [1, 1])
    out = tmp_path / "out" / "cmp.json"
    result = compare_main([str(base), str(other), "--out", str(out), "--samples", "100"])
    assert json.loads(out.read_text())["comparisons"][0]["quality"]["correct"]["mean"] == result["comparisons"][0]["quality"]["correct"]["mean"]
    assert "judge - base" in out.with_suffix(".md").read_text()
    conflict = tmp_path / "conflict"
    conflict.mkdir()
    (conflict / "metrics.json").write_text(json.dumps({"benchmark": "conflict"}))
    with pytest.raises(ValueError, match="compare runs of one benchmark"):
        compare_main([str(base), str(conflict)])


def test_the_plot_draws_every_other_run_overall_and_per_category(tmp_path):
    from PIL import Image

    from scripts.compare_runs import compare, plot

    base = _locomo_run(tmp_path, "base", [1, 0, 0, 1, 0, 1])
    others = [_locomo_run(tmp_path, "a", [1, 1, 0, 1, 1, 1]), _locomo_run(tmp_path, "b", [0, 0, 0, 1, 0, 0])]
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
    base = _locomo_run(tmp_path, "rag", [1, 0, 0, 1])
    other = _locomo_run(tmp_path, "mosaic", [1, 1, 0, 1])
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


def _halumem_run(tmp_path, name, qa_labels, update_labels, calls_per_session=(4, 6)):
    """A HaluMem run folder as the runner (or publishing) leaves it: QA and update rows keyed uuid:session:index."""
    run = tmp_path / name
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps({"benchmark": "halumem", "metadata": {"git_sha": "abc"}}))
    _write(run / "halumem_qa.jsonl", [{"key": f"u:{i % 2}:q{i}", "uuid": "u", "session": i % 2, "label": label}
                                      for i, label in enumerate(qa_labels)])  # fmt: skip
    _write(run / "halumem_updates.jsonl", [{"key": f"u:{i % 2}:{i}", "uuid": "u", "session": i % 2, "label": label}
                                           for i, label in enumerate(update_labels)])  # fmt: skip
    _write(run / "halumem_sessions.jsonl", [{"key": f"u:{s}", "n_turns": 2, "usage": {"calls": c, "prompt_tokens": 10 * c, "completion_tokens": c}}
                                            for s, c in enumerate(calls_per_session)])  # fmt: skip
    return run


def test_halumem_runs_compare_qa_and_updates_by_key_and_can_be_cut_to_the_first_sessions(tmp_path):
    # questions 0, 2 are session 0's; 1, 3 session 1's
    base = _halumem_run(tmp_path, "base", ["Correct", "Omission", "Hallucination", "Omission"], ["Correct", "Omission"])
    other = _halumem_run(tmp_path, "other", ["Correct", "Correct", "Correct", None], ["Correct", "Correct"])
    whole = compare_halumem(base, other, n_samples=200)
    assert whole["n_shared"] == 6 and whole["qa_correct"]["mean"] == pytest.approx(2 / 4)
    assert whole["qa_hallucination"]["mean"] == pytest.approx(-1 / 4)  # a judge failure (None) counts as no label
    assert whole["qa_omission"]["mean"] == pytest.approx(-2 / 4) and whole["update_correct"]["mean"] == pytest.approx(1 / 2)
    first = compare_halumem(base, other, n_samples=200, sessions=1)  # session 0 only: questions 0 and 2, update 0
    assert first["n_shared"] == 3 and first["sessions"] == 1
    assert first["qa_correct"]["base"] == pytest.approx(1 / 2) and first["qa_correct"]["other"] == 1.0
    assert first["update_correct"]["mean"] == 0.0 and first["update_correct"]["n"] == 1
    cost = halumem_write_cost(other, sessions=1)
    assert (cost["turns"], cost["calls_per_turn"], cost["tokens_per_turn"]) == (2, 2.0, 22.0)
    assert halumem_write_cost(other)["calls_per_turn"] == pytest.approx(10 / 4)


def test_the_script_compares_halumem_runs_and_refuses_a_session_cut_elsewhere(tmp_path):
    base = _halumem_run(tmp_path, "base", ["Correct", "Omission"], ["Correct"])
    other = _halumem_run(tmp_path, "other", ["Correct", "Correct"], ["Omission"])
    out = tmp_path / "cmp.json"
    metrics = json.loads((other / "metrics.json").read_text())
    recorded = {**metrics, "metadata": {**metrics["metadata"], "system": "mosaic"}, "system_metrics": {"mechanisms": MECHANISMS}}
    (other / "metrics.json").write_text(json.dumps(recorded))  # the system's class (conf/system/mosaic.yaml) flattens them
    result = compare_main([str(base), str(other), "--out", str(out), "--samples", "100", "--sessions", "2"])
    assert result["comparisons"][0]["quality"]["qa_correct"]["mean"] == pytest.approx(1 / 2)
    written = out.with_suffix(".md").read_text()
    assert "QA correct - base" in written and "Sessions 0-1 only" in written
    assert "Mechanism counts (each run's whole-run counts: not cut to the first 2 sessions)" in written  # not cut: said so
    locomo = _locomo_run(tmp_path, "locomo", [1, 0])
    with pytest.raises(ValueError, match="--sessions cuts HaluMem runs"):
        compare_main([str(locomo), str(locomo), "--sessions", "1"])


def _writes_only_run(tmp_path, name, outcomes_by_session, alarms_by_session, non_update=(10, 20), alarmed_points=None):
    """A writes-only HaluMem run (benchmark.score_qa=false): update-link rows only, one per session; with
    ``alarmed_points``, the rows count the alarmed points too (runs made before that have events only)."""
    run = tmp_path / name
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps({"benchmark": "halumem", "metadata": {"git_sha": "abc"}}))
    _write(run / "halumem_update_links.jsonl", [
        {"key": f"u:{s}", "uuid": "u", "session": s, "non_update_points": n, "false_alarms": a, "events": a,
         "false_alarm_verdicts": {}, "unmatched_events": 0,
         **({"false_alarm_points": alarmed_points[s]} if alarmed_points else {}),
         "points": [{"index": i, "outcome": o, "targets_held": 1, "events": 0, "verdicts": []} for i, o in enumerate(outcomes)]}
        for s, (outcomes, a, n) in enumerate(zip(outcomes_by_session, alarms_by_session, non_update))])  # fmt: skip
    _write(run / "halumem_sessions.jsonl", [{"key": f"u:{s}", "n_turns": 2, "usage": {"calls": 1}} for s in range(len(non_update))])
    return run


def test_false_alarms_compare_alarmed_points_and_fall_back_to_events_when_a_run_has_none(tmp_path):
    """Events can outnumber points (one point, several written items), so the rate counts alarmed points; a run made
    before points were counted makes both sides count events, said in the result."""
    base = _writes_only_run(tmp_path, "base", [["right"], ["missed"]], [5, 2], alarmed_points=[1, 1])
    other = _writes_only_run(tmp_path, "other", [["right"], ["missed"]], [9, 4], alarmed_points=[3, 2])
    old = _writes_only_run(tmp_path, "old", [["right"], ["missed"]], [6, 0])
    by_points = compare_halumem(base, other, n_samples=100)["false_alarm"]
    assert by_points["counted"] == "points" and by_points["base"] == pytest.approx(2 / 30) and by_points["other"] == pytest.approx(5 / 30)
    mixed = compare_halumem(old, other, n_samples=100)["false_alarm"]
    assert mixed["counted"] == "events" and mixed["base"] == pytest.approx(6 / 30) and mixed["other"] == pytest.approx(13 / 30)


def test_update_links_compare_by_point_and_false_alarms_as_a_rate_over_sessions(tmp_path):
    """Writes-only runs compare by their update links: points linked right (paired by point) and false alarms per
    non-update point (a ratio of sums, paired by session); QA and update cells stay empty."""
    base = _writes_only_run(tmp_path, "base", [["missed", "right"], ["no_target"]], [1, 2])
    other = _writes_only_run(tmp_path, "other", [["right", "right"], ["wrong"]], [4, 2])
    result = compare_halumem(base, other, n_samples=300)
    assert result["link_right"]["base"] == pytest.approx(1 / 3) and result["link_right"]["other"] == pytest.approx(2 / 3)
    assert result["link_right"]["mean"] == pytest.approx(1 / 3) and result["link_right"]["n"] == 3
    assert result["false_alarm"]["base"] == pytest.approx(3 / 30) and result["false_alarm"]["other"] == pytest.approx(6 / 30)
    assert result["false_alarm"]["mean"] == pytest.approx(3 / 30) and result["false_alarm"]["ci_low"] <= 3 / 30 <= result["false_alarm"]["ci_high"]
    assert result["qa_correct"]["mean"] is None and result["update_correct"]["mean"] is None
    assert compare_halumem(base, other, n_samples=100, sessions=1)["false_alarm"]["other"] == pytest.approx(4 / 10)
    out = tmp_path / "cmp.json"
    compare_main([str(base), str(other), "--out", str(out), "--samples", "100"])
    table = out.with_suffix(".md").read_text()
    assert "update linked right - base" in table and "+33.3" in table and "+10.0" in table


def _locomo_clustered_run(tmp_path, name, correct_by_conversation, retrieved_text="one two three"):
    """A LoCoMo run over several conversations, 20 questions each; ``correct_by_conversation``: 0/1 per conversation."""
    run = tmp_path / name
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps({"benchmark": "locomo", "metadata": {"git_sha": "abc"}}))
    rows, verdicts = [], []
    for c, correct in enumerate(correct_by_conversation):
        for q in range(20):
            key = f"conv-{c}:q{q}"
            rows.append({"key": key, "sample_id": f"conv-{c}", "category": 1, "prediction": "x", "gold": "y",
                         "retrieved": [{"text": retrieved_text, "source_turn_ids": []}]})  # fmt: skip
            verdicts.append({"key": key, "correct": bool(correct)})
    _write(run / "predictions.jsonl", rows)
    _write(run / "judgements.jsonl", verdicts)
    _write(run / "ingest.jsonl", [{"key": "conv-0", "n_turns": 1, "usage_reported": {}, "usage_metered": {}, "add_latency_s": [1.0]}])
    return run


def test_locomo_differences_carry_a_conversation_interval_and_the_script_prints_both(tmp_path, capsys):
    # the gain sits in three of six conversations: per question it looks certain, per conversation far less so
    base = _locomo_clustered_run(tmp_path, "base", [0, 0, 0, 0, 0, 0])
    other = _locomo_clustered_run(tmp_path, "other", [1, 1, 1, 0, 0, 0], retrieved_text="one two three four five")
    correct = compare_locomo(base, other, n_samples=500)["correct"]
    assert correct["n"] == 120 and correct["n_clusters"] == 6 and correct["mean"] == pytest.approx(0.5)
    assert correct["cluster_ci_high"] - correct["cluster_ci_low"] > 2 * (correct["ci_high"] - correct["ci_low"])
    result = compare_main([str(base), str(other), "--samples", "300"])
    table = capsys.readouterr().out
    assert "; by conversation (6): [" in table and "tokens returned p50 / p95" in table
    assert "| 5 / 5 |" in table  # other's searches return five one-token words per question (base: "3 / 3")
    assert result["comparisons"][0]["quality"]["returned_tokens"]["base"]["median"] == 3
