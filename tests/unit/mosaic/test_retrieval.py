"""Retriever: the LSH hash is FAISS IndexLSH's, routing is deterministic under a seed, the three
modes agree with exact search on easy clustered data, and fallbacks are counted."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

from mosaic.retrieval import LSHCommunityRouter, Retriever
from tests.fakes import FakeLLM
from core.config_check import check_kwargs

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


TOPICS = ["cycling", "baking", "chess", "sailing", "pottery", "astronomy", "gardening", "fencing"]


class VectorGraph:
    """Entities whose text names their community's topic, so a router can be judged on what it is shown."""

    def __init__(self, vectors: np.ndarray, labels: np.ndarray) -> None:
        self.ids = [f"e{i}" for i in range(len(vectors))]
        self.vectors = vectors
        self.texts = {entity_id: f"a note about {TOPICS[label]} ({entity_id})" for entity_id, label in zip(self.ids, labels.tolist())}

    def matrix(self):
        return self.ids, self.vectors

    def entity(self, entity_id: str):
        return SimpleNamespace(text=self.texts[entity_id])


class LabelCommunities:
    def __init__(self, ids: list[str], labels: np.ndarray) -> None:
        self.map = dict(zip(ids, labels.tolist()))

    def get(self, entity_id: str, default: int = -1) -> int:
        return self.map.get(entity_id, default)


def reading_router(messages, schema):
    """Routes by reading the prompt: the groups whose sample memories name the question's topic."""
    prompt = messages[-1]["content"]
    question = prompt.split("\n", 1)[0]
    topic = next(t for t in TOPICS if t in question)
    groups = [line.split(": ", 1) for line in prompt.split("\n") if re.match(r"^\d+: ", line)]
    return {"communities": [int(gid) for gid, sample in groups if topic in sample]}


def _dual(llm=None, **kwargs) -> tuple[Retriever, np.ndarray, np.ndarray]:
    vectors, labels = clustered()
    graph = VectorGraph(vectors, labels)
    retriever = Retriever(mode="dual", top_k=5, llm=llm, seed=0, **kwargs)
    retriever.rebuild(graph, LabelCommunities(graph.ids, labels))
    return retriever, vectors, labels


def test_low_confidence_calls_the_llm_router_which_is_shown_each_group_and_counted():
    llm = FakeLLM(reading_router)
    retriever, vectors, labels = _dual(llm, min_similarity=0.99, route_describe=3, route_max_tokens=33)  # nothing is that similar
    found = retriever.search(near(vectors, [100])[0], f"what did I write about {TOPICS[labels[100]]}?", 5)
    [request] = llm.requests
    assert request["purpose"] == "routing" and request["max_tokens"] == 33
    groups = [line for line in request["messages"][-1]["content"].split("\n") if re.match(r"^\d+: ", line)]
    assert len(groups) == 3  # route_describe communities, nearest by centroid
    assert retriever.stats["fallbacks"] == 1 and retriever.stats["llm_fallbacks"] == 1 and retriever.stats["llm_route_failures"] == 0
    expected = [f"e{i}" for i in np.argsort(-(vectors @ near(vectors, [100])[0]))[:5]]
    assert [entity_id for entity_id, _ in found] == expected  # the routed community holds the true top 5


def test_lsh_confidence_below_the_threshold_is_a_fallback_even_when_results_look_good():
    query = None
    for threshold, fallbacks in ((0.0, 0), (1.01, 1)):  # confidence is at most 1
        retriever, vectors, _ = _dual(confidence_threshold=threshold, min_similarity=0.0)
        query = near(vectors, [200])[0]
        retriever.search(query, "", 5)
        assert retriever.stats["fallbacks"] == fallbacks and retriever.stats["lsh_hits"] == 1 - fallbacks, threshold
    assert retriever.stats["multiprobe_fallbacks"] + retriever.stats["centroid_fallbacks"] + retriever.stats["exact_fallbacks"] == 1


@pytest.mark.parametrize("answer", [RuntimeError("server gone"), {"communities": [999]}, "not json"])
def test_a_failing_routing_call_is_counted_and_the_search_still_answers(answer):
    def responder(messages, schema):
        if isinstance(answer, Exception):
            raise answer
        return answer

    retriever, vectors, _ = _dual(FakeLLM(responder), min_similarity=0.99)
    query = near(vectors, [300])[0]
    found = retriever.search(query, "where is it?", 5)
    assert retriever.stats["llm_route_failures"] == 1 and retriever.stats["llm_fallbacks"] == 0 and retriever.stats["exact_fallbacks"] == 1
    assert [entity_id for entity_id, _ in found] == [f"e{i}" for i in np.argsort(-(vectors @ query))[:5]]


def test_lsh_tables_and_bits_must_fit_the_vector():
    vectors, labels = clustered()
    too_many = Retriever(mode="dual", lsh_tables=24, lsh_bits=17)
    with pytest.raises(ValueError, match=r"lsh_tables\*lsh_bits = 24\*17 exceeds the vector size 384"):
        too_many.build([f"m{i}" for i in range(len(vectors))], vectors, labels)
    auto = Retriever(mode="dual", lsh_tables=24)  # auto bits are capped at 384 // 24 = 16, never fewer tables
    assert auto.table_bits(DIM, mean_community_size=1e9) == 16
    auto.build([f"m{i}" for i in range(len(vectors))], vectors, labels)
    assert auto._router is not None and auto._router.tables == 24


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
        check_kwargs(Retriever, {"mode": "ivf"}, "system.retrieval")
