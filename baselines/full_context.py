"""The no-memory reference: hand the answerer the whole history, newest kept when over budget.

``search`` ignores the query and returns every turn in chronological order, each as a
``Retrieved`` with its turn id. Scores rise with recency so that the shared answerer, which
drops the lowest-scored items when over its own budget, also drops the oldest turns first.
"""

from __future__ import annotations

import copy
from typing import Any

from core.api import AddReport, Retrieved, StoredItem, Turn


class FullContextMemory:
    """Keeps turns verbatim; history is cut to ``max_context_tokens`` (chars / ``chars_per_token``)."""

    conflict_signal = False  # append-only: never updates, rejects or flags, so Table 3 scores it 0 by construction
    parallel_namespaces = True  # state per namespace only: eval.workers may write several namespaces at once
    parallel_search = True  # search only reads: concurrent searches of one namespace are safe
    ranks_search = False  # search hands back every turn held: a retrieval-only run has no ranking to score (core.api.DeclaresRanking)

    def __init__(
        self,
        llm: Any,
        embedder: Any,
        workdir: str,
        max_context_tokens: int = 2000,
        chars_per_token: float = 4.0,
        name: str = "full_context",
    ) -> None:
        self.llm = llm  # unused
        self.embedder = embedder  # unused
        self.workdir = workdir
        self.max_context_tokens = max_context_tokens
        self.chars_per_token = chars_per_token
        self.name = name
        self._turns: dict[str, list[Turn]] = {}

    def reset(self, namespace: str) -> None:
        self._turns.pop(namespace, None)

    def add(self, namespace: str, turns: list[Turn], session_time: str | None = None) -> AddReport:
        held = self._turns.setdefault(namespace, [])
        stamped = [t if t.session_time or not session_time else Turn(t.turn_id, t.speaker, t.text, session_time) for t in turns]
        held.extend(stamped)
        stored = [StoredItem(t.turn_id, f"{t.speaker}: {t.text}", [t.turn_id]) for t in stamped]
        return AddReport(stored=stored, n_turns=len(turns))

    def _cost(self, turn: Turn) -> int:
        return int(len(f"{turn.speaker}: {turn.text}") / self.chars_per_token) + 1

    def search(self, namespace: str, query: str, k: int) -> list[Retrieved]:
        """The most recent turns that fit the budget, oldest first; ``k`` is ignored on purpose."""
        held = self._turns.get(namespace, [])
        budget, start = self.max_context_tokens, len(held)
        while start > 0 and budget - self._cost(held[start - 1]) >= 0:
            budget -= self._cost(held[start - 1])
            start -= 1
        kept = held[start:]
        return [
            Retrieved(
                text=f"{t.speaker}: {t.text}",
                score=(start + i + 1) / max(len(held), 1),
                timestamp=t.session_time,
                source_turn_ids=[t.turn_id],
                memory_id=t.turn_id,
            )
            for i, t in enumerate(kept)
        ]

    def snapshot(self, namespace: str) -> list[Turn]:
        return copy.copy(self._turns.get(namespace, []))

    def restore(self, namespace: str, state: list[Turn]) -> None:
        self._turns[namespace] = list(state)

    def stored_items(self, namespace: str) -> list[StoredItem]:
        return [StoredItem(t.turn_id, f"{t.speaker}: {t.text}", [t.turn_id]) for t in self._turns.get(namespace, [])]
