"""Confidence gate arithmetic, Bayesian belief update and entropy on hand-computed cases."""

from __future__ import annotations

import math

import pytest

from mosaic.entity import Entity
from mosaic.gate import ConfidenceGate, bayes_update, confidence, consistency_with, entropy, smoothed_prior
from core.quantities import same_slot, values_match
from tests.fakes import FakeLLM

W = (0.4, 0.3, 0.3)


def _kids(value: str, eid: str, directness: float = 1.0, specificity: float = 1.0) -> Entity:
    return Entity(eid, f"Ana has {value} kids.", "persona", subject="Ana", attribute="number of kids", value=value,
                  directness=directness, specificity=specificity, belief={value: 1.0})


def test_confidence_is_the_weighted_mean_of_the_three_factors():
    assert confidence(1.0, 0.0, 1.0, W) == pytest.approx(0.7)
    assert confidence(0.6, 1.0, 0.3, W) == pytest.approx(0.24 + 0.3 + 0.09)
    assert confidence(1.0, 1.0, 1.0, (2, 1, 1)) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="directness"):
        confidence(1.5, 1.0, 1.0, W)


def test_entropy_in_bits():
    assert entropy({"a": 1.0}) == 0.0
    assert entropy({"a": 0.5, "b": 0.5}) == pytest.approx(1.0)
    assert entropy({k: 0.25 for k in "abcd"}) == pytest.approx(2.0)
    assert entropy({"a": 0.9, "b": 0.1}) == pytest.approx(-(0.9 * math.log2(0.9) + 0.1 * math.log2(0.1)))


def test_bayes_update_multiplies_and_renormalises():
    post = bayes_update({"2": 0.8, "3": 0.2}, {"2": 0.05, "3": 0.95})
    assert post["2"] == pytest.approx(0.04 / 0.23)
    assert post["3"] == pytest.approx(0.19 / 0.23)
    # a candidate the likelihood does not mention gets zero mass
    assert bayes_update({"a": 0.5, "b": 0.5}, {"a": 1.0}) == {"a": 1.0, "b": 0.0}
    with pytest.raises(ValueError):
        bayes_update({"a": 1.0}, {"a": 0.0})


def test_smoothed_prior_gives_a_newcomer_eps():
    assert smoothed_prior({}, "x", 0.2) == {"x": 1.0}
    assert smoothed_prior({"2": 1.0}, "3", 0.2) == pytest.approx({"2": 0.8, "3": 0.2})
    assert smoothed_prior({"2": 0.5, "3": 0.5}, "3", 0.2) == {"2": 0.5, "3": 0.5}


def test_rule_matching_and_consistency():
    assert values_match("3", "three") and values_match("3 kids", "3")
    assert not values_match("2", "3")
    assert values_match("nurse", "a nurse") and not values_match("nurse", "teacher")
    assert consistency_with("3", []) == 1.0
    assert consistency_with("3", ["three"]) == 1.0
    assert consistency_with("3", ["2"]) == 0.0
    assert consistency_with("3", ["3", "2"]) == 0.5
    assert same_slot(_kids("2", "a"), _kids("3", "b"))
    assert not same_slot(_kids("2", "a"), Entity("c", "Ana is a nurse", "persona", "Ana", "job", "nurse"))


def test_direct_correction_is_committed_with_hand_computed_belief():
    gate = ConfidenceGate(llm=None, rho_min=0.6, delta=0.8, weights=W)
    new = _kids("3", "new")
    decision = gate.assess(new, [_kids("2", "old")])
    # consistency 0 (the one held value disagrees) -> rho = 0.4*1 + 0.3*0 + 0.3*1
    assert decision.rho == pytest.approx(0.7)
    # prior {2: .5, 3: .5}; reliability 1 clipped to .95 -> likelihood {2: .05, 3: .95}
    assert new.belief["3"] == pytest.approx(0.95, abs=1e-6)
    p = 0.95
    assert decision.entropy == pytest.approx(-(p * math.log2(p) + (1 - p) * math.log2(1 - p)), abs=1e-5)
    assert decision.commit and decision.competing == ["old"]


def test_weak_contradiction_is_queued_with_a_targeted_question():
    gate = ConfidenceGate(llm=None)
    new = _kids("3", "new", directness=0.6)
    decision = gate.assess(new, [_kids("2", "old")])
    assert decision.rho == pytest.approx(0.4 * 0.6 + 0.3 * 1.0)  # 0.54 < 0.6
    assert not decision.commit and "rho" in decision.reason
    assert "'2'" in decision.question and "'3'" in decision.question


def test_high_entropy_alone_blocks_commit():
    gate = ConfidenceGate(llm=None, delta=0.8, new_value_prior=0.2)
    new = _kids("3", "new")
    decision = gate.assess(new, [_kids("2", "old")])
    # prior {2: .8, 3: .2} x likelihood {.05, .95} -> 3: .19 / .23, entropy ~0.667 bits
    assert new.belief["3"] == pytest.approx(0.19 / 0.23, abs=1e-6)
    assert decision.rho >= 0.6 and decision.commit
    strict = ConfidenceGate(llm=None, delta=0.5, new_value_prior=0.2)
    decision = strict.assess(_kids("3", "new2"), [_kids("2", "old")])
    assert not decision.commit and "entropy" in decision.reason


