"""The read path's hits beyond the retriever's, and how each hit reads to the answerer.

``with_turn_matches`` (``retrieval.match_source_turns``): a held entity is also found through the turns it came from.
``superseded_hits`` (``superseded: mark``): superseded entities come back beside the current ones.
``render`` and ``source_turns`` (``retrieval.with_source_turns``): the text of a hit, with its time, a disputed or
outdated mark and, once per search, the source turns it cites. Kept apart from ``mosaic.memory``'s ranking so
what the answerer is shown is decided in one place.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mosaic.entity import Entity
from mosaic.namespace import Namespace


def superseded_hits(space: Namespace, query_vector: Any, search_weight: float) -> list[tuple[float, Entity]]:
    """``superseded: mark``: every superseded entity scored by its similarity alone (it has no node score: it left the
    graph), over an exact scan, since the retriever indexes what is believed now."""
    old = [e for e in space.graph.entities(include_inactive=True) if e.status == "superseded"]
    if not old:
        return []
    sims = np.vstack([space.graph.vector(e.entity_id) for e in old]) @ np.asarray(query_vector, dtype=np.float32)
    floor = space.retriever.min_similarity
    return [((1 - search_weight) * float(sim), e) for e, sim in zip(old, sims) if sim >= floor]


def with_turn_matches(space: Namespace, query_vector: Any, hits: list[tuple[str, float]], pool: int) -> list[tuple[str, float]]:
    """Provenance matching: a held entity's similarity is the best of its own text's and its source turns'.

    The ``pool`` turns nearest the query bring in the held (active or flagged) entities extracted from
    them; a turn none of whose entities is held brings nothing (memory answers from what it believes),
    and superseded entities stay out as in every search."""
    turns = space.retriever.turns
    best = dict(hits)
    for turn_id, similarity in turns.search(query_vector, pool):
        for entity_id in turns.held.get(turn_id, ()):
            if similarity > best.get(entity_id, float("-inf")):
                best[entity_id] = similarity
                space.retriever.stats["turn_matches"] += 1
    return sorted(best.items(), key=lambda pair: -pair[1])


def source_turns(space: Namespace, entity: Entity, shown: set[str]) -> str:
    """The texts of ``entity``'s source turns not yet shown with a better-ranked entity (then marked shown).

    Only retrieved (active or flagged) entities cite turns, so a superseded fact never brings its
    own turn in; the answerer's shared budget still applies to the longer items."""
    quotes = []
    for turn_id in entity.source_turn_ids:
        turn = space.turns.get(turn_id)
        if turn is None or turn_id in shown:
            continue
        shown.add(turn_id)
        quotes.append(f'{turn["speaker"]}: "{turn["text"].strip()}"')
    return f" [said: {' | '.join(quotes)}]" if quotes else ""


def render(entity: Entity) -> str:
    """The hit's text: the entity's, its time when the text lacks it, and a disputed or outdated mark."""
    text = entity.text
    if entity.time and entity.time not in text:
        text += f" (time: {entity.time})"
    if entity.status == "flagged":
        text += " (disputed: conflicting reports held)"
    if entity.status == "superseded":
        when = next((h.get("session_time") for h in reversed(entity.history) if h.get("event") == "superseded"), None)
        text += f" (outdated: replaced by a newer memory{f' on {when[:10]}' if when else ''})"
    return text
