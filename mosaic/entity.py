"""The unit of MOSAIC memory: a typed entity extracted from a turn."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Literal

EntityType = Literal["event", "persona", "relationship"]


@dataclass
class Entity:
    """One extracted memory entity (paper §3), as stored in the graph and the store.

    ``subject``/``attribute``/``value`` let the conflict checker compare like with like;
    ``directness``/``consistency``/``specificity`` are the confidence-gate factors in [0, 1].
    """

    entity_id: str
    text: str
    type: EntityType
    subject: str = ""
    attribute: str = ""
    value: str = ""
    time: str | None = None  # resolved absolute date/time of what the entity describes
    evidence: str = ""  # the span of the source turn it came from
    source_turn_ids: list[str] = field(default_factory=list)
    session_time: str | None = None  # when it was said (for recency in conflict resolution)
    directness: float = 1.0
    consistency: float = 1.0
    specificity: float = 1.0
    confidence: float = 1.0  # rho
    importance: float = 0.5
    belief: dict[str, float] = field(default_factory=dict)  # candidate value -> probability
    history: list[dict[str, Any]] = field(default_factory=list)  # earlier values, with why they changed
    status: Literal["active", "superseded", "flagged", "queued"] = "active"
    fact_id: str | None = None  # oracle extractor: the benchmark's gold fact it was made from (None: LLM-extracted)
    gold_replaces: list[str] = field(default_factory=list)  # oracle judge: gold fact ids this fact replaces (OracleFact.replaces)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Entity":
        return cls(**data)


def evidence_strength(entity: Entity, w_directness: float = 0.4, w_specificity: float = 0.3) -> float:
    """How much one statement is worth as evidence: directness and specificity only.

    Consistency (agreement with held values) is left out on purpose: a correction always
    disagrees with what is held, so counting it would make every newer correction look weaker.
    """
    total = w_directness + w_specificity
    return (w_directness * entity.directness + w_specificity * entity.specificity) / total if total > 0 else 1.0


def resolve_by_evidence(
    new: Entity, old: Entity, reject_margin: float = 0.2, strength: Callable[[Entity], float] = evidence_strength
) -> str:
    """The policy for a real conflict: newer and at least as strong evidence -> "update"; held
    evidence stronger by ``reject_margin`` or more -> "reject" (the newcomer is dropped); else "flag".

    ``new`` is the statement arriving now and ``old`` one held before it, so within one session (equal session times:
    every oracle fact of a session carries the session's start) arrival order makes ``new`` the newer one; only a
    strictly earlier session time (a late-written older statement) makes it older."""
    strength_new, strength_old = strength(new), strength(old)
    if strength_old - strength_new >= reject_margin:
        return "reject"
    newer = bool(new.session_time and (not old.session_time or new.session_time >= old.session_time))
    return "update" if newer and strength_new >= strength_old else "flag"
