"""Control flow of mosaic.conflict with a scripted LLM: candidates, like-with-like numbers, threshold, policy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mosaic.conflict import ConflictDetector
from mosaic.conflict_judgement import (
    REVISE_FEW_SHOT,
    REVISE_SYSTEM_PROMPT,
    SUPERSEDE_FEW_SHOT,
    SUPERSEDE_SYSTEM_PROMPT,
    yes_probability,
)
from mosaic.entity import Entity
from mosaic.graph import MemoryGraph
from core.quantities import mask_numbers, numeric_clash, quantities
from tests.fakes import FakeLLM
from tests.fakes import HashEmbedder as FakeHashEmbedder
from core.config_check import check_kwargs
from mosaic.settings import combination_problems


def HashEmbedder() -> FakeHashEmbedder:  # noqa: N802 (the tests build it like a class)
    """Bag-of-words hashing embedder: deterministic, and similar texts share words ("#" is a word: masked numbers)."""
    return FakeHashEmbedder(dim=384, model_id="hash", token_pattern=r"[a-z#]+|\d+")


def _graph(texts: list[str], session_time: str | None = "2024-01-01", confidence: float = 1.0) -> MemoryGraph:
    graph = MemoryGraph(HashEmbedder(), assoc_threshold=0.2)
    for i, text in enumerate(texts):
        graph.add_entity(Entity(f"e{i}", text, "persona", source_turn_ids=[f"ctx:{i}"], session_time=session_time, confidence=confidence))
    return graph


class LogprobLLM(FakeLLM):
    """FakeLLM that also returns first-token log-probabilities, like the llama.cpp server."""

    def __init__(self, probs: dict[str, float]) -> None:
        super().__init__(lambda m, s: max(probs, key=probs.get))
        self.probs = probs

    def chat(self, messages, **kwargs):
        result = super().chat(messages, **kwargs)
        if kwargs.get("top_logprobs"):
            result.logprobs = [{"token": max(self.probs, key=self.probs.get), "top_logprobs": [
                {"token": tok, "logprob": math.log(p)} for tok, p in self.probs.items()]}]  # fmt: skip
        return result


# Invented text (a cycling club's rules and members), not taken from any conflict suite.
RULES = [
    "Beginners ride 20 km on their first outing and can build up to a maximum of 60 km per ride.",
    "Riders under 16 may only join group rides with a parent.",
    "Noah Berg is 14 years old.",
    "Every rider carries 2 litres of water on summer rides.",
]


def test_quantities_units_come_from_pint_and_english_words_are_not_units():
    assert [q.family for q in quantities("Dues are $2,300 a year, the loop is 45 km, three months, 15%")] == [
        "currency_dollar", "length", "time", "percent"]
    assert quantities("three months")[0].values == quantities("3 months")[0].values
    assert quantities("2 litres")[0].values == pytest.approx(quantities("2000 ml")[0].values)
    assert [q.family for q in quantities("5 kilometres, 2 cats, 3 units")] == ["length", "count", "count"]
    # "a" (pint: annum), "in" (inch), "am" (attometre), "th" (ordinal) stay words: these are bare counts
    assert [q.family for q in quantities("We met 2 a week, 3 in total, at 9 am, on the 10th")] == ["count"] * 4
    assert quantities("on the 10th")[0].span == (7, 9)
    assert mask_numbers("Every rider carries 2 litres of water") == "Every rider carries # of water"
    assert mask_numbers("on the 10th, 2 cats") == "on the #th, # cats"


def test_count_words_read_as_the_digits_they_stand_for():
    # a model writes "two cats" or "2 cats" at random: both must reach the numeric rule alike
    assert quantities("Mia keeps two cats")[0] == quantities("Mia keeps 2 cats")[0]
    assert numeric_clash("Mia keeps three cats now", "Mia keeps two cats") == "3 (count) does not match the held value(s) 2"
    assert mask_numbers("Mia keeps two cats") == mask_numbers("Mia keeps 3 cats") == "Mia keeps # cats"
    # "one" and "zero" count only before a unit: elsewhere they are pronouns
    assert quantities("one of her cats is the one she likes") == []
    assert [q.family for q in quantities("one month")] == ["time"]


def test_numeric_clash_compares_one_unit_family_across_spellings():
    assert numeric_clash("a maximum of 80 km per ride", RULES[0]) is not None
    assert numeric_clash("may build up to 60000 m", RULES[0]) is None  # agrees with one held value, in another unit
    assert numeric_clash("takes 3 weeks", RULES[0]) is None  # no shared unit family: not compared
    assert numeric_clash("The trial lasts 90 days", "The trial lasts three months") is None  # within 2%
    assert numeric_clash("The trial lasts 6 weeks", "The trial lasts three months") == "6 weeks (time) does not match the held value(s) 3 months"
    assert numeric_clash("4.9%", "5%", rel_tol=0.02) is None and numeric_clash("4.8%", "5%", rel_tol=0.02) is not None


def test_numeric_clash_is_decided_without_the_llm():
    llm = FakeLLM(lambda m, s: "unknown")
    detector = ConflictDetector(llm, numeric_similarity=0.5)
    new = Entity("n", "Beginners ride 20 km on their first outing and can build up to a maximum of 90 km per ride.", "persona", session_time="2024-02-01")
    decisions = detector.check(new, _graph(RULES))
    assert [(d.old_id, d.conflict_type, d.decided_by) for d in decisions] == [("e0", "numeric", "numeric")]
    # the rule decided its pair without the LLM; the judge still sees the other candidates, never the ruled one
    assert all(RULES[0] not in r["messages"][-1]["content"] for r in llm.requests)
    assert detector.stats["numeric_hits"] == 1


def test_numeric_tolerance_reaches_the_rule():
    new = Entity("n", "Beginners ride 20 km on their first outing and can build up to a maximum of 63 km per ride.", "persona", session_time="2024-02-01")
    strict = ConflictDetector(FakeLLM(lambda m, s: "unknown"), numeric_similarity=0.5, use_llm=False)
    loose = ConflictDetector(FakeLLM(lambda m, s: "unknown"), numeric_similarity=0.5, use_llm=False, numeric_tolerance=0.1)
    assert [d.conflict_type for d in strict.check(new, _graph(RULES))] == ["numeric"]  # 63 vs 60 is 5% apart
    assert loose.check(new, _graph(RULES)) == []


def test_agreeing_numbers_fall_through_to_the_llm_which_can_clear_them():
    llm = LogprobLLM({"true": 0.7, "unknown": 0.25, "false": 0.05})
    detector = ConflictDetector(llm, numeric_similarity=0.5, threshold=0.5)
    new = Entity("n", "Beginners can build up to a maximum of 60 km per ride.", "persona")
    assert detector.check(new, _graph(RULES)) == []
    assert len(llm.requests) == 1 and llm.requests[0]["purpose"] == "conflict"
    assert detector.last_trace["score"] == pytest.approx(0.05)


def test_neighbours_of_the_nearest_reach_the_prompt():
    """Logical conflicts need two held facts: the rule and the person's fact must both be shown."""
    llm = LogprobLLM({"false": 0.9, "unknown": 0.1})
    detector = ConflictDetector(llm, k=1, n_facts=6, min_similarity=-1.0, explain=False)
    graph = _graph(RULES)
    graph.add_prerequisite("e1", "e2")  # the age rule is a prerequisite of the rider's age
    new = Entity("n", "Noah Berg, 14 years old, joined the Sunday ride on his own.", "persona", session_time="2024-02-01")
    decisions = detector.check(new, graph)
    shown = llm.requests[0]["messages"][-1]["content"]
    assert "only join group rides with a parent" in shown and "14 years old" in shown
    assert len(decisions) == 1 and decisions[0].score == pytest.approx(0.9)


