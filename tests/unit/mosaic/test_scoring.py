"""NodeScorer: score arithmetic on hand-made numbers, NCS dirty sets on small hand-made graphs,
and the forward-push error bound against a full recompute. Also the Leiden communities wrapper."""

from __future__ import annotations

import random
from types import SimpleNamespace

import networkx as nx
import pytest

from mosaic.communities import Communities
from mosaic.scoring import NodeScorer
from core.config_check import check_kwargs


class HandGraph:
    """Stand-in for MemoryGraph: the two networkx graphs plus importances."""

    def __init__(self, importance: dict[str, float] | None = None) -> None:
        self.assoc = nx.Graph()
        self.prereq = nx.DiGraph()
        self.importance = dict(importance or {})

    def entity(self, entity_id: str) -> SimpleNamespace:
        return SimpleNamespace(importance=self.importance.get(entity_id, 0.5))

    def link(self, a: str, b: str, weight: float = 1.0) -> set[str]:
        self.assoc.add_edge(a, b, weight=weight)
        return {a, b}


class FixedCommunities:
    def __init__(self, membership: dict[str, int]) -> None:
        self.membership = membership

    def get(self, entity_id: str, default: int = -1) -> int:
        return self.membership.get(entity_id, default)


def path_graph(n: int) -> HandGraph:
    graph = HandGraph()
    for i in range(n - 1):
        graph.link(f"n{i}", f"n{i + 1}")
    return graph


def test_score_is_weighted_sum_of_normalised_terms():
    graph = HandGraph({"a": 0.2, "b": 0.4, "c": 0.8})
    graph.link("a", "b")
    graph.link("b", "c")
    graph.link("a", "c")  # a triangle with equal weights: every PageRank equals 1, term = 1
    communities = FixedCommunities({"a": 0, "b": 0, "c": 1})
    scorer = NodeScorer(alpha=0.5, beta=0.3, gamma=0.2, ncs=False)
    scorer.on_write(graph, communities, {"a", "b", "c"})
    scorer.set_previous_query_entities(["a"])
    assert scorer.score("a") == pytest.approx(0.5 * 0.25 + 0.3 * 1.0 + 0.2 * 1.0)
    assert scorer.score("b") == pytest.approx(0.5 * 0.5 + 0.3 * 1.0 + 0.2 * 1.0)
    assert scorer.score("c") == pytest.approx(0.5 * 1.0 + 0.3 * 1.0 + 0.0)
    scorer.set_previous_query_entities(["c"])
    assert scorer.score("a") == pytest.approx(0.5 * 0.25 + 0.3)
    assert scorer.score("c") == pytest.approx(0.5 + 0.3 + 0.2)


def test_pagerank_term_matches_networkx_without_dangling_nodes():
    graph = HandGraph()
    for leaf in ("x", "y", "z"):
        graph.link("hub", leaf, weight=1.0)
    graph.link("x", "y", weight=0.5)
    graph.prereq.add_edge("z", "x")
    scorer = NodeScorer(alpha=0.0, beta=1.0, gamma=0.0, ncs=False)
    scorer.on_write(graph, None, set(graph.assoc.nodes))
    directed = nx.DiGraph()
    for a, b, data in graph.assoc.edges(data=True):
        directed.add_edge(a, b, weight=data["weight"])
        directed.add_edge(b, a, weight=data["weight"])
    directed.add_edge("z", "x", weight=1.0)  # the prerequisite edge: weight 1, in its direction
    reference = nx.pagerank(directed, alpha=0.85, weight="weight", tol=1e-12)
    top = max(reference.values())
    for node, value in reference.items():
        assert scorer.score(node) == pytest.approx(value / top, rel=1e-5)
        assert scorer.pagerank()[node] == pytest.approx(value * len(reference), rel=1e-5)


def test_dirty_set_is_changed_nodes_and_their_neighbours():
    graph = path_graph(6)  # n0 - n1 - n2 - n3 - n4 - n5
    scorer = NodeScorer()
    scorer.on_write(graph, None, set(graph.assoc.nodes))
    changed = graph.link("new", "n2")
    assert scorer.dirty_set(graph, changed) == {"new", "n2", "n1", "n3"}
    graph.prereq.add_edge("n5", "n0")
    assert scorer.dirty_set(graph, {"n5", "n0"}) == {"n5", "n0", "n4", "n1"}


