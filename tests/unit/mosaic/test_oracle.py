"""The gold-judge study's accounting (mosaic.oracle.audit_gold_partners): where each held gold partner of a new
fact went, and whether the numeric rule's decisions agree with the labels. Counts only."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

from mosaic.conflict import ConflictDecision
from mosaic.entity import Entity
from mosaic.oracle import audit_gold_partners


def _held(entity_id: str, fact_id: str, status: str = "active") -> Entity:
    entity = Entity(entity_id, f"held fact {entity_id}", "persona", fact_id=fact_id)
    entity.status = status
    return entity


def test_each_held_partner_is_counted_where_it_went():
    partners = [_held(f"h{i}", f"g{i}") for i in range(1, 6)] + [_held("h6", "g6", status="superseded"), _held("other", "x")]
    graph = SimpleNamespace(entities=lambda: partners)
    new = Entity("n", "new fact", "persona", gold_replaces=["g1", "g2", "g3", "g4", "g5", "g6"])
    trace = {"candidates": [("h1", 0.9), ("h2", 0.8), ("h3", 0.7), ("h4", 0.6)], "facts": ["h1", "h2", "h3"]}
    decisions = [ConflictDecision("n", "h1", "update", "semantic", "", 1.0, decided_by="gold"),
                 ConflictDecision("n", "h2", "update", "numeric", "", 1.0, decided_by="numeric"),
                 ConflictDecision("n", "other", "update", "numeric", "", 1.0, decided_by="numeric")]  # fmt: skip
    stats: Counter = Counter()
    audit_gold_partners(stats, trace, new, graph, decisions)
    # g6 is no longer active: not a held partner; h4 was a candidate but not shown, h5 never a candidate
    assert stats == Counter({"gold_partners_held": 5, "gold_partners_retired": 2, "gold_partner_not_blamed": 1, "gold_partner_not_shown": 1,
                             "gold_partner_not_candidate": 1, "numeric_gold_right": 1, "numeric_gold_wrong": 1})  # fmt: skip
    ruled_out: Counter = Counter()  # a rule ended the check before any facts were shown
    audit_gold_partners(ruled_out, {"candidates": [("h1", 0.9)]}, new, graph, [])
    assert ruled_out["gold_partner_ruled_out"] == 1 and ruled_out["gold_partner_not_candidate"] == 4


def test_a_numeric_decision_on_a_fact_that_replaces_nothing_is_wrong():
    stats: Counter = Counter()
    decision = ConflictDecision("n", "h1", "update", "numeric", "", 1.0, decided_by="numeric")
    audit_gold_partners(stats, {}, Entity("n", "new fact", "persona"), SimpleNamespace(), [decision])
    assert stats == Counter({"numeric_gold_wrong": 1})