def test_n_facts_caps_what_the_llm_sees_and_k_reaches_the_candidates():
    texts = [f"Rider {name} rides a {colour} bike to the club on Sundays." for name, colour in
             zip("ABCDEFGHIJKL", ["red", "blue", "green", "black", "white", "grey", "pink", "gold", "teal", "navy", "lime", "plum"])]  # fmt: skip
    new = Entity("n", "Rider M rides a brown bike to the club on Sundays.", "persona")
    for k, n_facts, shown in ((10, 10, 10), (10, 6, 6), (3, 10, 3)):
        llm = LogprobLLM({"unknown": 0.9, "false": 0.1})
        graph = MemoryGraph(HashEmbedder(), assoc_threshold=2.0)  # no edges: the candidates are the k nearest alone
        for i, text in enumerate(texts):
            graph.add_entity(Entity(f"e{i}", text, "persona"))
        ConflictDetector(llm, k=k, n_facts=n_facts, min_similarity=-1.0).check(new, graph)
        assert llm.requests[0]["messages"][-1]["content"].count("\n- ") == shown, (k, n_facts)


def test_bad_k_and_n_facts_are_refused():
    with pytest.raises(ValueError, match="conflict.k=-1: must be int >= 1"):
        check_kwargs(ConflictDetector, {"k": -1}, "system.conflict")
    with pytest.raises(ValueError, match="conflict.n_facts"):
        check_kwargs(ConflictDetector, {"n_facts": 0}, "system.conflict")


