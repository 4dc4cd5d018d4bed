"""The save-time check around a perfect judge (conflict.source=gold) and the faults it exposed: blame by list
position, one decision per check, the numeric rule ending the check, same-session facts never newer (association
edges on update: test_decisions.py). Hand-written cases (a garden club; no benchmark text)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from core.api import OracleFact, Turn
from mosaic.conflict import ConflictDetector
from mosaic.entity import Entity, resolve_by_evidence
from mosaic.extract import EntityExtractor
from mosaic.memory import MosaicMemory
from mosaic.oracle import GoldConflictJudge
from mosaic.retrieval import Retriever
from tests.fakes import FakeLLM
from tests.unit.mosaic.test_conflict import HashEmbedder, _graph

HELD = [
    "Mara waters the greenhouse tomatoes every morning.",
    "Mara grows basil on the kitchen windowsill.",
    "Mara keeps the greenhouse key under the blue pot.",
]
NEW_TEXT = "Mara now waters the greenhouse tomatoes only in the evening, and keeps the key with her."


def _gold_graph(session_time: str = "2024-01-01"):
    graph = _graph(HELD, session_time=session_time)
    for i in range(len(HELD)):
        graph.entity(f"e{i}").fact_id = f"0:p{i}"
    return graph


def _new(replaces: list[str], session_time: str = "2024-02-01") -> Entity:
    return Entity("n", NEW_TEXT, "persona", session_time=session_time, fact_id="1:p0", gold_replaces=replaces)


def _no_llm() -> FakeLLM:
    def refuse(messages, schema):
        raise AssertionError("the gold judge must not call the LLM")

    return FakeLLM(refuse)


def test_the_gold_judge_blames_exactly_the_labelled_partners_with_no_llm_call():
    graph = _gold_graph()
    detector = ConflictDetector(_no_llm(), source="gold", min_similarity=0.0)
    decisions = detector.check(_new(["0:p2"]), graph)
    assert [(d.old_id, d.verdict, d.decided_by) for d in decisions] == [("e2", "update", "gold")]
    assert detector.stats["llm_calls"] == 0 and detector.stats["gold_judgements"] == 1
    assert detector.stats["gold_partners_held"] == 1 and detector.stats["gold_partners_retired"] == 1
    assert detector.check(Entity("m", "Mara likes the smell of tomato leaves.", "persona", session_time="2024-02-01", fact_id="1:p1"), graph) == []
    assert GoldConflictJudge().blame(_new(["0:p1"]), [graph.entity("e0"), graph.entity("e1")]) == [2]


def test_one_new_fact_retires_every_held_fact_it_replaces():
    graph = _gold_graph()
    detector = ConflictDetector(_no_llm(), source="gold", min_similarity=0.0)
    decisions = detector.check(_new(["0:p0", "0:p2"]), graph)
    assert sorted(d.old_id for d in decisions) == ["e0", "e2"]  # before: one decision per check, the other kept


def test_an_nli_false_blames_the_fact_the_model_names_not_the_nearest():
    # the nli call says false; the follow-up pick call names fact 2 of the list shown (not the nearest, fact 1)
    replies = iter(["false", "2"])
    llm = FakeLLM(lambda m, s: next(replies))
    graph = _graph(HELD)
    detector = ConflictDetector(llm, min_similarity=0.0, use_numeric_rule=False)
    [decision] = detector.check(Entity("n", NEW_TEXT, "persona", session_time="2024-02-01"), graph)
    shown = detector.last_trace["facts"]
    assert decision.old_id == shown[1] != shown[0]  # before: always shown[0]
    assert len(llm.requests) == 2 and detector.stats["blame_calls"] == 1 and detector.stats["llm_calls"] == 2
    assert llm.requests[1]["messages"][-1]["content"].endswith("Contradicted fact (number, 0 if none):")


def test_the_numeric_rule_decides_its_pair_and_the_judge_still_sees_the_rest():
    held = ["The club pays 40 euros a month for the allotment.", "Mara keeps the greenhouse key under the blue pot."]
    graph = _graph(held)
    graph.entity("e0").fact_id, graph.entity("e1").fact_id = "0:p0", "0:p1"
    new = Entity("n", "The club pays 55 euros a month for the allotment, and the key stays under the blue pot no longer.", "persona",
                 session_time="2024-02-01", fact_id="1:p0", gold_replaces=["0:p0", "0:p1"])
    detector = ConflictDetector(_no_llm(), source="gold", min_similarity=0.0, numeric_similarity=0.3)
    decisions = detector.check(new, graph)
    assert {(d.old_id, d.decided_by) for d in decisions} == {("e0", "numeric"), ("e1", "gold")}  # before: the rule ended the check
    assert detector.stats["numeric_gold_right"] == 1 and detector.stats["numeric_gold_wrong"] == 0


def test_within_one_session_the_later_statement_is_the_newer():
    old = Entity("o", "x", "persona", session_time="2024-03-01T10:00:00")
    assert resolve_by_evidence(Entity("n", "y", "persona", session_time="2024-03-01T10:00:00"), old) == "update"  # before: flag
    assert resolve_by_evidence(Entity("n", "y", "persona", session_time="2024-02-01T10:00:00"), old) == "flag"  # an older statement


def _oracle_memory(tmp_path: Path, hand_over: bool) -> MosaicMemory:
    return MosaicMemory(retry=None, llm=_no_llm(), embedder=HashEmbedder(), workdir=tmp_path, persist=False,
                        extract=partial(EntityExtractor, source="oracle"),
                        conflict=partial(ConflictDetector, source="gold", min_similarity=0.0),
                        retrieval=partial(Retriever, mode="exact", top_k=5), hand_over_edges=hand_over)  # fmt: skip


def _turn(turn_id: str, facts: list[tuple[str, str, tuple[str, ...]]]) -> Turn:
    return Turn(turn_id, "Mara", "(session)", oracle_facts=tuple(OracleFact(f, text, "Mara", replaces=r) for f, text, r in facts))


