"""Detection scoring on hand-made AddReports and the suite's rates (eval.benchmarks.conflict.metrics)."""

from __future__ import annotations

import pytest

from eval.benchmarks.conflict.metrics import aggregate, score_case
from eval.benchmarks.conflict.suite import parse_suite
from core.api import AddReport
from tests.unit.eval.benchmarks.conflict.test_conflict_suite import MINI, _event, _report


def test_strict_and_lenient_detection_from_add_reports():
    suite = parse_suite(MINI)
    n1, l1, ok1 = suite.cases
    assert suite.context_turns("c")[1].turn_id == "c:1"
    hit = score_case(suite, n1, _report(updated=[_event(["c:0"])]))
    assert hit["detected_strict"] and hit["detected_lenient"] and hit["verdicts"] == ["update"] and hit["reason"] == "because"
    wrong = score_case(suite, n1, _report(flagged=[_event(["c:2"], "flag")]))
    assert not wrong["detected_strict"] and wrong["detected_lenient"] and wrong["miss_reason"] == "wrong memory"
    logical = score_case(suite, l1, _report(rejected=[_event(["c:2"], "reject")]))  # either gold turn counts
    assert logical["detected_strict"]
    silent = score_case(suite, l1, _report(), radius=[0])
    assert not silent["detected_lenient"] and silent["miss_reason"] == "out of neighbour radius"
    alarm = score_case(suite, ok1, _report(flagged=[_event(["c:0"], "flag")]))
    assert alarm["detected_lenient"] and alarm["miss_reason"] is None


def test_miss_reasons_for_numbers_gate_and_verdict():
    suite = parse_suite(MINI)
    n1 = suite.cases[0]
    assert score_case(suite, n1, _report(), radius=[0, 1])["miss_reason"] == "plausible numbers"  # 2,300 vs 1,650: within x2
    far = parse_suite({**MINI, "cases": [{**MINI["cases"][0], "probe": {"speaker": "a", "text": "Rent is 9,000 dollars a month."}}]})
    assert score_case(far, far.cases[0], _report(), radius=[0])["miss_reason"] == "LLM verdict"
    queued = AddReport(queued=["x"], n_turns=1)
    assert score_case(suite, n1, queued, radius=[0])["miss_reason"] == "queued by gate"


def test_aggregate_rates_precision_and_f1_by_hand():
    suite = parse_suite(MINI)
    n1, l1, ok1 = suite.cases
    rows = [
        score_case(suite, n1, _report(updated=[_event(["c:0"])], calls=3)),  # TP
        score_case(suite, l1, _report(calls=1)),  # FN
        score_case(suite, ok1, _report(flagged=[_event(["c:1"], "flag")], calls=2)),  # FP
    ]
    m = aggregate(rows, samples=200, seed=0)
    assert m["detection_rate"]["mean"] == 0.5 and m["by_type"]["numeric"]["mean"] == 1.0 and m["by_type"]["logical"]["mean"] == 0.0
    assert m["by_type"]["semantic"]["n"] == 0 and m["explicit"]["mean"] == 1.0 and m["implicit"]["mean"] == 0.0
    assert m["false_alarm_rate"]["mean"] == 1.0
    assert m["precision"]["mean"] == 0.5 and m["f1"]["mean"] == pytest.approx(0.5)
    assert m["llm_calls_per_case"]["mean"] == 2.0 and m["n_cases"] == 3
    for key in ("detection_rate", "false_alarm_rate", "precision", "f1", "llm_calls_per_case"):
        assert m[key]["ci_low"] <= m[key]["mean"] <= m[key]["ci_high"]
    assert m["misses"]["logical"]["LLM verdict"] == 1
    assert m["verdict_counts"] == {"update": 1, "reject": 0, "flag": 1}
    # every case of the mini suite probes context "c": one cluster, so the context interval holds for it only
    assert m["contexts"] == ["c"] and all(m[key]["n_clusters"] == 1 for key in ("detection_rate", "false_alarm_rate", "precision", "f1"))


def test_cases_cluster_by_their_context():
    """Cases probing one context share its stored memories: a strong context effect (one context detects every
    conflict, the other none) widens the context interval past the per-case one."""
    rows = [{"context": ctx, "conflict": True, "type": "numeric", "explicit": True, "detected_strict": ctx.startswith("a"),
             "detected_lenient": ctx.startswith("a"), "llm_calls": 1, "verdicts": [], "miss_reason": "LLM verdict"}
            for ctx in ("a1", "a2", "a3", "b1", "b2", "b3") for _ in range(20)]  # fmt: skip
    rate = aggregate(rows, samples=300, seed=0)["detection_rate"]
    assert rate["mean"] == 0.5 and rate["n"] == 120 and rate["n_clusters"] == 6
    assert rate["cluster_ci_high"] - rate["cluster_ci_low"] > 2 * (rate["ci_high"] - rate["ci_low"])
