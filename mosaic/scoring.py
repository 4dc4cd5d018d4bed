"""Node scores, Score(v) = alpha*importance + beta*PageRank + gamma*community continuity (paper §3),
kept current after each write by neighbour-conditioned stability (NCS, §3.3).

PageRank here is the linear-system form x = a*1 + (1-a) * P^T x, where P is the row-normalised
out-weight matrix of G_A (both directions, edge weight) plus G_P (edge direction, weight
``prereq_weight``) and a = 1 - damping. Without dangling nodes x equals |V| times the usual
PageRank (same ranking); nodes with no out-edges keep their mass instead of spreading it over all
of V, because that spreading is a global term no local update can track.

Why NCS can be local: forward push (Andersen, Chung & Lang 2006) keeps an estimate p and a
residual r with the invariant p(v) + a*r(v) = a + (1-a) * sum_x p(x) P[x, v] for every v. A write
that changes the out-edges of node u breaks the invariant only at u's old and new out-neighbours;
adding (1-a)/a * p(u) * (new P[u,v] - old P[u,v]) to r(v) restores it (Zhang, Lofgren & Goel 2016),
and pushing the residuals that exceed ``push_epsilon`` touches only the region around the write.
So the work per write depends on local degree and epsilon, not on |V|, and the error is bounded:
|x - p|_1 <= |r|_1 with every |r(v)| <= push_epsilon after a write. Normalisers (max importance,
max PageRank) are tracked as running maxima, which can go stale; a periodic full refresh
recomputes everything (power iteration warm-started from the current estimate, so it needs few
iterations), measures how far NCS had drifted, and adapts the refresh interval.

Why the refresh interval scales with |V|: each write leaves error (residual <= push_epsilon) only
on the few nodes its push touched, so the drift a refresh corrects grows with the *share* of the
graph that writes touched, about writes / |V|, while a refresh costs O(|E|). The interval is
therefore max(``refresh_every``, ``refresh_per_node`` * |V|) times an adaptive scale: halved when
the measured score drift exceeded ``drift_tolerance``, doubled (up to ``max_interval_scale``) when
it stayed within half of it. With |E| proportional to |V| the amortised refresh cost per write is
then O(mean degree), independent of |V|, like the push itself.
"""

from __future__ import annotations

from collections import deque
from typing import Annotated, Any, Protocol

import networkx as nx
import numpy as np
import scipy.sparse as sp
from pydantic import Field

from core.config_check import Count, Positive, Weight

class _HasImportance(Protocol):
    importance: float


class ScoredGraph(Protocol):
    """The part of MemoryGraph the scorer reads."""

    assoc: nx.Graph
    prereq: nx.DiGraph

    def entity(self, entity_id: str) -> _HasImportance: ...


class CommunityLookup(Protocol):
    def get(self, entity_id: str, default: int = -1) -> int: ...