def test_threshold_and_explanation_calls():
    new = Entity("n", "Riders may skip carrying water on summer rides.", "persona", session_time="2024-02-01")
    low = ConflictDetector(LogprobLLM({"false": 0.4, "unknown": 0.6}), threshold=0.5)
    assert low.check(new, _graph(RULES)) == []
    replies = iter(["false", "2", "  Every rider must carry water in summer.  "])
    llm = FakeLLM(lambda m, s: next(replies))
    high = ConflictDetector(llm, threshold=0.5, explain=True, max_explain_tokens=17)
    decisions = high.check(new, _graph(RULES))
    assert len(decisions) == 1 and len(llm.requests) == 3  # one judgement, one call naming the fact, one short reason
    why = llm.requests[2]
    assert why["messages"][:-2] == llm.requests[0]["messages"]  # the judgement's own prompt, then its answer and "why?"
    assert why["messages"][-2] == {"role": "assistant", "content": "false"} and why["messages"][-1]["content"].endswith("why?")
    assert why["max_tokens"] == 17 and why["purpose"] == "conflict"
    assert decisions[0].reason == "Every rider must carry water in summer."  # the second reply, stripped


def test_resolution_policy():
    detector = ConflictDetector(FakeLLM(lambda m, s: "0"))
    old = Entity("o", "x", "persona", session_time="2024-01-01", directness=0.9, specificity=0.9)
    assert detector.resolve(Entity("n", "y", "persona", session_time="2024-02-01", directness=0.9, specificity=0.9), old) == "update"
    assert detector.resolve(Entity("n", "y", "persona", session_time="2024-02-01", directness=0.5, specificity=0.5), old) == "reject"
    assert detector.resolve(Entity("n", "y", "persona", session_time="2023-12-01", directness=0.9, specificity=0.9), old) == "flag"
    assert detector.resolve(Entity("n", "y", "persona", session_time=None, directness=0.9, specificity=0.9), old) == "flag"
    # a newer, direct, exact correction updates even though its rho is low (it disagrees with what is held)
    correction = Entity("n", "y", "persona", session_time="2024-02-01", directness=1.0, specificity=1.0, consistency=0.0, confidence=0.6)
    assert detector.resolve(correction, Entity("o", "x", "persona", session_time="2024-01-01", confidence=1.0)) == "update"


def test_empty_memory_costs_nothing():
    llm = FakeLLM(lambda m, s: "false")
    detector = ConflictDetector(llm)
    assert detector.check(Entity("n", "anything", "persona"), MemoryGraph(HashEmbedder())) == []
    assert llm.requests == [] and detector.stats["no_candidates"] == 1




def test_revise_mode_asks_which_fact_is_out_of_date_and_supersedes_the_picked_one():
    """mode=revise (ablation): the numbered list with the "replaced fact" prompt; 1 - p("0") against the threshold, and
    the fact it names (not the nearest) is the one resolved; below the threshold nothing happens."""
    texts = ["Noah Berg rides a road bike.", "Noah Berg works as a baker in Ghent.", "Noah Berg has a dog called Rex."]
    new = Entity("n", "Noah Berg now works as a postman in Ghent.", "persona", session_time="2024-02-01", directness=0.9, specificity=0.9)
    llm = LogprobLLM({"2": 0.7, "0": 0.2, "1": 0.1})
    detector = ConflictDetector(llm, mode="revise", threshold=0.5, min_similarity=0.0, use_numeric_rule=False)
    graph = MemoryGraph(HashEmbedder(), assoc_threshold=0.2)
    for i, text in enumerate(texts):
        graph.add_entity(Entity(f"e{i}", text, "persona", session_time="2024-01-01", directness=0.9, specificity=0.9))
    decisions = detector.check(new, graph)
    shown = detector.last_trace["facts"]
    assert len(decisions) == 1 and decisions[0].old_id == shown[1] and decisions[0].verdict == "update"
    assert decisions[0].score == pytest.approx(0.8) and decisions[0].reason.startswith("LLM: NEW replaces fact 2")
    prompt = llm.requests[0]["messages"]
    assert prompt[0]["content"] == REVISE_SYSTEM_PROMPT and prompt[-1]["content"].endswith("Replaced fact (number, 0 if none):")
    assert llm.requests[0]["max_tokens"] == 1  # one token: the score comes from its log-probabilities
    unsure = ConflictDetector(LogprobLLM({"0": 0.6, "2": 0.4}), mode="revise", threshold=0.5, min_similarity=0.0, use_numeric_rule=False)
    assert unsure.check(new, _graph(texts)) == []
    # the few-shot answers name every position and "none", so no position is the prompt's habit
    assert {answer for _, _, answer in REVISE_FEW_SHOT} == {"0", "1", "2", "3"}


