"""One MOSAIC namespace: its own parts (graph, communities, node scorer, retriever, conflict detector) and the
state a namespace is saved as and restored from.

Kept apart from ``mosaic.memory`` (which writes and reads through these parts) so the saved form is in one
place: ``state_of`` is what ``mosaic.store`` writes and a snapshot copies; ``load_state`` reads it back
(rebuilding communities and node scores from the graph, which the state does not keep).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from core.api import Turn
from core.embed import Embedder
from mosaic.accounting import Work
from mosaic.communities import Communities
from mosaic.conflict import ConflictDetector
from mosaic.gate import ClarificationItem
from mosaic.graph import MemoryGraph
from mosaic.retrieval import Retriever
from mosaic.scoring import NodeScorer


@dataclass
class Namespace:
    graph: MemoryGraph
    communities: Communities
    scorer: NodeScorer
    retriever: Retriever
    detector: ConflictDetector | None = None  # None when conflict.enabled is false
    queue: list[ClarificationItem] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)  # dropped newcomers, kept for audit only
    cost_log: list[dict[str, Any]] = field(default_factory=list)
    last_turn: Turn | None = None
    retriever_dirty: bool = True
    # every ingested turn's text by turn id (provenance retrieval shows the turns an entity came from)
    turns: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the counters this object had when it was restored from a snapshot: the snapshot's history (its cost
    # rows) and the rebuild on load (a Leiden run, a full refresh) are not work this namespace did since
    restored_from: Work | None = None


def state_of(space: Namespace) -> dict[str, Any]:
    """What a namespace is saved as: the graph, the clarification queue, the audit lists and the turns seen."""
    last = space.last_turn
    return {
        "graph": space.graph.to_dict(),
        "queue": [item.to_dict() for item in space.queue],
        "rejected": copy.deepcopy(space.rejected),
        "cost_log": copy.deepcopy(space.cost_log),
        "last_turn": None if last is None else {"turn_id": last.turn_id, "speaker": last.speaker, "text": last.text, "session_time": last.session_time},
        "turns": copy.deepcopy(space.turns),
    }


def load_state(space: Namespace, state: dict[str, Any], embedder: Embedder, communities: Communities, scorer: NodeScorer) -> None:
    """Fill ``space`` from a saved ``state``; ``communities`` and ``scorer`` are fresh parts, rebuilt here from the graph."""
    space.graph = MemoryGraph.from_dict(state["graph"], embedder)
    space.queue = [ClarificationItem.from_dict(q) for q in state.get("queue", [])]
    space.rejected = copy.deepcopy(state.get("rejected", []))
    space.cost_log = copy.deepcopy(state.get("cost_log", []))
    last = state.get("last_turn")
    space.last_turn = Turn(**last) if last else None
    space.turns = copy.deepcopy(state.get("turns", {}))  # absent in memories written before provenance retrieval
    space.communities = communities
    space.scorer = scorer
    everything = {e.entity_id for e in space.graph.entities()}
    if everything:
        space.communities.update(space.graph, everything)
        space.scorer.on_write(space.graph, space.communities, everything)
    space.retriever_dirty = True
