"""What the conflict check's verdicts do to memory: the write path's last step for one new entity.

``update``: the new entity is stored, the held one is superseded (kept, with its history copied onto its
replacement, its prerequisite edges and, with ``hand_over_edges``, its association edges handed over);
``reject``: the new entity is dropped (kept for audit only); ``flag``: both are stored, marked for review.
A decision about a held entity that an earlier decision of the same write already retired is stale and skipped.
Kept apart from ``mosaic.memory`` (which asks the detector) so the verdicts' meaning is in one place.
"""

from __future__ import annotations

from typing import Any

from core.api import AddReport, ConflictEvent, StoredItem
from core.tally import Tally
from mosaic.conflict import ConflictDecision
from mosaic.entity import Entity
from mosaic.graph import ACTIVE_STATUSES
from mosaic.namespace import Namespace


def conflict_event(new: Entity, old: Entity, decision: ConflictDecision) -> ConflictEvent:
    """The AddReport event of one decision, with both entities' texts, sources and fact ids."""
    return ConflictEvent(
        new_text=new.text,
        old_text=old.text,
        verdict=decision.verdict,
        conflict_type=decision.conflict_type,
        reason=decision.reason,
        new_source_turn_ids=list(new.source_turn_ids),
        old_source_turn_ids=list(old.source_turn_ids),
        old_memory_id=old.entity_id,
        new_fact_id=new.fact_id,
        old_fact_id=old.fact_id,
    )


def apply_decisions(
    space: Namespace, entity: Entity, vector: Any, decisions: list[ConflictDecision], report: AddReport, stats: Tally,
    hand_over_edges: bool,
) -> set[str] | None:
    """Store ``entity`` as its decisions say and record them in ``report``; returns the changed ids, or None if rejected."""
    graph = space.graph
    live = []
    for d in decisions:
        if d.old_id in graph and graph.entity(d.old_id).status in ACTIVE_STATUSES:
            live.append(d)
        else:
            stats.add("stale_decisions")
    rejects = [d for d in live if d.verdict == "reject"]
    if rejects:
        for d in rejects:
            report.rejected.append(conflict_event(entity, graph.entity(d.old_id), d))
        entity.history.append({"event": "rejected", "by": [d.old_id for d in rejects], "reason": rejects[0].reason})
        space.rejected.append(entity.to_dict())
        stats.add("rejected")
        return None
    flags = [d for d in live if d.verdict == "flag"]
    if flags:
        entity.status = "flagged"
    changed = graph.add_entity(entity, vector)
    for d in live:
        old = graph.entity(d.old_id)
        event = conflict_event(entity, old, d)
        if d.verdict == "update":
            entity.history.extend(old.history)
            entity.history.append({
                "entity_id": old.entity_id, "text": old.text, "value": old.value, "confidence": old.confidence,
                "session_time": old.session_time, "source_turn_ids": list(old.source_turn_ids),
                "belief": dict(old.belief), "superseded_by": entity.entity_id,
                "conflict_type": d.conflict_type, "reason": d.reason,
            })
            old.history.append({"event": "superseded", "by": entity.entity_id, "reason": d.reason, "session_time": entity.session_time})
            changed |= graph.transfer_prerequisites(old.entity_id, entity.entity_id)
            if hand_over_edges:
                changed |= graph.transfer_associations(old.entity_id, entity.entity_id)
            changed |= graph.set_status(old.entity_id, "superseded")
            report.updated.append(event)
            stats.add("updated")
        elif d.verdict == "flag":
            old.history.append({"event": "flagged", "with": entity.entity_id, "reason": d.reason, "session_time": entity.session_time})
            entity.history.append({"event": "flagged", "with": old.entity_id, "reason": d.reason})
            changed |= graph.set_status(old.entity_id, "flagged")
            report.flagged.append(event)
            stats.add("flagged")
    report.stored.append(StoredItem(entity.entity_id, entity.text, list(entity.source_turn_ids), entity.fact_id))
    stats.add("committed")
    return changed
