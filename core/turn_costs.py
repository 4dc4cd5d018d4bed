"""What each ingested turn cost, written as the turn finishes, for systems that take minutes per turn.

Why: Zep (graphiti) and MemGPT (Letta's agent loop) cost one to several minutes per turn here, so a
LoCoMo session of ~20 turns can outlast a working session, and a run stopped inside it would otherwise
leave no measured cost at all (the benchmark's per-session rows are written when a session is done). One
JSON line per turn: namespace, turn id, wall seconds and the LLM usage the system accounts to it.
A turn ingested again after a resume (replayed from the response cache) appends a second line; readers keep
the first, which is the one that paid. Lines are appended whole and flushed; a torn last line from a kill
is skipped by the reader (research/ingest_cost.py).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from core.api import LLMUsage

FILE_NAME = "turn_costs.jsonl"  # in the system's working folder: <run folder>/system/


class TurnCosts:
    def __init__(self, workdir: str | Path) -> None:
        self.path = Path(workdir) / FILE_NAME
        self._lock = threading.Lock()

    def record(self, namespace: str, turn_id: str, seconds: float, usage: LLMUsage, **extra: Any) -> None:
        row = {"namespace": namespace, "turn_id": turn_id, "seconds": round(seconds, 3), "usage": usage.__dict__, **extra}
        line = json.dumps(row, default=str) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(line)
                handle.flush()