def test_ncs_rescoring_stays_near_the_write_and_full_mode_touches_everything():
    graph = path_graph(40)
    ncs = NodeScorer(ncs=True, refresh_every=0, push_epsilon=0.05)
    full = NodeScorer(ncs=False)
    for scorer in (ncs, full):
        scorer.on_write(graph, None, set(graph.assoc.nodes))
    before = ncs.pagerank()
    changed = graph.link("new", "n0")
    ncs.on_write(graph, None, changed)
    full.on_write(graph, None, changed)
    after = ncs.pagerank()
    assert "new" in ncs.last_rescored and "n0" in ncs.last_rescored
    far = [f"n{i}" for i in range(20, 40)]
    assert not set(far) & ncs.last_rescored
    assert all(after[node] == before[node] for node in far)  # untouched, bit for bit
    assert full.last_rescored == set(graph.assoc.nodes)
    assert len(ncs.last_rescored) < len(full.last_rescored)


def random_growth(seed: int, n: int, graph: HandGraph | None = None) -> tuple[HandGraph, list[set[str]]]:
    rng = random.Random(seed)
    graph = graph or HandGraph()
    writes = []
    for _ in range(n):
        node = f"v{len(graph.assoc)}"
        graph.importance[node] = rng.random()
        graph.assoc.add_node(node)
        existing = [x for x in graph.assoc.nodes if x != node]
        changed = {node}
        for other in rng.sample(existing, min(3, len(existing))):
            changed |= graph.link(node, other, weight=rng.uniform(0.2, 1.0))
        if existing and rng.random() < 0.3:
            other = rng.choice(existing)
            graph.prereq.add_edge(node, other)
            changed.add(other)
        writes.append(changed)
    return graph, writes


def test_ncs_error_is_bounded_by_the_residual_mass():
    graph, _ = random_growth(seed=3, n=150)
    ncs = NodeScorer(ncs=True, refresh_every=0, push_epsilon=1e-3)
    ncs.on_write(graph, None, set(graph.assoc.nodes))
    _, writes = random_growth(seed=4, n=60, graph=graph)
    # replay: each write is applied to the scorer after the fact, as in MosaicMemory
    for changed in writes:
        ncs.on_write(graph, None, changed)
    exact = NodeScorer(ncs=False)
    exact.on_write(graph, None, set(graph.assoc.nodes))
    estimate, truth = ncs.pagerank(), exact.pagerank()
    assert set(estimate) == set(truth)
    l1_error = sum(abs(estimate[v] - truth[v]) for v in truth)
    assert l1_error <= ncs.drift_bound() * len(truth) + 1e-6
    assert ncs.drift_bound() <= 1e-3


def test_ncs_handles_removed_nodes():
    graph, _ = random_growth(seed=5, n=60)
    ncs = NodeScorer(ncs=True, refresh_every=0, push_epsilon=1e-4)
    ncs.on_write(graph, None, set(graph.assoc.nodes))
    victim = "v10"
    graph.prereq.add_edge(victim, "v11")
    ncs.on_write(graph, None, {victim, "v11"})
    changed = {victim} | set(graph.assoc.neighbors(victim)) | set(graph.prereq.predecessors(victim)) | set(graph.prereq.successors(victim))
    graph.assoc.remove_node(victim)
    graph.prereq.remove_node(victim)
    ncs.on_write(graph, None, changed)
    exact = NodeScorer(ncs=False)
    exact.on_write(graph, None, set(graph.assoc.nodes))
    assert victim not in ncs.pagerank()
    assert max(abs(ncs.pagerank()[v] - exact.pagerank()[v]) for v in exact.pagerank()) < 0.01


def _drift_after_growth(push_epsilon: float, refresh_every: int = 5, drift_tolerance: float = 0.01, writes: int = 5) -> NodeScorer:
    graph, _ = random_growth(seed=6, n=80)
    # refresh_per_node=0: the interval is refresh_every (times the drift-adapted scale), whatever |V|
    scorer = NodeScorer(ncs=True, refresh_every=refresh_every, refresh_per_node=0.0, drift_tolerance=drift_tolerance, push_epsilon=push_epsilon)
    scorer.on_write(graph, None, set(graph.assoc.nodes))
    _, growth = random_growth(seed=7, n=writes, graph=graph)
    for changed in growth:
        scorer.on_write(graph, None, changed)
    return scorer