def test_supersede_mode_asks_yes_or_no_about_the_nearest_held_fact_only():
    """mode=supersede (ablation): one held fact (the nearest) and NEW, p(yes) against the threshold; yes and no
    examples alike in its few-shot prefix."""
    texts = ["Noah Berg works as a baker in Ghent.", "Noah Berg rides a road bike.", "Noah Berg has a dog called Rex."]
    new = Entity("n", "Noah Berg now works as a postman in Ghent.", "persona", session_time="2024-02-01")
    llm = LogprobLLM({"yes": 0.6, "no": 0.2, "maybe": 0.2})
    detector = ConflictDetector(llm, mode="supersede", threshold=0.5, min_similarity=0.0, use_numeric_rule=False)
    decisions = detector.check(new, _graph(texts))
    nearest = detector.last_trace["facts"][0]
    assert len(decisions) == 1 and decisions[0].old_id == nearest and decisions[0].score == pytest.approx(0.75)  # 0.6 / (0.6 + 0.2)
    query = llm.requests[0]["messages"][-1]["content"]
    assert query.count("HELD:") == 1 and query.endswith("Is HELD out of date now?")
    assert llm.requests[0]["messages"][0]["content"] == SUPERSEDE_SYSTEM_PROMPT
    assert ConflictDetector(LogprobLLM({"no": 0.7, "yes": 0.3}), mode="supersede", threshold=0.5, min_similarity=0.0,
                            use_numeric_rule=False).check(new, _graph(texts)) == []  # fmt: skip
    answers = [answer for _, _, answer in SUPERSEDE_FEW_SHOT]
    assert answers.count("yes") == answers.count("no") and all(len(facts) == 1 for facts, _, _ in SUPERSEDE_FEW_SHOT)
    assert yes_probability(None, "Yes.") == 1.0 and yes_probability(None, "no") == 0.0


def test_bad_mode_is_refused():
    with pytest.raises(ValueError, match="conflict.mode"):
        check_kwargs(ConflictDetector, {"mode": "vote"}, "system.conflict")


def test_a_restatement_of_a_held_fact_is_not_judged_by_the_llm():
    llm = LogprobLLM({"false": 0.6, "true": 0.4})  # a small model's p(false) on identical texts is not near 0
    detector = ConflictDetector(llm, threshold=0.35)
    same = Entity("n", "Every rider carries 2 litres of water on summer rides!", "persona", session_time="2024-02-01")
    assert detector.check(same, _graph(RULES)) == [] and llm.requests == []
    assert detector.last_trace["decided_by"] == "duplicate"
    changed = Entity("n2", "Every rider carries 3 litres of water on summer rides.", "persona", session_time="2024-02-01")
    assert [d.conflict_type for d in detector.check(changed, _graph(RULES))] == ["numeric"]  # numbers still win


def test_judge_radius_skips_only_far_candidates():
    """judge_min_similarity (a write-cost switch): the LLM is asked when the nearest held fact reaches the
    radius, skipped (and counted) when it does not; off (null) every check with candidates is judged."""
    graph = _graph(["Mara waters the greenhouse tomatoes every morning before work."])
    near = Entity("n1", "Mara waters the greenhouse tomatoes every evening after work.", "persona")
    far = Entity("n2", "Mara bought a blue kayak for the lake trip.", "persona")
    sims = {e.entity_id: ConflictDetector(FakeLLM(lambda m, s: "x"), min_similarity=0.0).candidates(e, graph)[0][1] for e in (near, far)}
    radius = (sims["n1"] + sims["n2"]) / 2
    assert sims["n2"] < radius < sims["n1"] < 0.95  # the near one is no restatement either

    for judge_min_similarity, expected_calls, expected_skips in ((None, 2, 0), (radius, 1, 1)):
        llm = LogprobLLM({"false": 0.9, "unknown": 0.05, "true": 0.05})
        detector = ConflictDetector(llm, min_similarity=0.0, judge_min_similarity=judge_min_similarity)
        assert len(detector.check(near, graph)) == 1  # judged, and the scripted LLM calls it false
        assert detector.check(far, graph) == [] or judge_min_similarity is None
        assert len(llm.requests) == expected_calls and detector.stats["skipped_far"] == expected_skips
        assert detector.stats["llm_calls"] == expected_calls


