"""Coverage-greedy clarification targeting on hand-computed cases, and the resolve path through the gate."""

from __future__ import annotations

import json

import pytest

from core.api import Clarifiable
from mosaic.clarify import coverage, greedy_targets, interpret_answer, main, settled_by
from mosaic.entity import Entity
from mosaic.gate import ClarificationItem
from tests.unit.mosaic.test_memory import _add, _memory


def item(entity_id: str, attribute: str, value: str, rho: float, entropy: float = 1.0, subject: str = "Ana",
         kind: str = "persona", belief: dict | None = None) -> ClarificationItem:
    entity = Entity(entity_id, f"{subject} {attribute} {value}", kind, subject=subject, attribute=attribute, value=value,
                    belief=belief or {}, status="queued")
    return ClarificationItem(entity, rho, entropy, "hand-made", f"Is {attribute} {value}?")


def test_greedy_picks_gains_and_budget_by_hand():
    # a and b share a slot (one answer settles both); c and d stand alone. w = rho.
    queue = [item("a", "dogs", "4", 0.5), item("b", "dogs", "5", 0.4), item("c", "job", "nurse", 0.55), item("d", "city", "Oslo", 0.3)]
    assert settled_by(queue[0], queue) == ["a", "b"] and settled_by(queue[2], queue) == ["c"]
    picks = greedy_targets(queue, budget=2)
    assert [p.entity_id for p in picks] == ["a", "c"]  # gain 0.9 for the dog slot, then 0.55
    assert [p.gain for p in picks] == pytest.approx([0.9, 0.55]) and picks[-1].coverage == pytest.approx(1.45)
    assert picks[0].covers == ["a", "b"] and picks[0].question == "Is dogs 4?" and picks[0].reason == "hand-made"
    # a larger budget adds d and then stops: b's gain is 0 once a is picked
    assert [p.entity_id for p in greedy_targets(queue, budget=10)] == ["a", "c", "d"]
    assert coverage(["a", "c", "d"], queue) == pytest.approx(1.75) == coverage([q.entity.entity_id for q in queue], queue)
    assert greedy_targets(queue, budget=0) == []
    with pytest.raises(ValueError, match="budget"):
        greedy_targets(queue, budget=-1)


def test_overlapping_slots_give_submodular_gains_by_hand():
    # same_slot matches by containment, so covers overlap: x1 {x1,x2}, x2 {x1,x2,x3}, x3 {x2,x3}
    queue = [item("x1", "dogs", "4", 0.2), item("x2", "number of dogs", "5", 0.3), item("x3", "number", "6", 0.4)]
    assert [settled_by(q, queue) for q in queue] == [["x1", "x2"], ["x1", "x2", "x3"], ["x2", "x3"]]
    assert coverage(["x1"], queue) == pytest.approx(0.5) and coverage(["x3"], queue) == pytest.approx(0.7)
    assert coverage(["x1", "x3"], queue) == pytest.approx(0.9)
    # gain of x3 alone 0.7, after x1 only 0.4: diminishing returns
    assert coverage(["x1", "x3"], queue) - coverage(["x1"], queue) < coverage(["x3"], queue)
    [pick] = greedy_targets(queue, budget=1)
    assert pick.entity_id == "x2" and pick.gain == pytest.approx(0.9)


def test_ties_go_to_higher_entropy_then_earlier_position():
    queue = [item("p", "job", "nurse", 0.5, entropy=0.9), item("q", "city", "Oslo", 0.5, entropy=1.2), item("r", "pet", "cat", 0.5, entropy=1.2)]
    assert [t.entity_id for t in greedy_targets(queue, budget=3)] == ["q", "r", "p"]


def test_answers_are_read_as_values():
    queued = item("a", "dogs", "4", 0.5, belief={"2": 0.5, "4": 0.5})
    assert interpret_answer(queued, "Yes.") == ("value", "4") and interpret_answer(queued, True) == ("value", "4")
    assert interpret_answer(queued, "no") == ("value", "2")  # the value held before it
    assert interpret_answer(queued, "unknown") == ("unknown", "") and interpret_answer(queued, "") == ("unknown", "")
    assert interpret_answer(queued, "three") == ("value", "three")
    assert interpret_answer(item("b", "job", "nurse", 0.5), "no") == ("denied", "")


def test_memory_targets_and_resolve_through_the_gate(tmp_path):
    mem, _, _ = _memory(tmp_path)
    assert isinstance(mem, Clarifiable)
    _add(mem, "c", "D1:1", "I have two dogs.")
    queued_id = _add(mem, "c", "D2:1", "Maybe we have four dogs?").queued[0]
    [target] = mem.clarification_targets("c", budget=3)
    [queued] = mem.clarification_queue("c")
    assert target["entity_id"] == queued_id and target["gain"] == pytest.approx(queued["rho"]) and "'2'" in target["question"]
    # "unknown" settles nothing: still queued, asked once
    assert mem.resolve_clarification("c", queued_id, "unknown").stored == [] and len(mem.clarification_queue("c")) == 1
    report = mem.resolve_clarification("c", queued_id, "yes")
    # the answer went through the gate's belief update (an LLM assessment: two competing values) and the conflict check
    assert report.usage.by_purpose["belief"]["calls"] == 1
    assert mem.gate.stats["assessed"] == 3 and mem.gate.stats["committed"] == 2
    assert [e.verdict for e in report.updated] == ["update"] and mem.clarification_queue("c") == []
    [held] = mem._spaces["c"].graph.entities()
    assert held.text == "Ana has 4 dogs" and held.directness == 1.0 and held.belief[max(held.belief, key=held.belief.get)] > 0.5
    assert [h.get("event") for h in held.history[:2]] == ["asked", "clarified"] and held.history[1]["answer"] == "yes"


def test_resolve_no_keeps_the_held_value_and_unknown_id_fails(tmp_path):
    mem, _, _ = _memory(tmp_path)
    _add(mem, "c", "D1:1", "I have two dogs.")
    queued_id = _add(mem, "c", "D2:1", "Maybe we have four dogs?").queued[0]
    report = mem.resolve_clarification("c", queued_id, "no")  # the old value '2' stands: nothing new is stored
    assert report.stored == [] and mem.clarification_queue("c") == []
    assert [s.text for s in mem.stored_items("c")] == ["Ana has 2 dogs"]
    assert mem.rejected_entities("c")[-1].history[-1]["event"] == "held_value_confirmed"
    with pytest.raises(KeyError, match="no queued entity"):
        mem.resolve_clarification("c", queued_id, "yes")


def test_command_prints_queue_and_targets_from_stored_memory(tmp_path, capsys):
    mem, _, _ = _memory(tmp_path)
    _add(mem, "c", "D1:1", "I have two dogs.")
    queued_id = _add(mem, "c", "D2:1", "Maybe we have four dogs?").queued[0]
    assert main([str(tmp_path), "--budget", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [t["entity_id"] for t in out["c"]["targets"]] == [queued_id] and len(out["c"]["queue"]) == 1
    assert main([str(tmp_path), "--namespace", "c"]) == 0
    assert "target 1: " + queued_id in capsys.readouterr().out
