"""Leiden communities over the association graph G_A, kept current as the graph grows.

Running Leiden on every write would make each write cost O(|V| + |E|). Instead a new node
joins, at once, the community its heaviest neighbours belong to (a local move), and Leiden
is re-run, seeded with the current membership as ``initial_membership``, only when enough of
the graph has changed since the last run (``rerun_fraction`` of |V|) or every
``rerun_every`` updates. Leiden gets a fixed ``seed``, so the partition is deterministic.

Local re-runs, from ``local_from_nodes`` nodes on: a community whose own changed-node count
reaches ``local_rerun_fraction`` of its size is re-partitioned alone (Leiden on the subgraph of
its members; it may split, the largest part keeps its id), and the global re-run waits until
``backstop_rerun_fraction`` of |V| changed. A global re-run costs O(|V| + |E|) and Leiden's cost
per node grows with |V|, so at 5% of |V| its share per write grows with the graph; a local one
costs the size of one community, so the amortised community cost per write stops depending on
|V| (measured in research/bench_scaling.py). Below ``local_from_nodes`` a global re-run is cheap
(about 0.1 s at 1k nodes) and communities behave exactly as without local re-runs.

A local re-run optimises the *global* modularity, not the subgraph's own: the subgraph's
configuration null model would count only edges inside the community, so Leiden would split a
planted community that has no internal structure. Constant Potts with each node's size set to its
strength in the whole of G_A and resolution gamma / (sum of strengths) has, on a split of one
community, the same quality differences as the global RB-configuration modularity; a community is
split only where that raises global modularity. Node strengths and their sum are kept per write
from the changed nodes (local) and recomputed exactly at every global re-run.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Annotated, Literal, Protocol

import igraph as ig
import leidenalg
import networkx as nx
from pydantic import Field

from core.config_check import Count, Positive, Size, Weight


def weighted_igraph(assoc: nx.Graph, ids: list[str]) -> ig.Graph:
    """The subgraph of ``assoc`` on ``ids`` as an igraph (vertex i = ids[i]) with edge weights (default 1)."""
    index = {entity_id: i for i, entity_id in enumerate(ids)}
    sub = assoc.subgraph(ids)
    graph = ig.Graph(n=len(ids), edges=[(index[a], index[b]) for a, b in sub.edges])
    graph.es["weight"] = [float(data.get("weight", 1.0)) for _, _, data in sub.edges(data=True)]
    return graph


class HasAssociationGraph(Protocol):
    """The part of MemoryGraph that communities need."""

    assoc: nx.Graph


class Communities:
    """Community membership of every node of ``graph.assoc`` (paper §3)."""

    def __init__(
        self,
        resolution: Positive = 1.0,
        seed: Size = 0,
        rerun_fraction: Annotated[float, Field(gt=0, le=1)] = 0.05,
        rerun_every: Size = 0,  # 0: never by count
        min_nodes_for_rerun: Size = 1,
        n_iterations: Count | Literal[-1] = 2,  # Leiden passes; -1: until stable
        local_rerun_fraction: Weight = 0.5,  # 0 turns local re-runs off
        local_min_size: Count = 8,
        local_from_nodes: Size = 2000,
        backstop_rerun_fraction: Positive = 1.0,
    ) -> None:
        self.resolution = resolution
        self.seed = seed
        self.rerun_fraction = rerun_fraction
        self.rerun_every = rerun_every
        self.min_nodes_for_rerun = min_nodes_for_rerun
        self.n_iterations = n_iterations
        self.local_rerun_fraction = local_rerun_fraction
        self.local_min_size = local_min_size
        self.local_from_nodes = local_from_nodes
        self.backstop_rerun_fraction = backstop_rerun_fraction
        self._strength: dict[str, float] = {}  # weighted degree in G_A, for the local re-runs' null model
        self._total_strength = 0.0
        self._dirty_by_community: dict[int, int] = defaultdict(int)
        self._membership: dict[str, int] = {}
        self._members: dict[int, set[str]] = defaultdict(set)
        self._next_id = 0
        self._dirty = 0
        self._updates_since_run = 0
        self.version = 0  # bumped whenever membership changes, so indexes know to rebuild
        self.stats: dict[str, int] = {"leiden_runs": 0, "local_assignments": 0, "updates": 0, "local_reruns": 0}

    # ---- queries -------------------------------------------------------------------------
    def of(self, entity_id: str) -> int:
        """Community of ``entity_id``; raises KeyError for a node never seen by ``update``."""
        return self._membership[entity_id]

    def get(self, entity_id: str, default: int = -1) -> int:
        return self._membership.get(entity_id, default)

    def members(self, community: int) -> list[str]:
        return sorted(self._members.get(community, ()))

    def all(self) -> dict[int, list[str]]:
        """Every non-empty community and its members (sorted, for determinism)."""
        return {c: sorted(ids) for c, ids in sorted(self._members.items()) if ids}

    def __len__(self) -> int:
        return sum(1 for ids in self._members.values() if ids)

    # ---- updates -------------------------------------------------------------------------
    def update(self, graph: HasAssociationGraph, changed: set[str]) -> None:
        """Bring membership up to date after ``changed`` nodes gained/lost edges or appeared."""
        assoc = graph.assoc
        self.stats["updates"] += 1
        if not self._membership:
            self.rerun(graph)
            return
        for entity_id in sorted(changed):
            if entity_id not in assoc:
                self._drop(entity_id)
            elif entity_id not in self._membership:
                self._assign_locally(assoc, entity_id)
            self._track_strength(assoc, entity_id)
        self._dirty += len(changed)
        self._updates_since_run += 1
        n_nodes = assoc.number_of_nodes()
        local = self.local_active(n_nodes)
        if local:
            self._local_reruns(assoc, changed)
        fraction = self.backstop_rerun_fraction if local else self.rerun_fraction
        due_by_fraction = self._dirty >= fraction * n_nodes
        due_by_count = self.rerun_every > 0 and self._updates_since_run >= self.rerun_every
        if n_nodes >= self.min_nodes_for_rerun and (due_by_fraction or due_by_count):
            self.rerun(graph)

    def local_active(self, n_nodes: int) -> bool:
        """Whether communities are kept with local re-runs (and the wider global backstop) at this size."""
        return self.local_rerun_fraction > 0 and n_nodes >= self.local_from_nodes

    def rerun(self, graph: HasAssociationGraph) -> None:
        """Run Leiden over the whole of G_A, starting from the current membership when there is one."""
        assoc = graph.assoc
        ids = sorted(assoc.nodes)
        self._dirty = 0
        self._dirty_by_community = defaultdict(int)
        self._updates_since_run = 0
        self._strength = {entity_id: float(strength) for entity_id, strength in assoc.degree(weight="weight")}
        self._total_strength = sum(self._strength.values())
        if not ids:
            self._set_membership({})
            return
        index = {entity_id: i for i, entity_id in enumerate(ids)}
        edges = [(index[a], index[b]) for a, b in assoc.edges]
        weights = [float(data.get("weight", 1.0)) for _, _, data in assoc.edges(data=True)]
        igraph = ig.Graph(n=len(ids), edges=edges)
        igraph.es["weight"] = weights
        initial = self._initial_membership(ids)
        partition = leidenalg.find_partition(
            igraph,
            leidenalg.RBConfigurationVertexPartition,
            weights="weight",
            resolution_parameter=self.resolution,
            initial_membership=initial,
            n_iterations=self.n_iterations,
            seed=self.seed,
        )
        self._set_membership({entity_id: int(c) for entity_id, c in zip(ids, partition.membership)})
        self.stats["leiden_runs"] += 1

    # ---- internals -----------------------------------------------------------------------
    def _local_reruns(self, assoc: nx.Graph, changed: set[str]) -> None:
        """Count changes per community; re-partition alone each community that changed enough."""
        due = set()
        for entity_id in changed:
            community = self._membership.get(entity_id)
            if community is None:
                continue
            self._dirty_by_community[community] += 1
            size = len(self._members.get(community, ()))
            if size >= self.local_min_size and self._dirty_by_community[community] >= self.local_rerun_fraction * size:
                due.add(community)
        for community in sorted(due):
            self._rerun_one(assoc, community)

    def _track_strength(self, assoc: nx.Graph, entity_id: str) -> None:
        """Keep ``entity_id``'s weighted degree and the sum over G_A current (O(its degree))."""
        old = self._strength.pop(entity_id, 0.0)
        new = float(assoc.degree(entity_id, weight="weight")) if entity_id in assoc else 0.0
        if entity_id in assoc:
            self._strength[entity_id] = new
        self._total_strength += new - old

    def _rerun_one(self, assoc: nx.Graph, community: int) -> None:
        """Re-partition one community by the global modularity (see the module docstring)."""
        ids = sorted(self._members.get(community, ()))
        self._dirty_by_community[community] = 0
        if self._total_strength <= 0:
            return
        igraph = weighted_igraph(assoc, ids)
        partition = leidenalg.find_partition(
            igraph, leidenalg.CPMVertexPartition, weights="weight",
            node_sizes=[self._strength.get(entity_id, 0.0) for entity_id in ids],
            resolution_parameter=self.resolution / self._total_strength,
            n_iterations=self.n_iterations, seed=self.seed,
        )
        parts = sorted(partition, key=lambda part: (-len(part), min(part)))
        for part in parts[1:]:  # the largest part keeps the community's id, the others get fresh ids
            label = self._next_id
            self._next_id += 1
            for i in part:
                self._members[community].discard(ids[i])
                self._membership[ids[i]] = label
                self._members[label].add(ids[i])
        self.stats["local_reruns"] += 1
        if len(parts) > 1:
            self.version += 1

    def _initial_membership(self, ids: list[str]) -> list[int] | None:
        """Current membership renumbered 0..k-1 (unknown nodes get fresh singletons), or None."""
        if not self._membership:
            return None
        renumber: dict[int, int] = {}
        initial = []
        for entity_id in ids:
            key = self._membership.get(entity_id)
            label = ("new", entity_id) if key is None else key
            initial.append(renumber.setdefault(label, len(renumber)))  # type: ignore[arg-type]
        return initial

    def _set_membership(self, membership: dict[str, int]) -> None:
        self._membership = membership
        self._members = defaultdict(set)
        for entity_id, community in membership.items():
            self._members[community].add(entity_id)
        self._next_id = max(membership.values(), default=-1) + 1
        self.version += 1

    def _assign_locally(self, assoc: nx.Graph, entity_id: str) -> None:
        """Join the community with the largest total edge weight to this node, else a new singleton."""
        weight_by_community: dict[int, float] = defaultdict(float)
        for neighbour, data in assoc[entity_id].items():
            community = self._membership.get(neighbour)
            if community is not None:
                weight_by_community[community] += float(data.get("weight", 1.0))
        if weight_by_community:
            community = max(sorted(weight_by_community), key=lambda c: weight_by_community[c])
        else:
            community = self._next_id
            self._next_id += 1
        self._membership[entity_id] = community
        self._members[community].add(entity_id)
        self.stats["local_assignments"] += 1
        self.version += 1

    def _drop(self, entity_id: str) -> None:
        community = self._membership.pop(entity_id, None)
        if community is not None:
            self._members[community].discard(entity_id)
            self.version += 1
