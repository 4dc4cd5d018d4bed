"""graphiti's temporal invalidations, recorded as they happen and reported as conflict events: the Zep row's
conflict signal.

graphiti expires an edge that a contradicting edge supersedes, and which edge it expires depends on the edges'
``valid_at``. ``install_invalidation_recorder`` wraps graphiti's ``_apply_temporal_invalidation`` so each decision
is recorded (into the list ``INVALIDATIONS`` holds for the episode being added); ``invalidations_to_report`` maps
them onto AddReport events as graphiti decided them: the held edge expired -> ``update``; the new edge expired
because a held edge has a later ``valid_at`` -> ``reject`` (the held fact stays current). Kept apart from
``baselines.zep`` (the adapter: event loop, graphs, snapshots) so the mapping is unit-tested without a server.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Literal

from core.api import AddReport, ConflictEvent

# Where graphiti's temporal invalidations during one add_episode are recorded.
INVALIDATIONS: contextvars.ContextVar[list["EdgeInvalidation"] | None] = contextvars.ContextVar("zep_invalidations", default=None)


@dataclass(frozen=True)
class EdgeInvalidation:
    """One temporal invalidation graphiti made while adding an episode.

    ``held_edge_expired``: the new edge's fact superseded a held edge (the held one got invalid_at).
    ``new_edge_expired``: a held edge it contradicts starts later, so graphiti expired the new edge
    and kept the held one current.
    """

    kind: Literal["held_edge_expired", "new_edge_expired"]
    new_edge_uuid: str
    new_fact: str
    held_edge_uuid: str
    held_fact: str
    held_episode_uuids: tuple[str, ...]
    new_valid_at: str | None = None
    held_valid_at: str | None = None


def invalidations_to_report(
    invalidations: list[EdgeInvalidation],
    new_source_turn_ids: list[str],
    turn_ids_of: Callable[[list[str]], list[str]],
) -> AddReport:
    """Map graphiti's invalidations onto AddReport conflict events against the held edge.

    held edge expired -> ``update`` (new information wins); new edge expired by a later-starting
    held edge -> ``reject`` (the held fact stays current, the new one is kept as history).
    ``old_source_turn_ids`` are the turns of the episodes that created the held edge.
    """
    report = AddReport()
    seen: set[tuple[str, str, str]] = set()
    for inv in invalidations:
        key = (inv.kind, inv.new_edge_uuid, inv.held_edge_uuid)
        if key in seen:
            continue
        seen.add(key)
        dates = f"held valid_at {inv.held_valid_at or 'unknown'}, new valid_at {inv.new_valid_at or 'unknown'}"
        if inv.kind == "held_edge_expired":
            verdict, target, reason = "update", report.updated, f"graphiti expired the held edge ({dates})"
        else:
            verdict, target, reason = "reject", report.rejected, f"graphiti expired the NEW edge and kept the held one current ({dates})"
        target.append(
            ConflictEvent(
                new_text=inv.new_fact,
                old_text=inv.held_fact,
                verdict=verdict,  # type: ignore[arg-type]
                reason=reason,
                new_source_turn_ids=list(new_source_turn_ids),
                old_source_turn_ids=turn_ids_of(list(inv.held_episode_uuids)),
                old_memory_id=inv.held_edge_uuid,
            )
        )
    return report


def iso(moment: datetime | None) -> str | None:
    """An edge's date as ISO text (None stays None)."""
    return moment.isoformat() if moment is not None else None


def install_invalidation_recorder() -> None:
    """Record what graphiti's ``_apply_temporal_invalidation`` decides (it returns only the held
    edges it expired; whether it expired the new edge instead is visible only on the edge)."""
    import graphiti_core.utils.maintenance.edge_operations as edge_operations

    original = edge_operations._apply_temporal_invalidation
    if getattr(original, "_mosaic_recorder", False):
        return

    def recorded(resolved_edge: Any, candidates: list[Any]) -> list[Any]:
        arrived_expired = resolved_edge.expired_at is not None or resolved_edge.invalid_at is not None
        invalidated = original(resolved_edge, candidates)
        sink = INVALIDATIONS.get()
        if sink is None:
            return invalidated
        if not arrived_expired and resolved_edge.expired_at is not None:
            superseding = [c for c in candidates if c.valid_at is not None and c.valid_at == resolved_edge.invalid_at]
            for held in superseding[:1]:
                sink.append(_invalidation("new_edge_expired", resolved_edge, held))
        for held in invalidated:
            sink.append(_invalidation("held_edge_expired", resolved_edge, held))
        return invalidated

    recorded._mosaic_recorder = True  # type: ignore[attr-defined]
    edge_operations._apply_temporal_invalidation = recorded


def _invalidation(kind: str, new: Any, held: Any) -> EdgeInvalidation:
    return EdgeInvalidation(
        kind=kind,  # type: ignore[arg-type]
        new_edge_uuid=str(new.uuid),
        new_fact=str(new.fact),
        held_edge_uuid=str(held.uuid),
        held_fact=str(held.fact),
        held_episode_uuids=tuple(held.episodes or ()),
        new_valid_at=iso(new.valid_at),
        held_valid_at=iso(held.valid_at),
    )
