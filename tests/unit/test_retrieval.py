"""Retriever: the LSH hash is FAISS IndexLSH's, routing is deterministic under a seed, the three
modes agree with exact search on easy clustered data, and fallbacks are counted."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from mosaic.retrieval import LSHCommunityRouter, Retriever
from tests.fakes import FakeLLM

DIM = 384


def clustered(n_communities: int = 8, per_community: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centroids = rng.standard_normal((n_communities, DIM)).astype(np.float32)
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    labels = np.repeat(np.arange(n_communities), per_community)
    vectors = centroids[labels] + 0.6 * rng.standard_normal((len(labels), DIM)).astype(np.float32) / np.sqrt(DIM)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors.astype(np.float32), labels


def near(vectors: np.ndarray, rows: list[int], seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    queries = vectors[rows] + 0.3 * rng.standard_normal((len(rows), DIM)).astype(np.float32) / np.sqrt(DIM)
    return queries / np.linalg.norm(queries, axis=1, keepdims=True)


def test_codes_are_indexlsh_codes_cut_into_tables():
    vectors, labels = clustered()
    router = LSHCommunityRouter(DIM, tables=6, bits=10, seed=3)
    router.fit(vectors, labels)
    packed = router.index.sa_encode(vectors)
    bits = np.unpackbits(packed, axis=1, bitorder="little")[:, :60].reshape(len(vectors), 6, 10)
    expected = (bits.astype(np.int64) << np.arange(10)).sum(axis=2)
    assert np.array_equal(router.codes(vectors), expected)


def test_lsh_routing_is_deterministic_under_a_seed():
    vectors, labels = clustered()
    queries = near(vectors, list(range(0, 480, 37)))

    def route(seed: int) -> list:
        router = LSHCommunityRouter(DIM, tables=8, bits=8, seed=seed)
        router.fit(vectors, labels)
        return [[part.tolist() if hasattr(part, "tolist") else part for part in router.vote(q, hamming_radius=1)] for q in queries]

    assert route(11) == route(11)
    assert route(11) != route(12)


def test_votes_favour_the_query_community():
    vectors, labels = clustered()
    router = LSHCommunityRouter(DIM, tables=8, bits=6, seed=0)
    router.fit(vectors, labels)
    rows = list(range(5, 480, 40))
    for row, query in zip(rows, near(vectors, rows)):
        communities, votes, hits = router.vote(query)
        assert hits > 0 and communities[int(np.argmax(votes))] == labels[row]


@pytest.mark.parametrize("mode", ["dual", "hnsw", "exact"])
def test_modes_agree_with_exact_on_easy_data(mode):
    vectors, labels = clustered()
    ids = [f"m{i}" for i in range(len(vectors))]
    rows = list(range(3, 480, 23))
    queries = near(vectors, rows)
    truth = [set(np.argsort(-(vectors @ q))[:5].tolist()) for q in queries]
    retriever = Retriever(mode=mode, top_k=5, seed=0)
    retriever.build(ids, vectors, labels)
    recalls = []
    for query, expected in zip(queries, truth):
        found = retriever.search(query, "", 5)
        assert len(found) == 5 and all(a[1] >= b[1] for a, b in zip(found, found[1:]))
        recalls.append(len({int(i[1:]) for i, _ in found} & expected) / 5)
    assert np.mean(recalls) >= 0.95
    if mode == "dual":
        assert retriever.stats["queries"] == len(rows)
        assert retriever.stats["candidates_scanned"] < len(rows) * len(vectors)  # it did not scan everything


class VectorGraph:
    def __init__(self, vectors: np.ndarray) -> None:
        self.ids = [f"e{i}" for i in range(len(vectors))]
        self.vectors = vectors

    def matrix(self):
        return self.ids, self.vectors

    def entity(self, entity_id: str):
        return SimpleNamespace(text=f"memory {entity_id}")


class LabelCommunities:
    def __init__(self, ids: list[str], labels: np.ndarray) -> None:
        self.map = dict(zip(ids, labels.tolist()))

    def get(self, entity_id: str, default: int = -1) -> int:
        return self.map.get(entity_id, default)


def test_low_confidence_calls_the_llm_router_and_counts_it():
    vectors, labels = clustered()
    graph = VectorGraph(vectors)
    target = int(labels[100])
    llm = FakeLLM(lambda messages, schema: {"communities": [target]})
    retriever = Retriever(mode="dual", top_k=5, llm=llm, min_similarity=0.99, seed=0)  # nothing is that similar
    retriever.rebuild(graph, LabelCommunities(graph.ids, labels))
    found = retriever.search(near(vectors, [100])[0], "what about memory e100?", 5)
    assert [r.get("purpose") for r in llm.requests] == ["routing"]
    assert retriever.stats["fallbacks"] == 1 and retriever.stats["llm_fallbacks"] == 1
    assert "e100" in {entity_id for entity_id, _ in found}
    assert "memory e" in llm.requests[0]["messages"][-1]["content"]


def test_without_llm_an_unsure_query_falls_back_to_searching_more():
    vectors, labels = clustered()
    retriever = Retriever(mode="dual", top_k=5, min_similarity=0.99, seed=0)
    retriever.build([f"m{i}" for i in range(len(vectors))], vectors, labels)
    query = near(vectors, [42])[0]
    found = retriever.search(query, "", 5)
    expected = [f"m{i}" for i in np.argsort(-(vectors @ query))[:5]]
    assert [entity_id for entity_id, _ in found] == expected
    assert retriever.stats["fallbacks"] == 1 and retriever.stats["exact_fallbacks"] == 1
    assert retriever.fallback_rate() == 1.0


def test_unknown_mode_is_rejected():
    with pytest.raises(ValueError, match="retrieval.mode"):
        Retriever(mode="ivf")