class NodeScorer:
    """Scores every node; rescoring after a write is local (NCS) or global (``ncs=False``)."""

    def __init__(
        self,
        alpha: Weight = 0.5,
        beta: Weight = 0.3,
        gamma: Weight = 0.2,
        ncs: bool = True,
        refresh_every: Count = 200,
        refresh_per_node: Weight = 0.05,
        max_interval_scale: Annotated[float, Field(ge=1)] = 8.0,
        drift_tolerance: Positive = 0.01,
        damping: Annotated[float, Field(gt=0, lt=1)] = 0.85,  # PageRank damping
        push_epsilon: Positive = 1e-2,
        prereq_weight: Weight = 1.0,
        power_tol: Positive = 1e-8,
        max_power_iterations: Count = 200,
    ) -> None:
        self.alpha, self.beta, self.gamma = alpha, beta, gamma
        self.ncs = ncs
        self.refresh_every = refresh_every
        self.refresh_per_node = refresh_per_node
        self.max_interval_scale = max_interval_scale
        self.drift_tolerance = drift_tolerance
        self.teleport = 1.0 - damping
        self.push_epsilon = push_epsilon
        self.prereq_weight = prereq_weight
        self.power_tol = power_tol
        self.max_power_iterations = max_power_iterations

        self._pagerank: dict[str, float] = {}
        self._residual: dict[str, float] = {}
        self._out: dict[str, dict[str, float]] = {}  # row of P seen at the last update of each node
        self._importance: dict[str, float] = {}
        self._importance_max = 0.0
        self._pagerank_max = 0.0
        self._communities: CommunityLookup | None = None
        self._previous_query_communities: set[int] = set()
        self._previous_query_ids: list[str] = []
        self._writes_since_refresh = 0
        self._interval_scale = 1.0  # adapted by measured drift
        self.last_rescored: set[str] = set()
        self.stats: dict[str, Any] = {
            "writes": 0,
            "rescored_total": 0,
            "last_rescored": 0,
            "pushes_total": 0,
            "last_push_rounds": 0,  # depth of the last write's push cascade
            "full_refreshes": 0,
            "drift": [],  # one entry per refresh made while NCS was on
            "last_drift": None,
            "refresh_interval": refresh_every,
        }

    # ---- read side -------------------------------------------------------------------------
    def score(self, entity_id: str) -> float:
        """Current Score(v); KeyError for a node the scorer has not seen."""
        return (
            self.alpha * self._importance_term(entity_id)
            + self.beta * self._pagerank_term(entity_id)
            + self.gamma * self._continuity_term(entity_id)
        )

    def scores(self) -> dict[str, float]:
        return {entity_id: self.score(entity_id) for entity_id in self._pagerank}

    def pagerank(self) -> dict[str, float]:
        """Current PageRank estimates (scale: mean about 1)."""
        return dict(self._pagerank)

    def set_previous_query_entities(self, ids: list[str]) -> None:
        """Remember which entities the previous query touched (for the continuity term)."""
        self._previous_query_ids = list(ids)
        self._refresh_continuity()

    def drift_bound(self) -> float:
        """Upper bound on mean |PageRank error| per node right now: |r|_1 / |V|."""
        if not self._residual:
            return 0.0
        return float(sum(abs(value) for value in self._residual.values()) / len(self._residual))

    # ---- write side ------------------------------------------------------------------------
    def on_write(self, graph: ScoredGraph, communities: CommunityLookup | None, changed: set[str]) -> None:
        """Rescore after a write that changed the neighbourhoods of ``changed``."""
        self._communities = communities
        self._refresh_continuity()
        self.stats["writes"] += 1
        if not self.ncs or not self._pagerank:
            self.refresh(graph)
            self._record_rescored(set(self._pagerank))
            return
        self._writes_since_refresh += 1
        interval = self.refresh_interval()
        if interval > 0 and self._writes_since_refresh >= interval:
            self._local_update(graph, changed)  # so the drift measured is NCS's own, this write included
            self.refresh(graph, measure_drift=True)
            self._record_rescored(set(self._pagerank))
            return
        self._record_rescored(self._local_update(graph, changed))

    def refresh_interval(self) -> int:
        """Writes between full refreshes now: 0 when periodic refreshes are off (``refresh_every=0``)."""
        if self.refresh_every <= 0:
            return 0
        base = max(self.refresh_every, self.refresh_per_node * len(self._pagerank))
        return max(1, int(round(base * self._interval_scale)))

    def refresh(self, graph: ScoredGraph, measure_drift: bool = False) -> None:
        """Recompute every score (power iteration from the current estimate), optionally measuring NCS drift first."""
        ids, matrix, rows = self._transition_matrix(graph)
        previous = np.array([self._pagerank.get(entity_id, 1.0) for entity_id in ids], dtype=np.float64)
        exact = self._power_iteration(matrix, previous)
        if measure_drift and self._pagerank:
            self._measure_drift(graph, ids, exact)
        self._pagerank = dict(zip(ids, exact.tolist()))
        # residual that makes the invariant exact for the recomputed estimate
        residual = 1.0 + ((1.0 - self.teleport) * (matrix.T @ exact) - exact) / self.teleport
        self._residual = dict(zip(ids, residual.tolist()))
        self._out = rows
        self._importance = {entity_id: float(graph.entity(entity_id).importance) for entity_id in ids}
        self._importance_max = max(self._importance.values(), default=0.0)
        self._pagerank_max = float(exact.max()) if len(exact) else 0.0
        self._writes_since_refresh = 0
        self.stats["full_refreshes"] += 1
        self.stats["refresh_interval"] = self.refresh_interval()

    # ---- NCS -------------------------------------------------------------------------------
    def dirty_set(self, graph: ScoredGraph, changed: set[str]) -> set[str]:
        """Nodes whose out-edges may have changed: the changed nodes and their 1-hop neighbours
        (old neighbours included, through the remembered rows)."""
        dirty = set(changed)
        for entity_id in changed:
            if entity_id in graph.assoc:
                dirty.update(graph.assoc.neighbors(entity_id))
            if entity_id in graph.prereq:
                dirty.update(graph.prereq.predecessors(entity_id))
                dirty.update(graph.prereq.successors(entity_id))
            dirty.update(self._out.get(entity_id, ()))
        return dirty

    def _local_update(self, graph: ScoredGraph, changed: set[str]) -> set[str]:
        dirty = self.dirty_set(graph, changed)
        new_rows: dict[str, dict[str, float]] = {}
        pending = set(dirty)
        while pending:  # rows of present dirty nodes; nodes never seen before join the dirty set
            for entity_id in pending:
                if entity_id in graph.assoc or entity_id in graph.prereq:
                    new_rows[entity_id] = self._out_row(graph, entity_id)
            unseen = {t for row in new_rows.values() for t in row if t not in self._pagerank and t not in new_rows}
            dirty |= unseen
            pending = unseen
        touched: set[str] = set()
        for entity_id in sorted(new_rows):  # new nodes first: p = 0, r = 1 satisfies the invariant
            if entity_id not in self._pagerank:
                self._pagerank[entity_id] = 0.0
                self._residual[entity_id] = 1.0
                touched.add(entity_id)
            importance = float(graph.entity(entity_id).importance)
            self._importance[entity_id] = importance
            self._importance_max = max(self._importance_max, importance)
        scale = (1.0 - self.teleport) / self.teleport
        for entity_id in sorted(dirty):
            old_row = self._out.get(entity_id, {})
            new_row = new_rows.get(entity_id, {})
            if new_row != old_row:
                mass = self._pagerank.get(entity_id, 0.0)
                for target in set(old_row) | set(new_row):
                    delta = new_row.get(target, 0.0) - old_row.get(target, 0.0)
                    if delta and target in self._residual:
                        self._residual[target] += scale * mass * delta
                        touched.add(target)
            self._out[entity_id] = new_row
        for entity_id in dirty - set(new_rows):  # removed from the graph
            for table in (self._out, self._pagerank, self._residual, self._importance):
                table.pop(entity_id, None)
            touched.discard(entity_id)
        touched |= self._push(touched)
        return touched

    def _push(self, seeds: set[str]) -> set[str]:
        """Forward push from every node whose residual exceeds epsilon; returns the nodes whose estimate moved."""
        queue = deque(sorted(node for node in seeds if abs(self._residual.get(node, 0.0)) > self.push_epsilon))
        queued = set(queue)
        moved: set[str] = set()
        pushes = 0
        keep = 1.0 - self.teleport
        # round of each queued node (seeds 1; a node queued by a round-t push is in round t+1): the
        # depth of the cascade, which the paper bounds by the longest path L on a DAG
        round_of = dict.fromkeys(queue, 1)
        rounds = 0
        while queue:
            node = queue.popleft()
            queued.discard(node)
            node_round = round_of.pop(node, 1)
            residual = self._residual.get(node, 0.0)
            if abs(residual) <= self.push_epsilon:
                continue
            pushes += 1
            rounds = max(rounds, node_round)
            self._residual[node] = 0.0
            value = self._pagerank[node] + self.teleport * residual
            self._pagerank[node] = value
            if value > self._pagerank_max:
                self._pagerank_max = value
            moved.add(node)
            for target, share in self._out[node].items():
                updated = self._residual[target] + keep * residual * share
                self._residual[target] = updated
                if abs(updated) > self.push_epsilon and target not in queued:
                    queue.append(target)
                    queued.add(target)
                    round_of[target] = node_round + 1
        self.stats["pushes_total"] += pushes
        self.stats["last_push_rounds"] = rounds
        return moved

    # ---- helpers ---------------------------------------------------------------------------
    def _out_row(self, graph: ScoredGraph, entity_id: str) -> dict[str, float]:
        """Row of P for ``entity_id``: out-weights over G_A (both ways) and G_P (edge direction), normalised."""
        weights: dict[str, float] = {}
        if entity_id in graph.assoc:
            for neighbour, data in graph.assoc[entity_id].items():
                if neighbour != entity_id:
                    weights[neighbour] = weights.get(neighbour, 0.0) + float(data.get("weight", 1.0))
        if entity_id in graph.prereq and self.prereq_weight > 0:
            for successor in graph.prereq.successors(entity_id):
                if successor != entity_id:
                    weights[successor] = weights.get(successor, 0.0) + self.prereq_weight
        total = sum(weights.values())
        if total <= 0:
            return {}
        return {target: weight / total for target, weight in weights.items()}

    def _transition_matrix(self, graph: ScoredGraph) -> tuple[list[str], sp.csr_matrix, dict[str, dict[str, float]]]:
        """Node ids, the sparse P, and P's rows by node (kept as the NCS rows, so they are built once)."""
        ids = sorted(set(graph.assoc.nodes) | set(graph.prereq.nodes))
        index = {entity_id: i for i, entity_id in enumerate(ids)}
        out_rows = {entity_id: self._out_row(graph, entity_id) for entity_id in ids}
        rows: list[int] = []
        cols: list[int] = []
        values: list[float] = []
        for entity_id in ids:
            i = index[entity_id]
            row = out_rows[entity_id]
            rows.extend([i] * len(row))
            cols.extend(index[target] for target in row)
            values.extend(row.values())
        matrix = sp.csr_matrix((values, (rows, cols)), shape=(len(ids), len(ids)), dtype=np.float64)
        return ids, matrix, out_rows

    def _power_iteration(self, matrix: sp.csr_matrix, start: np.ndarray) -> np.ndarray:
        if matrix.shape[0] == 0:
            return np.zeros(0)
        transposed = matrix.T.tocsr()
        x = start.copy()
        keep = 1.0 - self.teleport
        for _ in range(self.max_power_iterations):
            updated = self.teleport + keep * (transposed @ x)
            change = float(np.abs(updated - x).sum())
            x = updated
            if change <= self.power_tol * len(x):
                break
        return x

    def _measure_drift(self, graph: ScoredGraph, ids: list[str], exact: np.ndarray) -> None:
        """Compare current NCS scores with the ones a full recompute gives, then adapt the interval."""
        before = np.array([self.score(entity_id) if entity_id in self._pagerank else 0.0 for entity_id in ids])
        estimate = self._pagerank, self._pagerank_max, self._importance, self._importance_max
        self._pagerank = dict(zip(ids, exact.tolist()))
        self._pagerank_max = float(exact.max())
        # nodes written since the last write the scorer saw (the write that triggers this refresh) included
        self._importance = {entity_id: float(graph.entity(entity_id).importance) for entity_id in ids}
        self._importance_max = max(self._importance.values(), default=0.0)
        after = np.array([self.score(entity_id) for entity_id in ids])
        self._pagerank, self._pagerank_max, self._importance, self._importance_max = estimate
        k = min(10, len(ids))
        agreement = len(set(np.argsort(-before)[:k]) & set(np.argsort(-after)[:k])) / k if k else 1.0
        drift = {
            "write": self.stats["writes"],
            "max_abs_score_drift": float(np.abs(before - after).max()) if len(ids) else 0.0,
            "top10_agreement": agreement,
        }
        self.stats["drift"].append(drift)
        self.stats["last_drift"] = drift
        if drift["max_abs_score_drift"] > self.drift_tolerance:
            self._interval_scale = self._interval_scale / 2
        elif drift["max_abs_score_drift"] <= self.drift_tolerance / 2:
            self._interval_scale = min(self.max_interval_scale, self._interval_scale * 2)

    def _record_rescored(self, rescored: set[str]) -> None:
        self.last_rescored = rescored
        self.stats["last_rescored"] = len(rescored)
        self.stats["rescored_total"] += len(rescored)

    def _refresh_continuity(self) -> None:
        if self._communities is None:
            self._previous_query_communities = set()
            return
        self._previous_query_communities = {
            c for c in (self._communities.get(entity_id, -1) for entity_id in self._previous_query_ids) if c >= 0
        }

    def _importance_term(self, entity_id: str) -> float:
        importance = self._importance[entity_id]
        return importance / self._importance_max if self._importance_max > 0 else 0.0

    def _pagerank_term(self, entity_id: str) -> float:
        value = self._pagerank[entity_id]
        return value / self._pagerank_max if self._pagerank_max > 0 else 0.0

    def _continuity_term(self, entity_id: str) -> float:
        if not self._previous_query_communities or self._communities is None:
            return 0.0
        return 1.0 if self._communities.get(entity_id, -1) in self._previous_query_communities else 0.0
