"""Scaling benchmark for MOSAIC's read path: NCS rescoring vs full recompute, and dual-path
(LSH -> communities -> exact) retrieval vs flat exact search and FAISS HNSW.

Everything is synthetic and seeded; no LLM and no embedder are needed.

* NCS graphs grow like MemoryGraph does: nodes arrive in order, each links in G_A to
  ``--links`` earlier nodes (90% inside its planted community of ~50 nodes, weights U(0.5, 1)),
  and 10% of nodes add a G_P edge to an earlier node of the same community. Importance is
  U(0, 1). Leiden (mosaic.communities) supplies the communities. Each timed update adds one
  node the same way; NCS runs with its own refresh policy, and each write's cost is split into
  push, refresh and community update (local assignment or Leiden re-run), reported separately and
  amortised; a full recompute is timed on the first few updates; top-10 agreement against a full
  recompute is checked at four checkpoints (the last after all writes: 1,000 in --large).
* Retrieval vectors are 384-d and clustered in two levels: topic centroids are random unit
  vectors; community centroids are normalise(topic + N(0, I/d)) (10 communities per topic); items
  are normalise(community centroid + ``--spread`` * N(0, I/d)), ~500 items per community; queries
  are normalise(stored item + ``--query-noise`` * N(0, I/d)). The planted community labels
  stand in for Leiden communities (at 1M vectors building G_A and running Leiden would dominate
  the run; in MOSAIC the communities come from Leiden on G_A). Recall is against exact search.
  With no LLM, a low-confidence LSH query uses the no-LLM fallback (Hamming-1 probing, then
  exact search); ``low_confidence_fallback_rate`` is the share of queries where LSH was unsure, which
  in MOSAIC would have called the LLM (files written before the rename call it ``llm_fallback_rate``).

Usage: ``python -m research.bench_scaling [--tiny|--small|--large] [--out results/bench]``
"""

from __future__ import annotations

import os

# Per-query latency is measured single-threaded for every mode: on a small shared machine
# multi-threaded BLAS/OpenMP on one query vector mostly measures thread contention.
for _variable in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse
import json
import platform
import random
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import faiss
import networkx as nx
import numpy as np

from eval.provenance import code_version
from mosaic.communities import Communities, weighted_igraph
from mosaic.retrieval import Retriever
from mosaic.scoring import NodeScorer

DIM = 384
SIZES = {
    "tiny": {"ncs": [200, 500], "retrieval": [2000, 4000], "updates": 10, "queries": 50},
    "small": {"ncs": [1000, 5000], "retrieval": [10_000, 50_000], "updates": 200, "queries": 200},
    "default": {"ncs": [1000, 10_000, 30_000], "retrieval": [10_000, 100_000, 300_000], "updates": 1000, "queries": 300},
    "large": {"ncs": [1000, 10_000, 100_000], "retrieval": [10_000, 100_000, 1_000_000], "updates": 1000, "queries": 300},
}


