"""The append-only baseline: turn chunks embedded into FAISS, top-k by cosine similarity.

Nothing is ever updated or rejected, so it raises no conflict signal; it is the floor that
save-time conflict checking has to beat.

``source="oracle"`` ("rag over oracle facts"): the same append-only store over the gold
facts a benchmark attached to the turns (``Turn.oracle_facts``), one document per fact with its
source turn ids, instead of the raw turns: the append-only twin of MOSAIC with the oracle extractor.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.embed import Embedder
from core.api import AddReport, Retrieved, StoredItem, Turn

SOURCES = ("turns", "oracle")  # what one document is: a chunk of turns, or one gold fact attached to a turn


@dataclass
class Chunk:
    memory_id: str
    text: str
    source_turn_ids: list[str]
    timestamp: str | None
    fact_id: str | None = None  # source=oracle: the gold fact this document is


@dataclass
class _Namespace:
    chunks: list[Chunk] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list)
    index: Any = None


def chunk_text(turns: list[Turn]) -> str:
    return "\n".join(f"{turn.speaker}: {turn.text}" for turn in turns)


class RagMemory:
    """One chunk per ``chunk_turns`` consecutive turns of one add call (``source="turns"``), or one document per
    gold fact attached to the turns (``source="oracle"``); IndexFlatIP over unit vectors."""

    conflict_signal = False  # append-only: never updates, rejects or flags, so Table 3 scores it 0 by construction
    parallel_namespaces = True  # state per namespace only: eval.workers may write several namespaces at once
    parallel_search = True  # search only reads: concurrent searches of one namespace are safe
    oracle_source_parameter = "source"  # source=oracle stores the benchmark's gold facts (core.api.ReadsOracleFacts)

    def __init__(self, llm: Any, embedder: Embedder, workdir: str, chunk_turns: int = 1, name: str = "rag", source: str = "turns") -> None:
        if chunk_turns < 1:
            raise ValueError(f"system.chunk_turns must be >= 1, got {chunk_turns}")
        if source not in SOURCES:
            raise ValueError(f"system.source={source!r} must be one of {list(SOURCES)} (turns: the baseline; oracle: rag over oracle facts)")
        self.source = source
        self.llm = llm  # unused: the baseline spends no LLM calls
        self.embedder = embedder
        self.workdir = workdir
        self.chunk_turns = chunk_turns
        self.name = name
        self._spaces: dict[str, _Namespace] = {}

    def run_metadata(self) -> dict[str, Any]:
        """metadata.system_metadata of a run: the row name of rag over oracle facts (eval.tables.row_label)."""
        return {"row_label": "rag over oracle facts", "source": self.source} if self.source == "oracle" else {"source": self.source}

    def _space(self, namespace: str) -> _Namespace:
        space = self._spaces.setdefault(namespace, _Namespace())
        if space.index is None:
            import faiss  # here, not at the top: a finished run's rerun builds no index
            space.index = faiss.IndexFlatIP(self.embedder.dim)
        return space

    def reset(self, namespace: str) -> None:
        self._spaces.pop(namespace, None)

    def add(self, namespace: str, turns: list[Turn], session_time: str | None = None) -> AddReport:
        space = self._space(namespace)
        new_chunks = self._fact_chunks(namespace, space, turns, session_time) if self.source == "oracle" else self._turn_chunks(namespace, space, turns, session_time)
        if new_chunks:
            vectors = self.embedder.encode([chunk.text for chunk in new_chunks]).astype(np.float32)
            space.index.add(vectors)
            space.vectors.extend(vectors)
            space.chunks.extend(new_chunks)
        stored = [StoredItem(c.memory_id, c.text, list(c.source_turn_ids), c.fact_id) for c in new_chunks]
        return AddReport(stored=stored, n_turns=len(turns))

    def _turn_chunks(self, namespace: str, space: _Namespace, turns: list[Turn], session_time: str | None) -> list[Chunk]:
        windows = [turns[i : i + self.chunk_turns] for i in range(0, len(turns), self.chunk_turns)]
        return [
            Chunk(
                memory_id=f"{namespace}:{len(space.chunks) + n}",
                text=chunk_text(window),
                source_turn_ids=[turn.turn_id for turn in window],
                timestamp=window[0].session_time or session_time,
            )
            for n, window in enumerate(windows)
        ]

    @staticmethod
    def _fact_chunks(namespace: str, space: _Namespace, turns: list[Turn], session_time: str | None) -> list[Chunk]:
        """One document per gold fact, in turn order: the fact's text, its cited turns (else the turn it came with)."""
        facts = [(turn, fact) for turn in turns for fact in turn.oracle_facts if fact.text.strip()]
        return [
            Chunk(
                memory_id=f"{namespace}:{len(space.chunks) + n}",
                text=" ".join(fact.text.split()),
                source_turn_ids=list(fact.source_turn_ids) or [turn.turn_id],
                timestamp=turn.session_time or session_time,
                fact_id=fact.fact_id,
            )
            for n, (turn, fact) in enumerate(facts)
        ]

    def search(self, namespace: str, query: str, k: int) -> list[Retrieved]:
        space = self._spaces.get(namespace)
        if space is None or not space.chunks or k <= 0:
            return []
        query_vec = self.embedder.encode([query]).astype(np.float32)
        scores, ids = space.index.search(query_vec, min(k, len(space.chunks)))
        results = []
        for score, idx in zip(scores[0], ids[0]):
            if idx < 0:
                continue
            chunk = space.chunks[int(idx)]
            results.append(
                Retrieved(
                    text=chunk.text,
                    score=float(score),
                    timestamp=chunk.timestamp,
                    source_turn_ids=list(chunk.source_turn_ids),
                    memory_id=chunk.memory_id,
                )
            )
        return results

    # -- Snapshottable / Inspectable ---------------------------------------------------
    def snapshot(self, namespace: str) -> dict[str, Any]:
        space = self._spaces.get(namespace, _Namespace())
        return {"chunks": copy.deepcopy(space.chunks), "vectors": [v.copy() for v in space.vectors]}

    def restore(self, namespace: str, state: dict[str, Any]) -> None:
        space = _Namespace(chunks=copy.deepcopy(state["chunks"]), vectors=[v.copy() for v in state["vectors"]])
        import faiss  # here, not at the top: a finished run's rerun builds no index
        space.index = faiss.IndexFlatIP(self.embedder.dim)
        if space.vectors:
            space.index.add(np.vstack(space.vectors).astype(np.float32))
        self._spaces[namespace] = space

    def stored_items(self, namespace: str) -> list[StoredItem]:
        space = self._spaces.get(namespace)
        if space is None:
            return []
        return [StoredItem(c.memory_id, c.text, list(c.source_turn_ids), c.fact_id) for c in space.chunks]