def test_periodic_refresh_measures_how_far_ncs_drifted():
    tight, loose = _drift_after_growth(push_epsilon=1e-7), _drift_after_growth(push_epsilon=2.0)
    for scorer in (tight, loose):
        assert scorer.stats["full_refreshes"] == 2  # the initial one, then the periodic one
        assert [d["write"] for d in scorer.stats["drift"]] == [6]
    # a tight push bound leaves little error (stale normalisers only); a loose one leaves a real error, and the measure sees it
    assert tight.stats["last_drift"]["max_abs_score_drift"] < 0.005 and tight.stats["last_drift"]["top10_agreement"] == 1.0
    assert loose.stats["last_drift"]["max_abs_score_drift"] > 5 * tight.stats["last_drift"]["max_abs_score_drift"]


def test_refresh_interval_scales_with_graph_size_and_widens_on_small_drift():
    graph, _ = random_growth(seed=6, n=80)
    scorer = NodeScorer(ncs=True, refresh_every=5, refresh_per_node=0.5, push_epsilon=1e-2)
    scorer.on_write(graph, None, set(graph.assoc.nodes))
    assert scorer.refresh_interval() == round(0.5 * len(scorer.pagerank()))  # |V|/2 beats the floor of 5
    small = NodeScorer(ncs=True, refresh_every=5, refresh_per_node=0.0, drift_tolerance=10.0, max_interval_scale=4)
    small.on_write(graph, None, set(graph.assoc.nodes))
    _, writes = random_growth(seed=7, n=15, graph=graph)
    for changed in writes:
        small.on_write(graph, None, changed)
    # drift far below tolerance: interval 5, then 10 after the first periodic refresh (at write 5), then 20 at write 15
    assert [d["write"] for d in small.stats["drift"]] == [6, 16] and small.refresh_interval() == 20
    tight = NodeScorer(ncs=True, refresh_every=4, refresh_per_node=0.0, drift_tolerance=0.0)
    tight.on_write(graph, None, set(graph.assoc.nodes))
    for changed in random_growth(seed=8, n=4, graph=graph)[1]:
        tight.on_write(graph, None, changed)
    assert tight.refresh_interval() == 2  # any drift above a zero tolerance halves it


def test_push_cascade_depth_on_a_chain_is_its_longest_path_plus_one():
    graph = HandGraph()
    nx.add_path(graph.prereq, [f"c{i}" for i in range(6)])  # L = 5
    scorer = NodeScorer(ncs=True, refresh_every=0, push_epsilon=1e-12)
    scorer.on_write(graph, None, set())
    graph.prereq.add_edge("s", "c0")  # now L = 6 from the new source
    scorer.on_write(graph, None, {"s", "c0"})
    assert scorer.stats["last_push_rounds"] == nx.dag_longest_path_length(graph.prereq) + 1 == 7


def test_bad_weights_are_rejected():
    with pytest.raises(ValueError, match="alpha"):
        check_kwargs(NodeScorer, {"alpha": -1}, "system.scoring")


# ---- communities ------------------------------------------------------------------------------
def two_cliques() -> HandGraph:
    graph = HandGraph()
    for group in ("a", "b"):
        members = [f"{group}{i}" for i in range(5)]
        for i, x in enumerate(members):
            for y in members[i + 1 :]:
                graph.link(x, y)
    graph.link("a0", "b0", weight=0.1)
    return graph


def test_leiden_finds_the_two_cliques_deterministically():
    memberships = []
    for _ in range(2):
        communities = Communities(seed=7)
        graph = two_cliques()
        communities.update(graph, set(graph.assoc.nodes))
        memberships.append({node: communities.of(node) for node in graph.assoc.nodes})
    assert memberships[0] == memberships[1]
    membership = memberships[0]
    assert len({membership[f"a{i}"] for i in range(5)}) == 1
    assert len({membership[f"b{i}"] for i in range(5)}) == 1
    assert membership["a1"] != membership["b1"]


