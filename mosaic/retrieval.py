"""Vector retrieval over memory entities: ``exact`` (flat), ``hnsw`` (FAISS HNSW) or ``dual`` (mech. 2).

Dual path: a FAISS ``IndexLSH`` (seeded random rotation, per-bit median thresholds) hashes every
stored vector into ``lsh_tables`` tables of ``lsh_bits`` bits each; a table's bucket remembers how
many of its items belong to each community. A query is hashed the same way and its buckets vote
for communities (sorted-array lookups, so the cost does not grow with the number of items beyond
a log factor). Exact inner-product search then runs only over the members of the candidate
communities, each stored contiguously so that its scan is one matrix slice. Exact search inside
the candidates (rather than one HNSW per community) keeps recall within them at 1, and the
candidates are a few communities, so the scan is short.

Confidence = (share of tables whose bucket was non-empty) x (1 - best vote left out / top vote),
i.e. the chosen communities must clearly out-vote the rest. When it is below
``confidence_threshold``, when the candidates hold fewer than ``min_candidates`` items, or when the best similarity found is below ``min_similarity``, the query
falls back: with an LLM, a routing call (purpose="routing") picks communities from short
descriptions of the communities nearest by centroid; without one, buckets at Hamming distance 1
are probed too, then the communities nearest by centroid are searched, and if even that finds
nothing similar enough the search runs over everything. Every fallback is counted in ``stats``.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Annotated, Any, Callable, Iterable, Literal, Protocol

import faiss
import numpy as np
from pydantic import Field

from core.config_check import Cosine, Count, Positive, Share, Size

log = logging.getLogger(__name__)

Mode = Literal["dual", "exact", "hnsw"]


class _HasText(Protocol):
    text: str


class VectorGraph(Protocol):
    """The part of MemoryGraph the retriever reads."""

    def matrix(self) -> tuple[list[str], np.ndarray]: ...

    def entity(self, entity_id: str) -> _HasText: ...


class CommunityLookup(Protocol):
    def get(self, entity_id: str, default: int = -1) -> int: ...


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


class LSHCommunityRouter:
    """Maps a vector to candidate communities through LSH bucket votes.

    The hash is FAISS ``IndexLSH`` (random rotation seeded with ``seed``, per-bit median
    thresholds trained on the stored vectors); its ``tables * bits`` bits are cut into ``tables``
    keys of ``bits`` bits. Every (table, key) bucket stores the share of its items in each
    community, in flat sorted arrays, so a query costs one
    ``searchsorted`` over all tables plus work proportional to what its buckets hold.
    """

    def __init__(self, dim: int, tables: int, bits: int, seed: int) -> None:
        if tables * bits > dim:
            raise ValueError(f"retrieval: lsh_tables*lsh_bits = {tables * bits} must be <= the vector size {dim}")
        if not 1 <= bits <= 40:
            raise ValueError(f"retrieval.lsh_bits must be in [1, 40], got {bits}")
        self.tables, self.bits = tables, bits
        self.index = faiss.IndexLSH(dim, tables * bits, True, True)
        self._rotation = faiss.downcast_VectorTransform(self.index.rrot)
        self._rotation.init(seed)  # faiss fixes its own seed; use ours
        self._thresholds = np.zeros(tables * bits, np.float32)
        self._projection = np.zeros((dim, tables * bits), np.float32)
        self._weights = (np.int64(1) << np.arange(bits, dtype=np.int64)).astype(np.int64)
        self._table_offset = (np.arange(tables, dtype=np.int64) << bits).astype(np.int64)
        self._keys = np.zeros(0, np.int64)  # (table << bits) | code, sorted
        self._offsets = np.zeros(1, np.int64)  # bucket b holds entries offsets[b]:offsets[b+1]
        self._communities = np.zeros(0, np.int64)
        self._shares = np.zeros(0, np.float64)
        self._n_labels = 0

    def codes(self, vectors: np.ndarray) -> np.ndarray:
        """(n, tables) int64 bucket keys, identical to IndexLSH.sa_encode's bits cut per table."""
        # IndexLSH's own hash (its rotation matrix, its trained thresholds), applied with numpy:
        # IndexLSH.sa_encode starts OpenMP threads even for one vector, which costs milliseconds
        # on a busy machine, for a 384 x bits product
        projected = np.ascontiguousarray(vectors, dtype=np.float32) @ self._projection
        bits = (projected > self._thresholds).reshape(len(vectors), self.tables, self.bits)
        return bits.astype(np.int64) @ self._weights

    def fit(self, vectors: np.ndarray, communities: np.ndarray, chunk: int = 100_000) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.index.train(vectors)
        self._thresholds = faiss.vector_to_array(self.index.thresholds).astype(np.float32)
        rotation = faiss.vector_to_array(self._rotation.A).reshape(self._rotation.d_out, self._rotation.d_in)
        self._projection = np.ascontiguousarray(rotation.T, dtype=np.float32)
        codes = np.concatenate([self.codes(vectors[i : i + chunk]) for i in range(0, len(vectors), chunk)])
        keys = (codes + self._table_offset).reshape(-1)
        labels = np.repeat(communities.astype(np.int64), self.tables)
        pairs, counts = np.unique(np.stack([keys, labels], axis=1), axis=0, return_counts=True)
        bucket_keys, starts = np.unique(pairs[:, 0], return_index=True)
        sizes = np.add.reduceat(counts, starts)
        self._keys = bucket_keys
        self._offsets = np.append(starts, len(pairs)).astype(np.int64)
        self._communities = pairs[:, 1].copy()
        self._shares = counts / np.repeat(sizes, np.diff(self._offsets))
        self._n_labels = int(communities.max()) + 1 if len(communities) else 0

    def vote(self, vector: np.ndarray, hamming_radius: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
        """Communities that got votes (ascending ids), their votes summed over tables (a non-empty
        bucket gives one vote, split by membership; Hamming-1 neighbours, when probed, count
        1/bits each), and how many tables' own buckets were non-empty."""
        codes = self.codes(vector[None, :])[0]
        own = codes + self._table_offset
        buckets, found = self._find(own)
        hits = int(found.sum())
        probes, weights = [buckets[found]], [np.ones(int(found.sum()))]
        if hamming_radius >= 1:
            flips = (own[:, None] ^ (np.int64(1) << np.arange(self.bits, dtype=np.int64))[None, :]).reshape(-1)
            near, near_found = self._find(flips)
            probes.append(near[near_found])
            weights.append(np.full(int(near_found.sum()), 1.0 / self.bits))
        buckets, weights_per_bucket = np.concatenate(probes), np.concatenate(weights)
        if not len(buckets):
            return np.zeros(0, np.int64), np.zeros(0), hits
        starts, ends = self._offsets[buckets], self._offsets[buckets + 1]
        lengths = ends - starts
        entries = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
        communities = self._communities[entries]
        weights_per_entry = self._shares[entries] * np.repeat(weights_per_bucket, lengths)
        # community ids are small dense integers: one bincount, no sort (np.unique) per query
        totals = np.bincount(communities, weights=weights_per_entry, minlength=self._n_labels)
        unique = np.flatnonzero(totals)
        return unique, totals[unique], hits

    def _find(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Bucket positions of ``keys`` and whether each exists."""
        positions = np.searchsorted(self._keys, keys)
        clipped = np.minimum(positions, max(len(self._keys) - 1, 0))
        found = (positions < len(self._keys)) & (self._keys[clipped] == keys) if len(self._keys) else np.zeros(len(keys), bool)
        return clipped, found

    def memory_bytes(self) -> int:
        arrays = (self._keys, self._offsets, self._communities, self._shares, self._projection, self._thresholds)
        return int(sum(a.nbytes for a in arrays))


class TurnIndex:
    """Exact cosine search over the texts of the turns a memory ingested (provenance matching).

    Why: an entity is a short paraphrase of its turn, and on a whole LoCoMo conversation the paraphrase
    often matches a question worse than the turn's own words do (the conv-26 error analysis in
    docs/results_history.md, "LoCoMo at conversation scale": 57 of 150 questions had their evidence held but ranked below 10 by exact search over entities).
    Turns are embedded once, at the first search after they arrive, and appended; a flat index keeps
    recall at 1. ``held`` maps a turn to the held entities extracted from it, rebuilt with the entity
    index (after writes, before the next search), so a query costs no pass over memory.
    """

    def __init__(self) -> None:
        self.ids: list[str] = []
        self._known: set[str] = set()
        self._index: Any = None
        self.held: dict[str, list[str]] = {}

    def refresh(self, texts: dict[str, str], entities: Iterable[Any], encode: Callable[[list[str]], np.ndarray]) -> None:
        """Index the turns of ``texts`` not indexed yet and map every turn to the ``entities`` (held ones,
        with ``entity_id`` and ``source_turn_ids``) extracted from it."""
        self.extend(texts, encode)
        self.held = {}
        for entity in entities:
            for turn_id in entity.source_turn_ids:
                self.held.setdefault(turn_id, []).append(entity.entity_id)

    def __len__(self) -> int:
        return len(self.ids)

    def extend(self, texts: dict[str, str], encode: Callable[[list[str]], np.ndarray]) -> int:
        """Embed and add the turns of ``texts`` (turn id -> text) not indexed yet; returns how many."""
        new = [turn_id for turn_id in texts if turn_id not in self._known]
        if not new:
            return 0
        vectors = _normalise(np.asarray(encode([texts[turn_id] for turn_id in new]), dtype=np.float32))
        if self._index is None:
            self._index = faiss.IndexFlatIP(vectors.shape[1])
        self._index.add(vectors)
        self.ids.extend(new)
        self._known.update(new)
        return len(new)

    def search(self, query_vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """Top-``k`` (turn id, cosine similarity), best first."""
        if not self.ids or k <= 0:
            return []
        query = _normalise(np.asarray(query_vector, dtype=np.float32).reshape(1, -1))
        scores, positions = self._index.search(query, min(k, len(self.ids)))
        return [(self.ids[p], float(s)) for s, p in zip(scores[0], positions[0]) if p >= 0]


class Retriever:
    """Finds the entities most similar to a query vector, by one of three modes (see module doc)."""

    def __init__(
        self,
        mode: Mode = "dual",
        top_k: Count = 5,
        lsh_bits: Annotated[int, Field(ge=1, le=40)] | None = None,  # bits per table; null: chosen from community size
        lsh_tables: Count = 24,
        confidence_threshold: Share = 0.3,
        vote_ratio: Share = 0.5,
        max_communities: Count = 4,
        min_candidates: Count | None = None,  # null: 4 * k
        min_similarity: Cosine = 0.2,
        llm: Any | None = None,
        seed: Size = 0,
        hnsw_m: Count = 32,
        hnsw_ef_search: Count = 64,
        hnsw_ef_construction: Count = 80,
        route_describe: Count = 10,
        route_max_tokens: Count = 64,
        auto_bits_member_cosine: Annotated[float, Field(gt=0, lt=1)] = 0.57,  # typical cosine of two community members
        auto_bits_per_bucket: Positive = 4.0,
        with_source_turns: bool = False,
        match_source_turns: bool = False,
    ) -> None:
        self.mode = mode
        self.top_k = top_k
        self.lsh_bits = lsh_bits
        self.lsh_tables = lsh_tables
        self.confidence_threshold = confidence_threshold
        self.vote_ratio = vote_ratio
        self.max_communities = max_communities
        self.min_candidates = min_candidates
        self.min_similarity = min_similarity
        self.llm = llm
        self.seed = seed
        self.hnsw_m, self.hnsw_ef_search, self.hnsw_ef_construction = hnsw_m, hnsw_ef_search, hnsw_ef_construction
        self.route_describe = route_describe
        self.route_max_tokens = route_max_tokens
        self.auto_bits_member_cosine, self.auto_bits_per_bucket = auto_bits_member_cosine, auto_bits_per_bucket
        # provenance retrieval: not used by the vector search itself; the memory's search reads it to
        # attach each hit's source turn texts (off: entities only, the paper's behaviour)
        self.with_source_turns = bool(with_source_turns)
        # provenance matching: the memory's search also ranks a held entity by its source turns' similarity
        # to the query (exact search over the kept turn texts, TurnIndex); false = entity texts only (paper)
        self.match_source_turns = bool(match_source_turns)
        self.turns = TurnIndex()
        # entities scanned per query -> number of queries: bounded memory, exact mean and percentiles
        self.scan_histogram: Counter[int] = Counter()
        self.ids: list[str] = []
        self._vectors = np.zeros((0, 0), np.float32)
        self._index: Any = None
        self._router: LSHCommunityRouter | None = None
        self._slices: dict[int, tuple[int, int]] = {}
        self._centroids = np.zeros((0, 0), np.float32)
        self._community_order: list[int] = []
        self._describe: Callable[[int], str] = lambda community: ""
        self.stats: dict[str, Any] = {
            "queries": 0,
            "lsh_hits": 0,
            "fallbacks": 0,
            "llm_fallbacks": 0,
            "llm_route_failures": 0,
            "multiprobe_fallbacks": 0,
            "centroid_fallbacks": 0,
            "exact_fallbacks": 0,
            "candidates_scanned": 0,
            "turn_matches": 0,  # entities whose search similarity came from a source turn (match_source_turns)
        }

    # ---- building --------------------------------------------------------------------------
    def rebuild(self, graph: VectorGraph, communities: CommunityLookup | None) -> None:
        """Index the active entities of ``graph`` (O(n); call after writes, before the next search)."""
        ids, matrix = graph.matrix()
        labels = [communities.get(entity_id, -1) if communities is not None else 0 for entity_id in ids]
        # nodes without a community each form their own group
        next_label = max(labels, default=-1) + 1
        for i, label in enumerate(labels):
            if label < 0:
                labels[i], next_label = next_label, next_label + 1
        texts = {entity_id: graph.entity(entity_id).text for entity_id in ids} if self.llm is not None else {}
        self.build(ids, matrix, np.asarray(labels, dtype=np.int64), describe_texts=texts)

    def build(self, ids: list[str], vectors: np.ndarray, communities: np.ndarray, describe_texts: dict[str, str] | None = None) -> None:
        """Index ``vectors`` (one row per id) labelled with ``communities`` (used by the dual mode)."""
        if len(ids) != len(vectors) or len(ids) != len(communities):
            raise ValueError(f"retrieval.build: {len(ids)} ids, {len(vectors)} vectors, {len(communities)} labels")
        vectors = _normalise(vectors) if len(vectors) else np.zeros((0, vectors.shape[1] if vectors.ndim == 2 else 0), np.float32)
        order = np.argsort(communities, kind="stable") if self.mode == "dual" else np.arange(len(ids))
        self.ids = [ids[i] for i in order]
        self._vectors = np.ascontiguousarray(vectors[order])
        dim = self._vectors.shape[1] if self._vectors.ndim == 2 else 0
        if self.mode == "exact" and len(ids):
            self._index = faiss.IndexFlatIP(dim)
            self._index.add(self._vectors)
        elif self.mode == "hnsw" and len(ids):
            self._index = faiss.IndexHNSWFlat(dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            self._index.hnsw.efConstruction = self.hnsw_ef_construction
            self._index.hnsw.efSearch = self.hnsw_ef_search
            self._index.add(self._vectors)
        elif self.mode == "dual" and len(ids):
            labels = communities[order]
            bounds = np.flatnonzero(np.diff(labels)) + 1
            starts = np.concatenate([[0], bounds])
            ends = np.concatenate([bounds, [len(labels)]])
            self._community_order = [int(labels[s]) for s in starts]
            self._slices = {int(labels[s]): (int(s), int(e)) for s, e in zip(starts, ends)}
            self._centroids = _normalise(np.stack([self._vectors[s:e].mean(axis=0) for s, e in zip(starts, ends)]))
            self._router = LSHCommunityRouter(dim, self.lsh_tables, self.table_bits(dim, len(ids) / len(starts)), self.seed)
            self._router.fit(self._vectors, labels)
            texts = describe_texts or {}
            self._describe = lambda community: " | ".join(
                texts.get(self.ids[i], "")[:80] for i in range(self._slices[community][0], min(self._slices[community][1], self._slices[community][0] + 3))
            )

    def check_dim(self, dim: int) -> None:
        """Fail now, not at the first search, when the LSH settings cannot fit ``dim``-d vectors."""
        if self.mode == "dual":
            self.table_bits(dim, 1.0)

    def table_bits(self, dim: int, mean_community_size: float) -> int:
        """Bits per LSH table: ``lsh_bits`` when set (too many for ``lsh_tables`` tables of a ``dim``-bit
        hash is an error), else ``auto_bits`` capped at what ``lsh_tables`` tables leave (dim // tables)."""
        if self.lsh_tables > dim:
            raise ValueError(f"retrieval.lsh_tables={self.lsh_tables} exceeds the vector size {dim}: at most {dim} one-bit tables")
        if self.lsh_bits is not None:
            if self.lsh_tables * self.lsh_bits > dim:
                raise ValueError(f"retrieval: lsh_tables*lsh_bits = {self.lsh_tables}*{self.lsh_bits} exceeds the vector size {dim}; "
                                 f"lower retrieval.lsh_bits to <= {dim // self.lsh_tables} or retrieval.lsh_tables to <= {dim // self.lsh_bits}")
            return self.lsh_bits
        bits = self.auto_bits(mean_community_size, self.auto_bits_member_cosine, self.auto_bits_per_bucket)
        return min(bits, dim // self.lsh_tables)

    @staticmethod
    def auto_bits(mean_community_size: float, member_cosine: float = 0.57, per_bucket: float = 4.0) -> int:
        """Bits per table so that a query's bucket holds about ``per_bucket`` members of its own
        community: SimHash keeps a bit with probability 1 - angle/pi, so a member at cosine
        ``member_cosine`` shares all b bits with probability p**b; solve size * p**b = per_bucket.
        Random collisions shrink as 2**-b, so this depends on community size, not on n."""
        keep = 1.0 - np.arccos(member_cosine) / np.pi
        bits = np.log(max(mean_community_size, 1.0) / per_bucket) / np.log(1.0 / keep)
        return int(np.clip(round(bits), 4, 20))

    # ---- searching -------------------------------------------------------------------------
    def search(self, query_vector: np.ndarray, query_text: str = "", k: int | None = None) -> list[tuple[str, float]]:
        """Top-``k`` (entity id, cosine similarity), best first."""
        k = k or self.top_k
        self.stats["queries"] += 1
        if not self.ids:
            return []
        query = _normalise(np.asarray(query_vector, dtype=np.float32).reshape(-1))
        if self.mode in ("exact", "hnsw"):
            if self.mode == "exact":
                self.scan_histogram[len(self.ids)] += 1  # a flat index scores every entity
            scores, positions = self._index.search(query[None, :], min(k, len(self.ids)))
            return [(self.ids[p], float(s)) for s, p in zip(scores[0], positions[0]) if p >= 0]
        scanned_before = self.stats["candidates_scanned"]
        results = self._dual(query, query_text, k)
        self.scan_histogram[self.stats["candidates_scanned"] - scanned_before] += 1
        return results

    def _dual(self, query: np.ndarray, query_text: str, k: int) -> list[tuple[str, float]]:
        assert self._router is not None
        needed = min(len(self.ids), self.min_candidates or 4 * k)
        chosen, confidence = self._choose(*self._router.vote(query), needed)
        results = self._scan(query, chosen, k) if chosen else []
        if confidence >= self.confidence_threshold and self._good(results, chosen, needed):
            self.stats["lsh_hits"] += 1
            return results
        self.stats["fallbacks"] += 1
        if self.llm is not None:
            routed = self._route_with_llm(query, query_text)
            if routed:
                self.stats["llm_fallbacks"] += 1
                return self._scan(query, sorted(set(routed) | set(chosen)), k)
        else:
            chosen, confidence = self._choose(*self._router.vote(query, hamming_radius=1), needed)
            results = self._scan(query, chosen, k) if chosen else []
            if confidence >= self.confidence_threshold and self._good(results, chosen, needed):
                self.stats["multiprobe_fallbacks"] += 1
                return results
            nearest = self._nearest_communities(query, self.max_communities)
            chosen = list(dict.fromkeys([*nearest, *chosen[: self.max_communities]]))
            results = self._scan(query, chosen, k)
            if self._good(results, chosen, needed):
                self.stats["centroid_fallbacks"] += 1
                return results
        self.stats["exact_fallbacks"] += 1
        return self._scan(query, self._community_order, k)

    def _choose(self, communities: np.ndarray, votes: np.ndarray, hits: int, needed: int) -> tuple[list[int], float]:
        """Candidate communities and the confidence in them.

        Chosen: communities whose vote is at least ``vote_ratio`` x the top vote (at most
        ``max_communities``; more, by vote, only to reach ``needed`` items). Confidence =
        (share of tables whose bucket was non-empty) x (1 - best vote left out / top vote): high
        when the tables found something and the chosen communities clearly beat the rest, low
        when votes are spread over many communities about equally (random collisions only)."""
        if not len(communities):
            return [], 0.0
        order = np.argsort(-votes, kind="stable")  # ties: lower community id first
        top = float(votes[order[0]])
        chosen: list[int] = []
        size = 0
        for position in order:
            community = int(communities[position])
            strong = votes[position] >= self.vote_ratio * top and len(chosen) < self.max_communities
            if not strong and size >= needed:
                break
            chosen.append(community)
            start, end = self._slices[community]
            size += end - start
        left_out = float(votes[order[len(chosen)]]) if len(chosen) < len(order) else 0.0
        confidence = (hits / self._router.tables) * (1.0 - left_out / top) if self._router else 0.0
        return chosen, confidence

    def _good(self, results: list[tuple[str, float]], chosen: list[int], needed: int) -> bool:
        size = sum(self._slices[c][1] - self._slices[c][0] for c in chosen)
        return size >= needed and bool(results) and results[0][1] >= self.min_similarity

    def _scan(self, query: np.ndarray, communities: list[int], k: int) -> list[tuple[str, float]]:
        """Exact inner product over the members of ``communities`` (contiguous slices of the matrix)."""
        spans = [self._slices[c] for c in communities if c in self._slices]
        if not spans:
            return []
        if len(spans) == len(self._slices):
            spans = [(0, len(self.ids))]
        scores = np.concatenate([self._vectors[s:e] @ query for s, e in spans]) if len(spans) > 1 else self._vectors[spans[0][0] : spans[0][1]] @ query
        self.stats["candidates_scanned"] += len(scores)
        top = min(k, len(scores))
        best = np.argpartition(-scores, top - 1)[:top]
        best = best[np.argsort(-scores[best], kind="stable")]
        starts = np.cumsum([0] + [e - s for s, e in spans])
        span_of = np.searchsorted(starts, best, side="right") - 1
        return [(self.ids[spans[j][0] + int(i - starts[j])], float(scores[i])) for i, j in zip(best, span_of)]

    def _nearest_communities(self, query: np.ndarray, count: int) -> list[int]:
        """Communities whose mean vector is most similar to the query (O(#communities))."""
        similarity = self._centroids @ query
        count = min(count, len(similarity))
        best = np.argpartition(-similarity, count - 1)[:count]
        best = best[np.argsort(-similarity[best], kind="stable")]
        return [self._community_order[i] for i in best]

    def _route_with_llm(self, query: np.ndarray, query_text: str) -> list[int]:
        """Ask the LLM which communities (shortlisted by centroid similarity) the query is about."""
        shortlist = self._nearest_communities(query, self.route_describe)
        lines = [f"{c}: {self._describe(c)}" for c in shortlist]
        schema = {
            "type": "object",
            "properties": {"communities": {"type": "array", "items": {"type": "integer"}}},
            "required": ["communities"],
        }
        messages = [
            {"role": "system", "content": "You route a question to the memory groups that can answer it. Reply with JSON."},
            {
                "role": "user",
                "content": f"Question: {query_text}\n\nMemory groups (id: sample memories):\n" + "\n".join(lines)
                + '\n\nReturn {"communities": [ids]} with the 1-3 group ids most likely to hold the answer.',
            },
        ]
        try:
            answer = self.llm.chat_json(messages, schema, max_tokens=self.route_max_tokens, purpose="routing")
            routed = [int(c) for c in answer.get("communities", []) if int(c) in self._slices]
        except Exception as err:  # noqa: BLE001 - a broken routing answer is a counted fallback, not a crash
            log.warning("LLM routing failed, searching everything: %s", err)
            self.stats["llm_route_failures"] += 1
            return []
        if not routed:
            self.stats["llm_route_failures"] += 1
        return routed

    # ---- reporting -------------------------------------------------------------------------
    def memory_bytes(self) -> int:
        """Bytes held by this mode's index (vectors included)."""
        if self.mode in ("exact", "hnsw"):
            return len(faiss.serialize_index(self._index)) if self._index is not None else 0
        router = self._router.memory_bytes() if self._router else 0
        return int(self._vectors.nbytes + self._centroids.nbytes + router)

    def fallback_rate(self) -> float:
        return self.stats["fallbacks"] / self.stats["queries"] if self.stats["queries"] else 0.0