# ---- NCS ----------------------------------------------------------------------------------------
class SyntheticGraph:
    """A stand-in exposing what the scorer and communities read from MemoryGraph."""

    def __init__(self, seed: int, links: int, community_size: int = 50) -> None:
        self.assoc = nx.Graph()
        self.prereq = nx.DiGraph()
        self.rng = random.Random(seed)
        self.links = links
        self.community_size = community_size
        self._importance: dict[str, float] = {}
        self._by_community: dict[int, list[str]] = {}
        self._order: list[str] = []

    def entity(self, entity_id: str) -> SimpleNamespace:
        return SimpleNamespace(importance=self._importance[entity_id])

    def grow(self) -> set[str]:
        """Add one node the way MemoryGraph.add_entity does; return the changed ids."""
        rng = self.rng
        n = len(self._order)
        node = f"e{n}"
        community = rng.randrange(max(1, (n + 1) // self.community_size + 1))
        self.assoc.add_node(node)
        self._importance[node] = rng.random()
        changed = {node}
        peers = self._by_community.get(community, [])
        for _ in range(min(self.links, n)):
            pool = peers if peers and rng.random() < 0.9 else self._order
            other = pool[rng.randrange(len(pool))]
            self.assoc.add_edge(node, other, weight=rng.uniform(0.5, 1.0))
            changed.add(other)
        if peers and rng.random() < 0.1:
            other = peers[rng.randrange(len(peers))]
            self.prereq.add_edge(node, other)
            changed.add(other)
        self._order.append(node)
        self._by_community.setdefault(community, []).append(node)
        return changed


def partition_quality(assoc: nx.Graph, communities: Communities, seed: int) -> dict:
    """Modularity of the maintained partition against a fresh Leiden run on the final graph (not timed).

    Timing alone would reward a policy that stops re-partitioning; this says what it costs in quality.
    """
    import leidenalg

    ids = sorted(assoc.nodes)
    graph = weighted_igraph(assoc, ids)
    maintained = [communities.of(entity_id) for entity_id in ids]
    fresh = leidenalg.find_partition(graph, leidenalg.RBConfigurationVertexPartition, weights="weight",
                                     resolution_parameter=communities.resolution, n_iterations=communities.n_iterations, seed=seed)
    return {
        "modularity_maintained": graph.modularity(maintained, weights="weight", resolution=communities.resolution),
        "modularity_fresh_leiden": graph.modularity(fresh.membership, weights="weight", resolution=communities.resolution),
        "n_communities_fresh_leiden": len(fresh),
    }


def top_ids(scores: dict[str, float], k: int = 10) -> set[str]:
    return set(sorted(scores, key=lambda i: (-scores[i], i))[:k])


def bench_ncs(
    n_nodes: int, updates: int, full_updates: int, seed: int, links: int, refresh_every: int,
    push_epsilon: float | None = None, checkpoints: int = 4, community_kwargs: dict | None = None,
) -> dict:
    """Time ``updates`` writes with NCS's own refresh policy on, splitting each write's cost into
    push, refresh and community update, and check top-10 agreement at ``checkpoints`` points.

    In-window means can miss a rare event (at 100k nodes the refresh interval is 5,000 writes),
    so the steady-state amortised figure adds each periodic cost at its rate: the refresh's
    measured cost divided by the scorer's interval, and a Leiden re-run's measured cost divided
    by the writes between re-runs (``rerun_fraction`` * |V| / nodes changed per write). When no
    refresh or re-run fell in the window, one is timed after it.
    """
    graph = SyntheticGraph(seed, links)
    for _ in range(n_nodes):
        graph.grow()
    communities = Communities(seed=seed, **(community_kwargs or {}))
    started = time.perf_counter()
    communities.update(graph, set(graph.assoc.nodes))
    leiden_ms = (time.perf_counter() - started) * 1000
    ncs = NodeScorer(ncs=True, refresh_every=refresh_every, **({} if push_epsilon is None else {"push_epsilon": push_epsilon}))
    full = NodeScorer(ncs=False)
    ncs.on_write(graph, communities, set())
    full.on_write(graph, communities, set())
    previous_query = [f"e{random.Random(seed + 1).randrange(n_nodes)}"]
    ncs.set_previous_query_entities(previous_query)
    full.set_previous_query_entities(previous_query)
    push_s, refresh_s, local_community_s, leiden_s, full_s, rescored, changed_sizes = [], [], [], [], [], [], []
    agreement: list[dict] = []
    check_at = {round(updates * (i + 1) / checkpoints) for i in range(checkpoints)}
    pushes_before = ncs.stats["pushes_total"]
    for step in range(1, updates + 1):
        changed = graph.grow()
        changed_sizes.append(len(changed))
        runs = communities.stats["leiden_runs"]
        started = time.perf_counter()
        communities.update(graph, changed)
        (leiden_s if communities.stats["leiden_runs"] > runs else local_community_s).append(time.perf_counter() - started)
        refreshes = ncs.stats["full_refreshes"]
        started = time.perf_counter()
        ncs.on_write(graph, communities, changed)
        (refresh_s if ncs.stats["full_refreshes"] > refreshes else push_s).append(time.perf_counter() - started)
        rescored.append(len(ncs.last_rescored))
        if step <= full_updates:
            started = time.perf_counter()
            full.on_write(graph, communities, changed)
            full_s.append(time.perf_counter() - started)
        if step in check_at:
            full.refresh(graph)  # catch the full scorer up on the untimed updates (not timed)
            full.set_previous_query_entities(previous_query)  # continuity from the current communities (re-runs renumber them)
            ncs_scores, full_scores = ncs.scores(), full.scores()
            # each pagerank() call builds a dict over V: once per checkpoint, not once per node (that was
            # O(|V|^2), and why the 100k size never finished before)
            ncs_pagerank, full_pagerank = ncs.pagerank(), full.pagerank()
            agreement.append({
                "write": step,
                "top10_agreement": len(top_ids(ncs_scores) & top_ids(full_scores)) / 10,
                "top10_pagerank_agreement": len(top_ids(ncs_pagerank) & top_ids(full_pagerank)) / 10,
                "max_abs_score_drift": max(abs(ncs_scores[i] - full_scores[i]) for i in full_scores),
                "max_abs_pagerank_error": max(abs(ncs_pagerank[i] - full_pagerank[i]) for i in full_scores),
            })
    in_window_refreshes = len(refresh_s)
    interval = ncs.refresh_interval()
    drift_bound = ncs.drift_bound()
    if not refresh_s:  # none fell in the window: time one, as the scorer would make it
        started = time.perf_counter()
        ncs.refresh(graph, measure_drift=True)
        refresh_s.append(time.perf_counter() - started)
    in_window_reruns = len(leiden_s)
    if not leiden_s:
        started = time.perf_counter()
        communities.rerun(graph)
        leiden_s.append(time.perf_counter() - started)
    mean_changed = float(np.mean(changed_sizes))
    n_final = graph.assoc.number_of_nodes()
    # the policy in force at the row's size: a 1k row grows to 2k in its window and must not be costed as if
    # local re-runs (from local_from_nodes) had applied all along
    local = communities.local_active(n_nodes)
    global_fraction = communities.backstop_rerun_fraction if local else communities.rerun_fraction
    rerun_period = max(1.0, global_fraction * n_final / mean_changed)
    quality = partition_quality(graph.assoc, communities, seed)
    push_ms = 1000 * float(np.mean(push_s))
    refresh_ms = 1000 * float(np.mean(refresh_s))
    local_ms = 1000 * float(np.mean(local_community_s)) if local_community_s else 0.0
    rerun_ms = 1000 * float(np.mean(leiden_s))
    full_ms = 1000 * float(np.mean(full_s))
    refresh_amortised = refresh_ms / interval if interval else 0.0
    community_amortised = local_ms + rerun_ms / rerun_period
    last = agreement[-1]
    return {
        "n_nodes": n_nodes,
        "n_edges_assoc": graph.assoc.number_of_edges(),
        "writes": updates,
        "updates_timed_full": len(full_s),
        "ncs_ms_per_update": push_ms,  # the push alone (writes that did not refresh)
        "ncs_ms_per_update_median": 1000 * float(np.median(push_s)),
        "ncs_ms_per_update_p95": 1000 * float(np.percentile(push_s, 95)),
        "ncs_pushes_per_update": (ncs.stats["pushes_total"] - pushes_before) / updates,
        "refresh_ms": refresh_ms,
        "refreshes_in_window": in_window_refreshes,
        "refresh_interval_writes": interval,
        "refresh_ms_amortised": refresh_amortised,
        "community_local_ms_per_update": local_ms,
        "leiden_rerun_ms": rerun_ms,
        "leiden_reruns_in_window": in_window_reruns,
        "leiden_rerun_period_writes": rerun_period,
        "community_ms_amortised": community_amortised,
        "amortised_ms_per_update": push_ms + refresh_amortised + community_amortised,
        "amortised_ms_per_update_ncs_only": push_ms + refresh_amortised,
        # the push's median is robust to a shared machine preempting single writes; the rare events stay means
        "amortised_ms_per_update_median_push": 1000 * float(np.median(push_s)) + refresh_amortised + community_amortised,
        "in_window_ms_per_update": 1000 * (sum(push_s) + (sum(refresh_s) if in_window_refreshes else 0.0)
                                           + sum(local_community_s) + (sum(leiden_s) if in_window_reruns else 0.0)) / updates,
        "full_ms_per_update": full_ms,
        "full_ms_per_update_median": 1000 * float(np.median(full_s)),
        "mean_rescored_nodes": float(np.mean(rescored)),
        "agreement_checkpoints": agreement,
        "top10_agreement_vs_full": last["top10_agreement"],
        "top10_agreement_mean_over_checkpoints": float(np.mean([a["top10_agreement"] for a in agreement])),
        "top10_pagerank_agreement_vs_full": last["top10_pagerank_agreement"],
        "max_abs_score_drift": last["max_abs_score_drift"],
        "max_abs_pagerank_error": last["max_abs_pagerank_error"],
        "drift_bound_mean_pagerank_error": drift_bound,
        "push_epsilon": ncs.push_epsilon,
        "refresh_every": refresh_every,
        "refresh_per_node": ncs.refresh_per_node,
        "scorer_drift_log": ncs.stats["drift"],
        "leiden_initial_ms": leiden_ms,
        "n_communities": len(communities),
        "community_settings": {"rerun_fraction": communities.rerun_fraction, "local_rerun_fraction": communities.local_rerun_fraction,
                               "local_from_nodes": communities.local_from_nodes,
                               "backstop_rerun_fraction": communities.backstop_rerun_fraction,
                               "local_active": local},
        **quality,
        "community_local_reruns": communities.stats["local_reruns"],
    }


# ---- retrieval -----------------------------------------------------------------------------------
def clustered_vectors(n_items: int, seed: int, spread: float, community_size: int = 500, per_topic: int = 10) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n_communities = max(1, n_items // community_size)
    n_topics = max(1, n_communities // per_topic)

    def unit(x: np.ndarray) -> np.ndarray:
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    topics = unit(rng.standard_normal((n_topics, DIM), dtype=np.float32))
    topic_of = np.arange(n_communities) % n_topics
    centroids = unit(topics[topic_of] + rng.standard_normal((n_communities, DIM), dtype=np.float32) / np.sqrt(DIM))
    labels = rng.integers(0, n_communities, n_items)
    vectors = np.empty((n_items, DIM), np.float32)
    for start in range(0, n_items, 100_000):
        end = min(n_items, start + 100_000)
        noise = rng.standard_normal((end - start, DIM), dtype=np.float32) * (spread / np.sqrt(DIM))
        vectors[start:end] = unit(centroids[labels[start:end]] + noise)
    return vectors, labels


def timed_search(retriever: Retriever, queries: np.ndarray, k: int) -> tuple[float, list[list[str]]]:
    """Mean ms per single query, one thread (see the note at the top)."""
    results = []
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        started = time.perf_counter()
        for query in queries:
            results.append([entity_id for entity_id, _ in retriever.search(query, "", k)])
        elapsed = time.perf_counter() - started
    finally:
        faiss.omp_set_num_threads(threads)
    return 1000 * elapsed / len(queries), results


def recall(found: list[list[str]], truth: list[list[str]], k: int) -> float:
    return float(np.mean([len(set(f[:k]) & set(t[:k])) / k for f, t in zip(found, truth)]))


def bench_retrieval(n_items: int, n_queries: int, seed: int, spread: float, query_noise: float, k: int = 5, rounds: int = 3) -> dict:
    """Build the three indexes side by side, then time them in ``rounds`` interleaved rounds.

    Interleaving (flat, HNSW, dual, flat, HNSW, dual, ...) and taking each mode's median round
    means that load from other processes on a shared machine hits every mode alike, instead of
    whichever mode happened to be timed while it lasted. Per-round times are kept in the row.
    """
    vectors, labels = clustered_vectors(n_items, seed, spread)
    ids = [f"m{i}" for i in range(n_items)]
    rng = np.random.default_rng(seed + 1)
    sources = rng.integers(0, n_items, n_queries)
    queries = vectors[sources] + rng.standard_normal((n_queries, DIM), dtype=np.float32) * (query_noise / np.sqrt(DIM))
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    row: dict = {"n_items": n_items, "n_queries": n_queries, "n_communities": int(labels.max() + 1), "k": k, "timing_rounds": rounds}
    names = {"exact": "flat", "hnsw": "hnsw", "dual": "dual"}
    retrievers: dict[str, Retriever] = {}
    for mode in ("exact", "hnsw", "dual"):
        retriever = Retriever(mode=mode, top_k=k, seed=seed)
        started = time.perf_counter()
        retriever.build(ids, vectors, labels)
        row[f"{mode}_build_s"] = time.perf_counter() - started
        row[f"memory_mb_{names[mode]}"] = retriever.memory_bytes() / 2**20
        retrievers[mode] = retriever
    del vectors
    # ground truth for every query (batched; not timed)
    _, positions = retrievers["exact"]._index.search(queries, k)
    truth = [[ids[p] for p in row_positions] for row_positions in positions]
    flat_queries = queries if n_items <= 100_000 else queries[: max(20, n_queries // 10)]  # flat at 1M: 150 ms each
    per_round: dict[str, list[float]] = {names[m]: [] for m in retrievers}
    found: dict[str, list[list[str]]] = {}
    for _ in range(rounds):
        for mode, retriever in retrievers.items():
            ms, found[mode] = timed_search(retriever, flat_queries if mode == "exact" else queries, k)
            per_round[names[mode]].append(ms)
    for name, values in per_round.items():
        row[f"{name}_ms"] = float(np.median(values))
        row[f"{name}_ms_rounds"] = values
    row["hnsw_recall_at_5"] = recall(found["hnsw"], truth, k)
    row["dual_recall_at_5"] = recall(found["dual"], truth, k)
    dual = retrievers["dual"]
    queries_seen = dual.stats["queries"]
    row["low_confidence_fallback_rate"] = dual.fallback_rate()
    row["dual_fallbacks"] = {key: dual.stats[key] for key in ("fallbacks", "multiprobe_fallbacks", "centroid_fallbacks", "exact_fallbacks")}
    row["dual_mean_candidates_scanned"] = dual.stats["candidates_scanned"] / queries_seen
    row["lsh_tables"], row["lsh_bits"] = dual._router.tables, dual._router.bits
    row["dual_speedup_vs_flat"] = row["flat_ms"] / row["dual_ms"]
    row["dual_vs_hnsw_time_ratio"] = row["dual_ms"] / row["hnsw_ms"]
    return row


# ---- plots ---------------------------------------------------------------------------------------
def fallback_rate(row: dict) -> float:
    """A retrieval row's low-confidence fallback rate, also from files written before the key was renamed."""
    return row["low_confidence_fallback_rate"] if "low_confidence_fallback_rate" in row else row["llm_fallback_rate"]


def plot(results: dict, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    by_policy: dict[str, list[dict]] = {}
    for row in results["ncs"]:
        by_policy.setdefault(row.get("community_policy", "configured"), []).append(row)
    ncs = by_policy.get("configured") or next(iter(by_policy.values()))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    xs = [r["n_nodes"] for r in ncs]
    axes[0].loglog(xs, [r["ncs_ms_per_update"] for r in ncs], "o-", label="NCS push")
    for policy, rows in by_policy.items():
        axes[0].loglog([r["n_nodes"] for r in rows], [r["amortised_ms_per_update"] for r in rows], "^-",
                       label=f"amortised: push + refresh + communities ({policy})")
    axes[0].loglog(xs, [r["full_ms_per_update"] for r in ncs], "s-", label="full recompute")
    axes[0].set(xlabel="|V|", ylabel="ms per update", title="rescoring cost per write")
    axes[0].legend(fontsize=7)
    axes[1].semilogx(xs, [r["top10_agreement_vs_full"] for r in ncs], "o-")
    axes[1].set(xlabel="|V|", ylabel="top-10 agreement", ylim=(0, 1.05), title="NCS vs full recompute")
    fig.tight_layout()
    fig.savefig(out / "scaling_ncs.png", dpi=120)
    written.append(str(out / "scaling_ncs.png"))
    plt.close(fig)

    retrieval = results["retrieval"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    xs = [r["n_items"] for r in retrieval]
    for key, label in (("flat_ms", "flat exact"), ("hnsw_ms", "HNSW"), ("dual_ms", "dual (LSH->community->exact)")):
        axes[0].loglog(xs, [r[key] for r in retrieval], "o-", label=label)
    axes[0].set(xlabel="items", ylabel="ms per query", title="retrieval latency")
    axes[0].legend()
    axes[1].semilogx(xs, [r["dual_recall_at_5"] for r in retrieval], "o-", label="dual recall@5")
    axes[1].semilogx(xs, [r["hnsw_recall_at_5"] for r in retrieval], "s-", label="HNSW recall@5")
    axes[1].semilogx(xs, [fallback_rate(r) for r in retrieval], "^--", label="low-confidence fallback rate")
    axes[1].set(xlabel="items", ylim=(0, 1.05), title="vs exact search")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(out / "scaling_retrieval.png", dpi=120)
    written.append(str(out / "scaling_retrieval.png"))
    plt.close(fig)
    return written


def carry_over_skipped(results: dict, path: Path, skipped: list[str]) -> None:
    """Keep a skipped section from the previous file of the same mode, saying where it came from,
    so that one half of the large benchmark can be re-run without discarding the other."""
    if not skipped or not path.exists():
        return
    previous = json.loads(path.read_text())
    if previous.get("mode") != results["mode"]:
        return
    for section in skipped:
        if previous.get(section):
            results[section] = previous[section]
            results.setdefault("carried_over", {})[section] = previous.get("carried_over", {}).get(section, previous.get("command"))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--tiny", action="store_true", help="seconds; for the unit test")
    size.add_argument("--small", action="store_true", help="CI mode, well under 2 minutes")
    size.add_argument("--large", action="store_true", help="up to 100k nodes and 1M vectors (long)")
    parser.add_argument("--out", default="results/bench")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--links", type=int, default=5, help="G_A edges per new node")
    parser.add_argument("--full-updates", type=int, default=5, help="updates timed for full recompute")
    parser.add_argument("--refresh-every", type=int, default=200, help="NCS minimum refresh interval (NodeScorer.refresh_every)")
    parser.add_argument("--push-epsilon", type=float, default=None, help="NCS push threshold (default: NodeScorer's)")
    parser.add_argument("--community-rerun-fraction", type=float, default=None, help="Communities.rerun_fraction (default: its own)")
    parser.add_argument("--community-local-fraction", type=float, default=None, help="Communities.local_rerun_fraction (default: its own; 0 = off)")
    parser.add_argument("--community-local-from", type=int, default=None, help="Communities.local_from_nodes (default: its own)")
    parser.add_argument("--community-backstop-fraction", type=float, default=None, help="Communities.backstop_rerun_fraction (default: its own)")
    parser.add_argument("--community-policies", nargs="+", choices=["configured", "global_only"], default=["configured"],
                        help="NCS rows per size: the configured community policy and/or global Leiden re-runs only, side by side")
    parser.add_argument("--ncs-sizes", type=int, nargs="*", help="override the mode's NCS sizes")
    parser.add_argument("--writes", type=int, default=None,
                        help="timed writes per NCS size (default: the mode's); more lets rare events (local re-runs at 100k) fall in the window")
    parser.add_argument("--retrieval-sizes", type=int, nargs="*", help="override the mode's retrieval sizes")
    parser.add_argument("--spread", type=float, default=0.75, help="item noise around its community centroid")
    parser.add_argument("--query-noise", type=float, default=0.5, help="query noise around a stored item")
    parser.add_argument("--skip-ncs", action="store_true")
    parser.add_argument("--skip-retrieval", action="store_true")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds per retrieval size (median reported)")
    args = parser.parse_args(argv)
    mode = "tiny" if args.tiny else "small" if args.small else "large" if args.large else "default"
    plan = SIZES[mode]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results: dict = {
        "schema_version": 2,
        "mode": mode,
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]) if argv is None else f"main({argv})",
        "seed": args.seed,
        "code": code_version(),  # so a published file names the sha it measured
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "query_threads": 1,
                    "build_threads": faiss.omp_get_max_threads()},
        "data": {
            "ncs": f"growing graph, {args.links} G_A links per new node (90% inside planted ~50-node communities, weight U(0.5,1)), "
            "10% of nodes add a G_P edge inside their community, importance U(0,1); Leiden communities; "
            "NCS with its own refresh policy on; each write's cost split into push, refresh and community update "
            f"(local assignment or Leiden re-run); full recompute timed on the first {args.full_updates} updates; "
            "top-10 agreement against a full recompute at 4 checkpoints",
            "retrieval": f"{DIM}-d unit vectors, two-level Gaussian mixture: topic centroids random, community centroid = "
            "normalise(topic + N(0,I/d)) with 10 communities per topic, item = normalise(centroid + "
            f"{args.spread}*N(0,I/d)), ~500 items per community; query = normalise(stored item + {args.query_noise}*N(0,I/d)); "
            "planted community labels stand in for Leiden communities; recall@5 against exact (flat) search; "
            "no LLM, so low-confidence queries use the no-LLM fallback and low_confidence_fallback_rate counts them",
        },
        "ncs": [],
        "retrieval": [],
    }
    if not args.skip_ncs:
        chosen = {key: value for key, value in (("rerun_fraction", args.community_rerun_fraction),
                                                ("local_rerun_fraction", args.community_local_fraction),
                                                ("local_from_nodes", args.community_local_from),
                                                ("backstop_rerun_fraction", args.community_backstop_fraction)) if value is not None}
        # "global_only": Leiden re-runs over all of G_A only (the policy before local re-runs), for a side-by-side row
        policies = {"configured": chosen, "global_only": {**chosen, "local_rerun_fraction": 0.0}}
        for n_nodes in args.ncs_sizes or plan["ncs"]:
            for policy in args.community_policies:
                row = bench_ncs(n_nodes, args.writes or plan["updates"], args.full_updates, args.seed, args.links, args.refresh_every,
                                args.push_epsilon, community_kwargs=policies[policy])
                row["community_policy"] = policy
                results["ncs"].append(row)
                print(json.dumps(row), flush=True)
    if not args.skip_retrieval:
        for n_items in args.retrieval_sizes or plan["retrieval"]:
            row = bench_retrieval(n_items, plan["queries"], args.seed, args.spread, args.query_noise, rounds=args.rounds)
            results["retrieval"].append(row)
            print(json.dumps(row), flush=True)
    results["elapsed_s"] = time.perf_counter() - started
    path = out / "scaling.json"
    carry_over_skipped(results, path, skipped=[name for name, skip in (("ncs", args.skip_ncs), ("retrieval", args.skip_retrieval)) if skip])
    path.write_text(json.dumps(results, indent=2))
    if results["ncs"] and results["retrieval"]:
        results["plots"] = plot(results, out)
        path.write_text(json.dumps(results, indent=2))
    print(path)
    return results


if __name__ == "__main__":
    main()
