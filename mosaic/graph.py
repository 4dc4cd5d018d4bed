"""The typed entity graph G = (V, E, type) of MOSAIC (paper §3).

Two edge sets over the same entities: the prerequisite subgraph G_P (a directed graph of
logical dependency: what must be known before what) and the association subgraph G_A
(an undirected graph weighted by embedding similarity). Each entity keeps one unit-norm
embedding so the conflict checker and the retriever can find neighbours without re-encoding.
Entities that were superseded stay in ``_entities`` (their history matters) but leave G_P, G_A
and every nearest-neighbour query, so scoring and communities see only what is believed now.
"""

from __future__ import annotations

import base64
from typing import Any

import networkx as nx
import numpy as np

from core.config_check import Cosine, Size
from core.embed import Embedder
from mosaic.entity import Entity

# Statuses that take part in search, conflict checks and G_A. "flagged" stays visible on purpose:
# a flagged pair is held for review, not forgotten.
ACTIVE_STATUSES = frozenset({"active", "flagged"})
GRAPH_FORMAT = 1


class GraphFormatError(ValueError):
    """A serialised graph is missing fields or holds inconsistent data."""


class MemoryGraph:
    """Typed entity graph: nodes are Entity; ``prereq`` = G_P (nx.DiGraph), ``assoc`` = G_A (nx.Graph).

    ``add_entity`` links the newcomer in G_A to at most ``assoc_top_n`` active entities whose cosine
    similarity reaches ``assoc_threshold``; edge attribute ``weight`` is that similarity.
    """

    def __init__(self, embedder: Embedder, assoc_threshold: Cosine = 0.5, assoc_top_n: Size = 5) -> None:
        self.embedder = embedder
        self.assoc_threshold = float(assoc_threshold)
        self.assoc_top_n = int(assoc_top_n)
        self.prereq: nx.DiGraph = nx.DiGraph()
        self.assoc: nx.Graph = nx.Graph()
        self._entities: dict[str, Entity] = {}
        self._vectors: dict[str, np.ndarray] = {}

    # -- reading ---------------------------------------------------------------------
    def __contains__(self, entity_id: object) -> bool:
        return entity_id in self._entities

    def __len__(self) -> int:
        return sum(1 for e in self._entities.values() if e.status in ACTIVE_STATUSES)

    def entity(self, entity_id: str) -> Entity:
        try:
            return self._entities[entity_id]
        except KeyError:
            raise KeyError(f"no entity {entity_id!r} in the memory graph") from None

    def entities(self, include_inactive: bool = False) -> list[Entity]:
        return [e for e in self._entities.values() if include_inactive or e.status in ACTIVE_STATUSES]

    def vector(self, entity_id: str) -> np.ndarray:
        try:
            return self._vectors[entity_id]
        except KeyError:
            raise KeyError(f"no vector for entity {entity_id!r} in the memory graph") from None

    def embed(self, text: str) -> np.ndarray:
        """Unit-norm embedding of ``text`` with the graph's embedder (used for queries and newcomers)."""
        return _unit(self.embedder.encode([text])[0])

    def matrix(self) -> tuple[list[str], np.ndarray]:
        """Ids and an (n, dim) float32 matrix of the active entities, in insertion order."""
        ids = [e.entity_id for e in self._entities.values() if e.status in ACTIVE_STATUSES]
        if not ids:
            return [], np.zeros((0, self.embedder.dim), dtype=np.float32)
        return ids, np.vstack([self._vectors[i] for i in ids]).astype(np.float32)

    def nearest(
        self, vector: np.ndarray, k: int, exclude: set[str] | frozenset[str] = frozenset()
    ) -> list[tuple[Entity, float]]:
        """The ``k`` active entities most cosine-similar to ``vector``, best first."""
        ids, mat = self.matrix()
        if not ids or k <= 0:
            return []
        sims = mat @ _unit(np.asarray(vector, dtype=np.float32))
        order = np.argsort(-sims, kind="stable")
        out: list[tuple[Entity, float]] = []
        for idx in order:
            if ids[idx] in exclude:
                continue
            out.append((self._entities[ids[idx]], float(sims[idx])))
            if len(out) == k:
                break
        return out

    def neighbours(self, entity_id: str) -> list[Entity]:
        """Union of G_P neighbours (both directions) and G_A neighbours, active ones only."""
        ids: set[str] = set()
        if entity_id in self.prereq:
            ids.update(self.prereq.predecessors(entity_id))
            ids.update(self.prereq.successors(entity_id))
        if entity_id in self.assoc:
            ids.update(self.assoc.neighbors(entity_id))
        ids.discard(entity_id)
        return [self._entities[i] for i in sorted(ids) if self._entities[i].status in ACTIVE_STATUSES]

    # -- writing ---------------------------------------------------------------------
    def add_entity(self, entity: Entity, vector: np.ndarray | None = None) -> set[str]:
        """Insert ``entity`` and link it in G_A; returns ids whose neighbourhood changed (incl. the new one)."""
        if entity.entity_id in self._entities:
            raise ValueError(f"entity id {entity.entity_id!r} is already in the memory graph")
        vec = self.embed(entity.text) if vector is None else _unit(np.asarray(vector, dtype=np.float32))
        links = self.nearest(vec, self.assoc_top_n) if entity.status in ACTIVE_STATUSES else []
        self._entities[entity.entity_id] = entity
        self._vectors[entity.entity_id] = vec
        changed = {entity.entity_id}
        if entity.status in ACTIVE_STATUSES:
            self.prereq.add_node(entity.entity_id)
            self.assoc.add_node(entity.entity_id)
            for other, sim in links:
                if sim >= self.assoc_threshold:
                    self.assoc.add_edge(entity.entity_id, other.entity_id, weight=sim)
                    changed.add(other.entity_id)
        return changed

    def add_prerequisite(self, src_id: str, dst_id: str) -> set[str]:
        """Record that ``src_id`` must be known before ``dst_id`` (edge src -> dst in G_P)."""
        for node in (src_id, dst_id):
            if node not in self._entities:
                raise KeyError(f"no entity {node!r} in the memory graph")
            if node not in self.prereq:
                raise ValueError(f"entity {node!r} is {self._entities[node].status}; only active entities take prerequisites")
        if src_id == dst_id or self.prereq.has_edge(src_id, dst_id):
            return set()
        self.prereq.add_edge(src_id, dst_id)
        return {src_id, dst_id}

    def set_status(self, entity_id: str, status: str) -> set[str]:
        """Change an entity's status; leaving the active set drops its G_A edges. Returns changed ids."""
        entity = self.entity(entity_id)
        was_active = entity.status in ACTIVE_STATUSES
        entity.status = status  # type: ignore[assignment]
        now_active = status in ACTIVE_STATUSES
        changed = {entity_id}
        if was_active and not now_active:
            for graph in (self.prereq, self.assoc):
                if entity_id in graph:
                    changed.update(nx.all_neighbors(graph, entity_id))
                    graph.remove_node(entity_id)
        elif now_active and not was_active:
            self.prereq.add_node(entity_id)
            self.assoc.add_node(entity_id)
            for other, sim in self.nearest(self._vectors[entity_id], self.assoc_top_n, exclude={entity_id}):
                if sim >= self.assoc_threshold:
                    self.assoc.add_edge(entity_id, other.entity_id, weight=sim)
                    changed.add(other.entity_id)
        return changed

    def transfer_prerequisites(self, old_id: str, new_id: str) -> set[str]:
        """Give ``new_id`` the G_P edges of ``old_id`` (used when a newer entity supersedes an older one)."""
        changed: set[str] = set()
        if old_id not in self.prereq:
            return changed
        for pred in list(self.prereq.predecessors(old_id)):
            if pred != new_id:
                changed |= self.add_prerequisite(pred, new_id)
        for succ in list(self.prereq.successors(old_id)):
            if succ != new_id:
                changed |= self.add_prerequisite(new_id, succ)
        return changed

    def transfer_associations(self, old_id: str, new_id: str) -> set[str]:
        """Give ``new_id`` the G_A edges of ``old_id`` (its replacement), each with the weight it had, keeping a heavier
        edge ``new_id`` already has. Without this a supersession cuts the old entity's neighbours off from the fact
        that now stands for it, and communities and PageRank move for memories no update touched."""
        changed: set[str] = set()
        if old_id not in self.assoc or new_id not in self.assoc:
            return changed
        for other, data in list(self.assoc[old_id].items()):
            if other == new_id:
                continue
            weight = float(data.get("weight", 0.0))
            if not self.assoc.has_edge(new_id, other) or self.assoc[new_id][other].get("weight", 0.0) < weight:
                self.assoc.add_edge(new_id, other, weight=weight)
                changed |= {new_id, other}
        return changed

    def remove_entity(self, entity_id: str) -> set[str]:
        """Delete an entity and all its edges; returns the ids whose neighbourhood changed."""
        self.entity(entity_id)
        changed = {entity_id}
        for graph in (self.prereq, self.assoc):
            if entity_id in graph:
                changed.update(nx.all_neighbors(graph, entity_id))
                graph.remove_node(entity_id)
        del self._entities[entity_id]
        del self._vectors[entity_id]
        return changed

    # -- (de)serialisation -----------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": GRAPH_FORMAT,
            "assoc_threshold": self.assoc_threshold,
            "assoc_top_n": self.assoc_top_n,
            "dim": int(self.embedder.dim),
            "entities": [e.to_dict() for e in self._entities.values()],
            "vectors": {i: base64.b64encode(v.astype(np.float32).tobytes()).decode("ascii") for i, v in self._vectors.items()},
            "prereq_edges": [[s, d] for s, d in self.prereq.edges()],
            "assoc_edges": [[a, b, float(w)] for a, b, w in self.assoc.edges(data="weight")],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], embedder: Embedder) -> "MemoryGraph":
        """Rebuild a graph, checking every field; raises GraphFormatError naming what is wrong."""
        for key in ("format", "entities", "vectors", "prereq_edges", "assoc_edges"):
            if key not in data:
                raise GraphFormatError(f"graph data lacks field {key!r}")
        if data["format"] != GRAPH_FORMAT:
            raise GraphFormatError(f"graph format {data['format']!r} is not supported (expected {GRAPH_FORMAT})")
        graph = cls(embedder, data.get("assoc_threshold", 0.5), data.get("assoc_top_n", 5))
        dim = int(data.get("dim", embedder.dim))
        for i, raw in enumerate(data["entities"]):
            try:
                entity = Entity.from_dict(raw)
            except TypeError as err:
                raise GraphFormatError(f"graph entity #{i} does not match Entity: {err}") from err
            if entity.entity_id in graph._entities:
                raise GraphFormatError(f"graph entity id {entity.entity_id!r} appears twice")
            blob = data["vectors"].get(entity.entity_id)
            if blob is None:
                raise GraphFormatError(f"graph entity {entity.entity_id!r} has no vector")
            vec = np.frombuffer(base64.b64decode(blob), dtype=np.float32)
            if vec.shape != (dim,):
                raise GraphFormatError(f"vector of {entity.entity_id!r} has shape {vec.shape}, expected ({dim},)")
            graph._entities[entity.entity_id] = entity
            graph._vectors[entity.entity_id] = vec.copy()
            if entity.status in ACTIVE_STATUSES:
                graph.prereq.add_node(entity.entity_id)
                graph.assoc.add_node(entity.entity_id)
        for edge in data["prereq_edges"]:
            if len(edge) != 2 or any(node not in graph.prereq for node in edge):
                raise GraphFormatError(f"prerequisite edge {edge!r} names an unknown or inactive entity")
            graph.prereq.add_edge(edge[0], edge[1])
        for edge in data["assoc_edges"]:
            if len(edge) != 3 or any(node not in graph.assoc for node in edge[:2]):
                raise GraphFormatError(f"association edge {edge!r} names an unknown or inactive entity")
            graph.assoc.add_edge(edge[0], edge[1], weight=float(edge[2]))
        return graph


def _unit(vec: np.ndarray) -> np.ndarray:
    vec = np.asarray(vec, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(vec))
    return vec / norm if norm > 0 else vec