def test_new_node_joins_its_neighbours_community_then_leiden_reruns():
    graph = two_cliques()
    communities = Communities(seed=0, rerun_fraction=0.5)
    communities.update(graph, set(graph.assoc.nodes))
    runs = communities.stats["leiden_runs"]
    changed = graph.link("new", "a1") | graph.link("new", "a2")
    communities.update(graph, changed)
    assert communities.of("new") == communities.of("a1")
    assert communities.stats["leiden_runs"] == runs  # 3 dirty nodes < half of 11
    assert "new" in communities.members(communities.of("a1"))
    lonely = {"alone"}
    graph.assoc.add_node("alone")
    communities.update(graph, lonely)
    assert communities.of("alone") not in {communities.of("a1"), communities.of("b1")}
    communities.update(graph, set(graph.assoc.nodes))  # a big change triggers a seeded rerun
    assert communities.stats["leiden_runs"] == runs + 1
    assert communities.of("new") == communities.of("a1")


# ---- the read path on the real MemoryGraph ------------------------------------------------------
class NoEmbedder:
    """Vectors are passed in explicitly; only ``dim`` is read."""

    dim = 384

    def encode(self, texts):  # pragma: no cover - never called: every entity comes with its vector
        raise AssertionError("the test passes vectors explicitly")


def test_read_path_on_memory_graph_matches_a_full_recompute():
    import numpy as np

    from mosaic.entity import Entity
    from mosaic.graph import MemoryGraph
    from mosaic.retrieval import Retriever

    rng = np.random.default_rng(0)
    centroids = rng.standard_normal((4, 384)).astype(np.float32)
    graph = MemoryGraph(NoEmbedder(), assoc_threshold=0.5, assoc_top_n=5)
    communities = Communities(seed=0, rerun_fraction=0.2)
    scorer = NodeScorer(ncs=True, refresh_every=0)
    vectors = {}
    for i in range(80):
        vector = centroids[i % 4] + 0.5 * rng.standard_normal(384).astype(np.float32) / np.sqrt(384) * np.linalg.norm(centroids[i % 4])
        entity = Entity(entity_id=f"e{i}", text=f"fact {i}", type="event", importance=float(rng.random()))
        changed = graph.add_entity(entity, vector)
        if i % 10 == 9:
            changed |= graph.add_prerequisite(f"e{i - 4}", f"e{i}")
        vectors[entity.entity_id] = vector
        communities.update(graph, changed)
        scorer.on_write(graph, communities, changed)
    changed = graph.remove_entity("e7")
    communities.update(graph, changed)
    scorer.on_write(graph, communities, changed)

    full = NodeScorer(ncs=False)
    full.on_write(graph, communities, set(graph.assoc.nodes))
    for s in (scorer, full):
        s.set_previous_query_entities(["e1"])
    ncs_scores, full_scores = scorer.scores(), full.scores()
    assert set(ncs_scores) == set(full_scores) == {e.entity_id for e in graph.entities()}
    assert max(abs(ncs_scores[v] - full_scores[v]) for v in full_scores) < 0.01
    assert {communities.of(f"e{i}") for i in range(1, 80, 4)} == {communities.of("e1")}  # one planted cluster

    retriever = Retriever(mode="dual", top_k=5, seed=0)
    retriever.rebuild(graph, communities)
    query = vectors["e13"] / np.linalg.norm(vectors["e13"])
    found = retriever.search(query, "fact 13", 5)
    ids, matrix = graph.matrix()
    expected = [ids[i] for i in np.argsort(-(matrix @ query))[:5]]
    assert [entity_id for entity_id, _ in found] == expected


def test_ncs_halves_its_refresh_interval_when_drift_exceeds_the_tolerance():
    # right after the first periodic refresh (growth write 4): halved on drift over tolerance, doubled when
    # drift stayed within half of it
    drifting = _drift_after_growth(push_epsilon=0.5, refresh_every=4, drift_tolerance=1e-6, writes=4)
    steady = _drift_after_growth(push_epsilon=0.5, refresh_every=4, drift_tolerance=10.0, writes=4)
    assert drifting.stats["drift"][0]["max_abs_score_drift"] > 1e-6  # so the tolerance was really exceeded
    assert drifting.stats["refresh_interval"] == 2 and steady.stats["refresh_interval"] == 8
    # two writes later the halved interval has refreshed again; the steady one waits for growth write 12
    drifting = _drift_after_growth(push_epsilon=0.5, refresh_every=4, drift_tolerance=1e-6, writes=6)
    steady = _drift_after_growth(push_epsilon=0.5, refresh_every=4, drift_tolerance=10.0, writes=6)
    assert drifting.stats["full_refreshes"] == 3 and steady.stats["full_refreshes"] == 2


