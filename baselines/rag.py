"""The append-only baseline: turn chunks embedded into FAISS, top-k by cosine similarity.

Nothing is ever updated or rejected, so it raises no conflict signal; it is the floor that
save-time conflict checking has to beat.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import faiss
import numpy as np

from core.embed import Embedder
from core.api import AddReport, Retrieved, StoredItem, Turn


@dataclass
class Chunk:
    memory_id: str
    text: str
    source_turn_ids: list[str]
    timestamp: str | None


@dataclass
class _Namespace:
    chunks: list[Chunk] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list)
    index: Any = None


def chunk_text(turns: list[Turn]) -> str:
    return "\n".join(f"{turn.speaker}: {turn.text}" for turn in turns)


class RagMemory:
    """One chunk per ``chunk_turns`` consecutive turns of one add call; IndexFlatIP over unit vectors."""

    conflict_signal = False  # append-only: never updates, rejects or flags, so Table 3 scores it 0 by construction
    parallel_namespaces = True  # state per namespace only: eval.workers may write several namespaces at once
    parallel_search = True  # search only reads: concurrent searches of one namespace are safe

    def __init__(self, llm: Any, embedder: Embedder, workdir: str, chunk_turns: int = 1, name: str = "rag") -> None:
        if chunk_turns < 1:
            raise ValueError(f"system.chunk_turns must be >= 1, got {chunk_turns}")
        self.llm = llm  # unused: the baseline spends no LLM calls
        self.embedder = embedder
        self.workdir = workdir
        self.chunk_turns = chunk_turns
        self.name = name
        self._spaces: dict[str, _Namespace] = {}

    def _space(self, namespace: str) -> _Namespace:
        space = self._spaces.setdefault(namespace, _Namespace())
        if space.index is None:
            space.index = faiss.IndexFlatIP(self.embedder.dim)
        return space

    def reset(self, namespace: str) -> None:
        self._spaces.pop(namespace, None)

    def add(self, namespace: str, turns: list[Turn], session_time: str | None = None) -> AddReport:
        space = self._space(namespace)
        windows = [turns[i : i + self.chunk_turns] for i in range(0, len(turns), self.chunk_turns)]
        new_chunks = [
            Chunk(
                memory_id=f"{namespace}:{len(space.chunks) + n}",
                text=chunk_text(window),
                source_turn_ids=[turn.turn_id for turn in window],
                timestamp=window[0].session_time or session_time,
            )
            for n, window in enumerate(windows)
        ]
        if new_chunks:
            vectors = self.embedder.encode([chunk.text for chunk in new_chunks]).astype(np.float32)
            space.index.add(vectors)
            space.vectors.extend(vectors)
            space.chunks.extend(new_chunks)
        stored = [StoredItem(c.memory_id, c.text, list(c.source_turn_ids)) for c in new_chunks]
        return AddReport(stored=stored, n_turns=len(turns))

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
        space.index = faiss.IndexFlatIP(self.embedder.dim)
        if space.vectors:
            space.index.add(np.vstack(space.vectors).astype(np.float32))
        self._spaces[namespace] = space

    def stored_items(self, namespace: str) -> list[StoredItem]:
        space = self._spaces.get(namespace)
        if space is None:
            return []
        return [StoredItem(c.memory_id, c.text, list(c.source_turn_ids)) for c in space.chunks]