def test_llm_assessment_is_mixed_into_the_likelihood_and_counted():
    llm = FakeLLM(lambda messages, schema: {"probabilities": [0.1, 0.9]})
    gate = ConfidenceGate(llm=llm, rule_weight=0.5)
    new = _kids("3", "new")
    gate.assess(new, [_kids("2", "old")])
    # L(2) = .5*.05 + .5*.1 = .075 ; L(3) = .5*.95 + .5*.9 = .925 ; prior {2: .5, 3: .5}
    assert new.belief["3"] == pytest.approx(0.925, abs=1e-6)
    assert llm.usage.by_purpose["belief"]["calls"] == 1


def test_bad_llm_assessment_falls_back_to_the_rule_and_is_counted():
    llm = FakeLLM(lambda messages, schema: "not json")
    gate = ConfidenceGate(llm=llm)
    new = _kids("3", "new")
    gate.assess(new, [_kids("2", "old")])
    assert gate.stats["llm_failures"] == 1
    assert new.belief["3"] == pytest.approx(0.95, abs=1e-6)


def test_agreeing_value_needs_no_llm_and_has_zero_entropy():
    llm = FakeLLM(lambda messages, schema: {"probabilities": [1.0]})
    gate = ConfidenceGate(llm=llm)
    decision = gate.assess(_kids("two", "new"), [_kids("2", "old")])
    assert decision.commit and decision.entropy == 0.0 and llm.usage.calls == 0


def test_disabled_gate_commits_everything_without_llm_calls():
    llm = FakeLLM(lambda messages, schema: {"probabilities": [0.5, 0.5]})
    gate = ConfidenceGate(llm=llm, enabled=False)
    decision = gate.assess(_kids("3", "new", directness=0.3, specificity=0.3), [_kids("2", "old")])
    assert decision.commit and llm.usage.calls == 0


def test_events_accumulate_instead_of_competing():
    gate = ConfidenceGate(llm=None)
    trip = Entity("t2", "Ana went to Rome", "event", "Ana", "trip", "Rome")
    decision = gate.assess(trip, [Entity("t1", "Ana went to Paris", "event", "Ana", "trip", "Paris")])
    assert decision.commit and decision.competing == [] and trip.consistency == 1.0 and trip.belief == {"Rome": 1.0}


def test_rho_exactly_at_rho_min_commits_and_just_below_queues():
    """The gate commits when rho >= rho_min: the boundary itself is on the commit side."""
    entity = lambda: Entity("n", "Ana has 2 kids.", "persona", subject="Ana", attribute="number of kids", value="2",
                            directness=0.6, specificity=0.3)  # fmt: skip
    rho = confidence(0.6, 1.0, 0.3, W)  # nothing held: consistency 1
    at = ConfidenceGate(rho_min=rho, weights=W).assess(entity(), [])
    assert at.rho == rho and at.commit
    above = ConfidenceGate(rho_min=math.nextafter(rho, 1.0), weights=W).assess(entity(), [])
    assert not above.commit and above.reason.startswith("rho ")


def _hobby(value: str, eid: str) -> Entity:
    return Entity(eid, f"Ana enjoys {value}.", "persona", subject="Ana", attribute="hobby", value=value, belief={value: 1.0})


def test_exclusivity_check_lets_compatible_values_coexist():
    """The belief call says the values do not exclude each other: nothing competes, the newcomer is believed outright."""
    asked: list[dict] = []

    def respond(messages, schema):
        asked.append(schema)
        return {"exclusive": False, "probabilities": [0.5, 0.5]}

    llm = FakeLLM(respond)
    gate = ConfidenceGate(llm=llm, exclusivity_check=True)
    new = _hobby("pottery", "new")
    decision = gate.assess(new, [_hobby("painting", "old")])
    assert decision.commit and decision.competing == [] and new.consistency == 1.0 and new.belief == {"pottery": 1.0}
    assert gate.stats["not_exclusive"] == 1 and llm.usage.by_purpose["belief"]["calls"] == 1
    assert list(asked[0]["properties"]) == ["exclusive", "probabilities"] and asked[0]["required"] == ["exclusive", "probabilities"]


def test_exclusivity_check_keeps_the_belief_when_values_exclude_each_other():
    llm = FakeLLM(lambda messages, schema: {"exclusive": True, "probabilities": [0.1, 0.9]})
    gate = ConfidenceGate(llm=llm, rule_weight=0.5, exclusivity_check=True)
    new = _kids("3", "new")
    decision = gate.assess(new, [_kids("2", "old")])
    # the same arithmetic as without the check: L(3) = .5*.95 + .5*.9
    assert decision.competing == ["old"] and new.belief["3"] == pytest.approx(0.925, abs=1e-6) and gate.stats["not_exclusive"] == 0


def test_without_the_check_the_belief_call_is_unchanged():
    """Default off: the schema and prompt are the ones every published row's cache keys were made with."""
    seen: list[tuple] = []
    llm = FakeLLM(lambda messages, schema: seen.append((messages, schema)) or {"probabilities": [0.5, 0.5]})
    ConfidenceGate(llm=llm).assess(_hobby("pottery", "new"), [_hobby("painting", "old")])
    messages, schema = seen[0]
    assert schema == {"type": "object", "properties": {"probabilities": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}},
                      "required": ["probabilities"]}
    assert messages[1]["content"].endswith("Probabilities, in candidate order:") and "exclusive" not in messages[1]["content"]


def test_exclusivity_answer_missing_falls_back_to_the_rule():
    llm = FakeLLM(lambda messages, schema: {"probabilities": [0.1, 0.9]})
    gate = ConfidenceGate(llm=llm, exclusivity_check=True)
    new = _kids("3", "new")
    gate.assess(new, [_kids("2", "old")])
    assert gate.stats["llm_failures"] == 1 and new.belief["3"] == pytest.approx(0.95, abs=1e-6)