def test_revision_rule_supersedes_a_close_held_fact_without_the_llm():
    """conflict.revision_similarity (ablation, off by default): a new fact whose nearest held fact is at least this
    close (and no restatement) revises it with no LLM call; farther facts still go to the judge; off, the judge
    decides every check, here "true" (both can hold), so nothing is superseded."""
    graph = _graph(["Mara waters the greenhouse tomatoes every morning before work."])
    near = Entity("n1", "Mara waters the greenhouse tomatoes every evening after work.", "persona", session_time="2024-02-01")
    far = Entity("n2", "Mara bought a blue kayak for the lake trip.", "persona", session_time="2024-02-01")
    sims = {e.entity_id: ConflictDetector(FakeLLM(lambda m, s: "x"), min_similarity=0.0).candidates(e, graph)[0][1] for e in (near, far)}
    cut = (sims["n1"] + sims["n2"]) / 2
    assert sims["n2"] < cut < sims["n1"] < 0.95

    llm = LogprobLLM({"true": 0.9, "unknown": 0.05, "false": 0.05})
    off = ConflictDetector(llm, min_similarity=0.0)
    assert off.check(near, graph) == [] and len(llm.requests) == 1

    llm = LogprobLLM({"true": 0.9, "unknown": 0.05, "false": 0.05})
    on = ConflictDetector(llm, min_similarity=0.0, revision_similarity=cut)
    [decision] = on.check(near, graph)
    assert (decision.old_id, decision.verdict, decision.conflict_type) == ("e0", "update", "semantic")
    assert decision.score == pytest.approx(sims["n1"]) and on.last_trace["decided_by"] == "revision" and llm.requests == []
    assert on.check(far, graph) == [] and len(llm.requests) == 1  # below the cut: judged as before
    assert on.stats["revision_hits"] == 1 and on.stats["llm_hits"] == 0 and on.stats["update"] == 1


@pytest.mark.parametrize("revision_similarity", [0.1, 0.95, 1.2])
def test_revision_rule_outside_candidates_and_restatements_is_refused(revision_similarity):
    block = {"min_similarity": 0.2, "duplicate_similarity": 0.95, "revision_similarity": revision_similarity}
    assert any("revision_similarity" in p for p in combination_problems({"conflict": block}))
    if revision_similarity > 1:  # not a cosine: its type refuses it too
        with pytest.raises(ValueError, match="revision_similarity"):
            check_kwargs(ConflictDetector, block, "system.conflict")


def test_judge_radius_below_candidate_floor_is_refused():
    [problem] = combination_problems({"conflict": {"min_similarity": 0.3, "judge_min_similarity": 0.2}})
    assert "judge_min_similarity=0.2 is below system.conflict.min_similarity=0.3" in problem


def test_judge_proposed_confirms_only_what_extraction_proposed():
    """conflict.judge=proposed (write-cost variant): no proposal, no LLM call (counted); a proposal is judged
    with the proposed fact shown first and blamed; the numeric rule still decides without any proposal."""
    graph = _graph(RULES)
    claim = Entity("n", "Noah Berg joined the Sunday group ride alone, without a parent.", "event", session_time="2024-02-01")
    llm = LogprobLLM({"false": 0.9, "unknown": 0.05, "true": 0.05})
    detector = ConflictDetector(llm, judge="proposed")
    assert detector.check(claim, graph) == [] and llm.requests == []
    assert detector.last_trace["decided_by"] == "not_proposed" and detector.stats["skipped_unproposed"] == 1
    rule = graph.entity("e1")
    [decision] = detector.check(claim, graph, proposed=[rule])
    assert decision.old_id == "e1" and len(llm.requests) == 1 and detector.stats["llm_calls"] == 1
    assert "Facts:\n- Riders under 16 may only join group rides with a parent." in llm.requests[0]["messages"][-1]["content"]
    numbers = Entity("m", "Beginners ride 30 km on their first outing and can build up to a maximum of 60 km per ride.", "persona",
                     session_time="2024-02-01")
    assert [d.conflict_type for d in detector.check(numbers, graph)] == ["numeric"] and len(llm.requests) == 1
    with pytest.raises(ValueError, match="judge"):
        check_kwargs(ConflictDetector, {"judge": "sometimes"}, "system.conflict")