def test_local_rerun_splits_only_the_community_that_changed():
    graph = HandGraph()
    a = [f"a{i}" for i in range(5)]
    for i, x in enumerate(a):
        for y in a[i + 1:]:
            graph.link(x, y)
    graph.link("z0", "z1")  # a second, untouched community
    communities = Communities(seed=0, min_nodes_for_rerun=1000, local_rerun_fraction=0.5, local_min_size=4, local_from_nodes=0)
    communities.update(graph, set(graph.assoc.nodes))
    untouched = communities.of("z0")
    b = [f"b{i}" for i in range(5)]
    for i, x in enumerate(b):  # clique b arrives node by node, hanging off a0 by one weak edge
        changed = graph.link(x, "a0", weight=0.05) if i == 0 else set()
        for y in b[:i]:
            changed |= graph.link(x, y)
        communities.update(graph, changed | {x})
    assert communities.stats["leiden_runs"] == 1 and communities.stats["local_reruns"] >= 1
    assert len({communities.of(x) for x in a}) == 1 and len({communities.of(x) for x in b}) == 1
    assert communities.of("a1") != communities.of("b1") and communities.of("z0") == untouched


def _random_block_among_cliques(seed: int = 0) -> tuple[HandGraph, list[str]]:
    """A 30-node random block (p = 0.5, no inner structure) among 20 ten-node cliques, weakly chained."""
    rng = random.Random(seed)
    graph = HandGraph()
    block = [f"r{i}" for i in range(30)]
    for i, x in enumerate(block):
        for y in block[i + 1:]:
            if rng.random() < 0.5:
                graph.link(x, y)
    for c in range(20):
        clique = [f"c{c}_{i}" for i in range(10)]
        for i, x in enumerate(clique):
            for y in clique[i + 1:]:
                graph.link(x, y)
        graph.link(clique[0], block[c], weight=0.1)
    return graph, block


def test_local_rerun_keeps_a_community_without_inner_structure_whole():
    graph, block = _random_block_among_cliques()
    # the reason for the global null model: Leiden on the block alone, by the block's own modularity, splits it
    import igraph as ig
    import leidenalg

    index = {x: i for i, x in enumerate(block)}
    sub = graph.assoc.subgraph(block)
    alone = leidenalg.find_partition(ig.Graph(n=len(block), edges=[(index[a], index[b]) for a, b in sub.edges]),
                                     leidenalg.RBConfigurationVertexPartition, seed=0)
    assert len(alone) > 1

    communities = Communities(seed=0, min_nodes_for_rerun=10_000, local_rerun_fraction=0.5, local_min_size=4, local_from_nodes=0)
    communities.update(graph, set(graph.assoc.nodes))
    assert len({communities.of(x) for x in block}) == 1
    for i in range(0, 30, 2):  # re-weight edges inside the block until half of it changed
        changed = graph.link(block[i], block[(i + 7) % 30], weight=1.0)
        communities.update(graph, changed)
    assert communities.stats["local_reruns"] >= 1 and communities.stats["leiden_runs"] == 1
    assert len({communities.of(x) for x in block}) == 1


def test_local_reruns_wait_for_local_from_nodes_and_node_strengths_stay_exact():
    graph, block = _random_block_among_cliques()
    small = Communities(seed=0, rerun_fraction=1.0, local_rerun_fraction=0.5, local_min_size=4, local_from_nodes=10_000)
    active = Communities(seed=0, rerun_fraction=1.0, local_rerun_fraction=0.5, local_min_size=4, local_from_nodes=0)
    for communities in (small, active):
        communities.update(graph, set(graph.assoc.nodes))
    for i in range(12):  # new nodes hang off the block; some edges inside it get heavier
        changed = graph.link(f"n{i}", block[i], weight=0.7) | graph.link(block[i], block[i + 1], weight=2.0)
        for communities in (small, active):
            communities.update(graph, changed)
    assert small.stats["local_reruns"] == 0 and active.stats["local_reruns"] >= 1
    expected = sum(strength for _, strength in graph.assoc.degree(weight="weight"))
    assert active._total_strength == pytest.approx(expected)
