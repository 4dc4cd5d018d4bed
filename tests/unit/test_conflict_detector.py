"""Control flow of mosaic.conflict with a scripted LLM: candidates, like-with-like numbers, threshold, policy."""

from __future__ import annotations

import hashlib
import math
import re

import numpy as np
import pytest

from mosaic.conflict import (
    ConflictDetector,
    build_nli_messages,
    digit_distribution,
    label_distribution,
    mask_numbers,
    numeric_clash,
    quantities,
)
from mosaic.entity import Entity
from mosaic.graph import MemoryGraph
from tests.fakes import FakeLLM


class HashEmbedder:
    """Bag-of-words hashing embedder: deterministic, and similar texts share words."""

    dim = 384
    model_id = "hash"

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z#]+|\d+", text.lower()):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
            out[row] /= max(np.linalg.norm(out[row]), 1e-9)
        return out


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


GUIDE = [
    "Amlodipine is started at 5 mg once daily and can be increased to a maximum of 10 mg once daily.",
    "ACE inhibitors and ARBs are contraindicated in pregnancy.",
    "Ms. Lindqvist is planning a pregnancy next year.",
    "Dietary sodium should be kept below 2 g per day.",
]


def test_quantities_and_masking():
    assert [q.family for q in quantities("Rent is $2,300 a month and 150/95 mmHg, three months")] == ["money", "mmHg", "time"]
    assert quantities("three months")[0].values == (90.0,)
    assert mask_numbers("Sodium below 2 g per day") == "Sodium below # per day"
    assert numeric_clash("maximum of 20 mg", GUIDE[0]) is not None
    assert numeric_clash("may be raised to 10 mg", GUIDE[0]) is None  # agrees with one held value
    assert numeric_clash("takes 3 weeks", GUIDE[0]) is None  # no shared unit family: not compared


def test_numeric_clash_is_decided_without_the_llm():
    llm = FakeLLM(lambda m, s: "unknown")
    detector = ConflictDetector(llm, numeric_similarity=0.5)
    new = Entity("n", "Amlodipine is started at 5 mg once daily and can be increased to a maximum of 20 mg once daily.", "persona", session_time="2024-02-01")
    decisions = detector.check(new, _graph(GUIDE))
    assert [(d.old_id, d.conflict_type) for d in decisions] == [("e0", "numeric")]
    assert llm.requests == []
    assert detector.stats["numeric_hits"] == 1


def test_agreeing_numbers_fall_through_to_the_llm_which_can_clear_them():
    llm = LogprobLLM({"true": 0.7, "unknown": 0.25, "false": 0.05})
    detector = ConflictDetector(llm, numeric_similarity=0.5, threshold=0.5)
    new = Entity("n", "Amlodipine can be increased to a maximum of 10 mg once daily.", "persona")
    assert detector.check(new, _graph(GUIDE)) == []
    assert len(llm.requests) == 1 and llm.requests[0]["purpose"] == "conflict"
    assert detector.last_trace["score"] == pytest.approx(0.05)


def test_neighbours_of_the_nearest_reach_the_prompt():
    """Logical conflicts need two held facts: the rule and the person's fact must both be shown."""
    llm = LogprobLLM({"false": 0.9, "unknown": 0.1})
    detector = ConflictDetector(llm, k=1, n_facts=6, min_similarity=-1.0, explain=False)
    graph = _graph(GUIDE)
    graph.add_prerequisite("e1", "e2")  # the pregnancy rule is a prerequisite of the patient's plan
    new = Entity("n", "Ms. Lindqvist is planning to start losartan, an ARB.", "persona", session_time="2024-02-01")
    decisions = detector.check(new, graph)
    shown = llm.requests[0]["messages"][-1]["content"]
    assert "contraindicated in pregnancy" in shown and "planning a pregnancy" in shown
    assert len(decisions) == 1 and decisions[0].score == pytest.approx(0.9)


def test_threshold_and_explanation_calls():
    new = Entity("n", "Dietary sodium intake does not matter at all.", "persona", session_time="2024-02-01")
    low = ConflictDetector(LogprobLLM({"false": 0.4, "unknown": 0.6}), threshold=0.5)
    assert low.check(new, _graph(GUIDE)) == []
    llm = LogprobLLM({"false": 0.8, "unknown": 0.2})
    high = ConflictDetector(llm, threshold=0.5, explain=True)
    decisions = high.check(new, _graph(GUIDE))
    assert len(decisions) == 1 and len(llm.requests) == 2  # one judgement + one short reason
    assert decisions[0].reason == "false"  # the scripted LLM's reply is used as the reason


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


def test_distributions_parse_logprobs_and_fall_back_to_text():
    lp = [{"token": "false", "top_logprobs": [{"token": "false", "logprob": math.log(0.6)}, {"token": "unknown", "logprob": math.log(0.2)},
                                             {"token": "True", "logprob": math.log(0.1)}, {"token": "maybe", "logprob": math.log(0.1)}]}]  # fmt: skip
    dist = label_distribution(lp, "false")
    assert dist["false"] == pytest.approx(0.6 / 0.9) and dist["true"] == pytest.approx(0.1 / 0.9)
    assert label_distribution(None, "unknown") == {"true": 0.0, "false": 0.0, "unknown": 1.0}
    assert digit_distribution(None, "2", 3) == {2: 1.0}
    assert digit_distribution(None, "9", 3) == {0: 1.0}  # out of range: treated as "none"


def test_prompt_prefix_is_shared_across_calls():
    a = build_nli_messages(["fact a"], "new a")
    b = build_nli_messages(["fact b", "fact c"], "new b")
    assert a[:-1] == b[:-1] and a[-1] != b[-1]


def test_bad_mode_is_refused():
    with pytest.raises(ValueError, match="conflict.mode"):
        ConflictDetector(FakeLLM(lambda m, s: ""), mode="vote")


def test_a_restatement_of_a_held_fact_is_not_judged_by_the_llm():
    llm = LogprobLLM({"false": 0.6, "true": 0.4})  # a small model's p(false) on identical texts is not near 0
    detector = ConflictDetector(llm, threshold=0.35)
    same = Entity("n", "Dietary sodium should be kept below 2 g per day!", "persona", session_time="2024-02-01")
    assert detector.check(same, _graph(GUIDE)) == [] and llm.requests == []
    assert detector.last_trace["decided_by"] == "duplicate"
    changed = Entity("n2", "Dietary sodium should be kept below 5 g per day.", "persona", session_time="2024-02-01")
    assert [d.conflict_type for d in detector.check(changed, _graph(GUIDE))] == ["numeric"]  # numbers still win
