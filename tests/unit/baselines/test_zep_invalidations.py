"""graphiti's temporal invalidation -> AddReport (baselines/zep_invalidations.py), without an LLM or a server.

The tests run graphiti's own ``_apply_temporal_invalidation`` on hand-made edges, so they check which edge
graphiti expires and that the report names that edge, not a stand-in. Needs the ``zep`` extra (graphiti-core).
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

pytest.importorskip("graphiti_core", reason="needs the `zep` extra: pip install -e '.[zep]'")

from baselines import zep_graphiti, zep_invalidations  # noqa: E402

JAN = datetime(2024, 1, 10, tzinfo=timezone.utc)
MAR = datetime(2024, 3, 2, tzinfo=timezone.utc)
TURNS = {"ep-old": "ctx:1", "ep-new": "P:2"}.get


def _edge(uuid: str, fact: str, valid: datetime | None, episodes: list[str]):
    zep_graphiti.graphiti_environment()
    from graphiti_core.edges import EntityEdge

    return EntityEdge(
        uuid=uuid, group_id="g", source_node_uuid="a", target_node_uuid="b", name="LIVES_IN", fact=fact,
        episodes=episodes, created_at=datetime(2024, 1, 1, tzinfo=timezone.utc), valid_at=valid,
    )  # fmt: skip


def _invalidate(new, held):
    """Run graphiti's own invalidation step with the adapter's recorder installed; return the records."""
    import graphiti_core.utils.maintenance.edge_operations as ops

    zep_invalidations.install_invalidation_recorder()
    records: list[zep_invalidations.EdgeInvalidation] = []
    token = zep_invalidations.INVALIDATIONS.set(records)
    try:
        ops._apply_temporal_invalidation(new, [held])
    finally:
        zep_invalidations.INVALIDATIONS.reset(token)
    return records


def _turn_ids(uuids: list[str]) -> list[str]:
    return [TURNS(u) for u in uuids if TURNS(u)]


def test_newer_fact_expires_the_held_edge_and_maps_to_an_update():
    held = _edge("e-old", "Ann lives in Paris", JAN, ["ep-old"])
    new = _edge("e-new", "Ann lives in Berlin", MAR, ["ep-new"])
    records = _invalidate(new, held)
    assert held.invalid_at == MAR and held.expired_at is not None and new.expired_at is None  # what graphiti did
    assert [r.kind for r in records] == ["held_edge_expired"]
    report = zep_invalidations.invalidations_to_report(records, ["P:2"], _turn_ids)
    assert not report.rejected and len(report.updated) == 1
    event = report.updated[0]
    assert (event.verdict, event.old_memory_id, event.old_text, event.new_text) == ("update", "e-old", "Ann lives in Paris", "Ann lives in Berlin")
    assert event.old_source_turn_ids == ["ctx:1"] and event.new_source_turn_ids == ["P:2"]


def test_held_edge_starting_later_expires_the_new_edge_and_maps_to_a_reject():
    # the trap seen live: the correction's valid_at is earlier than the held fact's, so graphiti
    # expires the NEW edge and keeps the old fact current; the report must not call that an update
    held = _edge("e-old", "Ann lives in Paris", MAR, ["ep-old"])
    new = _edge("e-new", "Ann lives in Berlin", JAN, ["ep-new"])
    records = _invalidate(new, held)
    assert new.expired_at is not None and new.invalid_at == MAR and held.expired_at is None
    assert [r.kind for r in records] == ["new_edge_expired"]
    report = zep_invalidations.invalidations_to_report(records, ["P:2"], _turn_ids)
    assert not report.updated and [e.verdict for e in report.rejected] == ["reject"]
    assert report.rejected[0].old_memory_id == "e-old" and report.rejected[0].old_source_turn_ids == ["ctx:1"]
    assert "NEW edge" in report.rejected[0].reason


def test_no_contradiction_and_undated_edges_raise_no_event():
    held = _edge("e-old", "Ann lives in Paris", None, ["ep-old"])
    new = _edge("e-new", "Ann likes tea", None, ["ep-new"])
    assert _invalidate(new, held) == []
    assert zep_invalidations.invalidations_to_report([], ["P:2"], _turn_ids).conflict_events == []


def test_an_edge_that_arrives_with_an_end_date_is_history_not_a_conflict():
    held = _edge("e-old", "Ann lives in Paris", MAR, ["ep-old"])
    new = _edge("e-new", "Ann lived in Rome", JAN, ["ep-new"])
    new.invalid_at = datetime(2024, 2, 1, tzinfo=timezone.utc)  # the extractor dated its end
    assert [r.kind for r in _invalidate(new, held)] == []


def test_duplicate_records_map_to_one_event():
    record = zep_invalidations.EdgeInvalidation("held_edge_expired", "n", "new", "h", "held", ("ep-old",))
    assert len(zep_invalidations.invalidations_to_report([record, record], ["P:2"], _turn_ids).updated) == 1
