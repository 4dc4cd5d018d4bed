"""What the conflict check's verdicts do to memory (mosaic/decisions.py): update supersedes the held entity and
keeps its history (handing over its edges), reject drops the newcomer, flag keeps both marked."""

from __future__ import annotations

from tests.unit.mosaic.test_gold_judge import _oracle_memory, _turn
from tests.unit.mosaic.test_memory import _add, _memory


def test_update_supersedes_old_keeps_history_and_reports(tmp_path):
    mem, llm, _ = _memory(tmp_path)
    first = _add(mem, "c", "D1:1", "I have two dogs.")
    assert [s.text for s in first.stored] == ["Ana has 2 dogs"] and first.usage.by_purpose["extraction"]["calls"] == 1
    report = _add(mem, "c", "D2:1", "We have three dogs now.", when="2023-06-08")
    [event] = report.updated
    assert (event.verdict, event.conflict_type, event.old_text, event.new_text) == ("update", "numeric", "Ana has 2 dogs", "Ana has 3 dogs")
    assert event.old_source_turn_ids == ["D1:1"] and event.new_source_turn_ids == ["D2:1"] and event.reason == "2 vs 3"
    assert [s.text for s in mem.stored_items("c")] == ["Ana has 3 dogs"]
    space = mem._spaces["c"]
    old = space.graph.entity(event.old_memory_id)
    new = space.graph.entity(report.stored[0].memory_id)
    assert old.status == "superseded" and new.history[-1]["value"] == "2" and new.history[-1]["source_turn_ids"] == ["D1:1"]
    assert report.usage.by_purpose["belief"]["calls"] == 1  # two competing values -> one LLM assessment
    hits = mem.search("c", "how many dogs does Ana have", k=3)
    assert [h.text for h in hits] == ["Ana has 3 dogs"] and hits[0].source_turn_ids == ["D2:1"]


def test_reject_drops_new_entity(tmp_path):
    mem, _, _ = _memory(tmp_path, verdict="reject")
    _add(mem, "c", "D1:1", "I have two dogs.")
    report = _add(mem, "c", "D2:1", "We have three dogs now.")
    assert report.stored == [] and [e.verdict for e in report.rejected] == ["reject"]
    assert [s.text for s in mem.stored_items("c")] == ["Ana has 2 dogs"]
    [dropped] = mem.rejected_entities("c")
    assert dropped.text == "Ana has 3 dogs" and dropped.history[-1]["event"] == "rejected"


def test_flag_marks_both_and_keeps_both_searchable(tmp_path):
    mem, _, _ = _memory(tmp_path, verdict="flag")
    _add(mem, "c", "D1:1", "I have two dogs.")
    report = _add(mem, "c", "D2:1", "We have three dogs now.")
    assert len(report.flagged) == 1 and len(report.stored) == 1
    statuses = {e.text: e.status for e in mem._spaces["c"].graph.entities()}
    assert statuses == {"Ana has 2 dogs": "flagged", "Ana has 3 dogs": "flagged"}
    assert all("disputed" in h.text for h in mem.search("c", "dogs", k=5))


def test_an_update_hands_the_old_facts_association_edges_to_its_replacement(tmp_path):
    held = [("0:p0", "Mara waters the greenhouse tomatoes every morning."),
            ("0:p1", "Mara waters the greenhouse cucumbers every morning."),
            ("0:p2", "Mara waters the greenhouse peppers every morning.")]  # fmt: skip
    new = ("1:p0", "Mara waters the greenhouse tomatoes in the evening now.", ("0:p0",))
    edges = {}
    for hand_over in (False, True):
        memory = _oracle_memory(tmp_path / str(hand_over), hand_over)
        memory.add("u", [_turn("s0", [(f, t, ()) for f, t in held])], session_time="2024-01-01")
        graph = memory._space("u").graph
        by_fact = {e.fact_id: e.entity_id for e in graph.entities()}
        old_neighbours = {graph.entity(n).fact_id for n in graph.assoc.neighbors(by_fact["0:p0"])}
        report = memory.add("u", [_turn("s1", [new])], session_time="2024-02-01")
        assert [e.old_fact_id for e in report.updated] == ["0:p0"]
        replacement = next(e.entity_id for e in graph.entities() if e.fact_id == "1:p0")
        edges[hand_over] = {graph.entity(n).fact_id for n in graph.assoc.neighbors(replacement)}
        assert old_neighbours == {"0:p1", "0:p2"}
    assert edges[True] >= {"0:p1", "0:p2"}  # the neighbours of the retired fact now meet its replacement
    assert graph.entity(next(e.entity_id for e in graph.entities(include_inactive=True) if e.fact_id == "0:p0")).status == "superseded"
