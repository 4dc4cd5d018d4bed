"""Counters that several threads may add to at once.

``stats[key] += 1`` reads and writes in two steps, so two threads can lose an increment; a system
whose parts are shared by namespaces that ``run.workers`` writes concurrently (MOSAIC's extractor,
gate and write counters) counts through ``Tally.add`` instead. Reading is a plain dict read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable


class Tally(dict[str, int]):
    """A dict of counters whose ``add`` is atomic across threads."""

    def __init__(self, keys: Iterable[str] = ()) -> None:
        super().__init__((key, 0) for key in keys)
        self._lock = threading.Lock()

    def add(self, key: str, n: int = 1) -> None:
        with self._lock:
            self[key] = self.get(key, 0) + n
