"""What a benchmark gets from the runner: run folder, resumable row files, LLMs, embedder, logger.

Benchmarks implement ``Benchmark.run(system, ctx) -> metrics dict``; the runner owns the
run folder, the resolved config, metadata and metrics.json. Rows are appended to JSONL
files as they are produced (flushed and fsynced), so a killed run resumes where it stopped.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol, runtime_checkable

from core.embed import Embedder
from core.llm import LLMClient
from core.api import MemorySystem


class JsonlRows:
    """Append-only JSONL file of rows with a unique ``key`` field; tolerant of a torn last line."""

    def __init__(self, path: Path, key_field: str = "key") -> None:
        self.path = path
        self.key_field = key_field
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._rows: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()  # run.workers > 1: whole lines, one writer at a time
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        good_bytes = 0
        with self.path.open("rb") as handle:
            for raw in handle:
                if not raw.endswith(b"\n"):
                    break  # torn write from a killed run: dropped and rewritten below
                try:
                    row = json.loads(raw)
                except json.JSONDecodeError:
                    break
                self._rows.setdefault(str(row[self.key_field]), row)
                good_bytes += len(raw)
        if good_bytes != self.path.stat().st_size:
            logging.getLogger(__name__).warning("%s: dropping a partial last line left by a killed run", self.path)
            with self.path.open("r+b") as handle:
                handle.truncate(good_bytes)

    def __contains__(self, key: object) -> bool:
        return str(key) in self._rows

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, key: str) -> dict[str, Any] | None:
        return self._rows.get(str(key))

    def append(self, row: dict[str, Any]) -> None:
        key = str(row[self.key_field])
        line = json.dumps(row, ensure_ascii=False, default=str) + "\n"
        with self._lock:
            if key in self._rows:
                return
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
            self._rows[key] = row

    def rows(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._rows.values())

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows())


@dataclass
class RunContext:
    run_dir: Path
    cfg: Any  # the resolved OmegaConf config of the run
    llm: LLMClient  # the LLM every system and the shared answerer use
    judge_llm: LLMClient  # the judge (may be the same object)
    embedder: Embedder
    answerer: Any  # eval.answerer.Answerer: one prompt/LLM/budget for every system
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("mosaic_bench"))
    extra_metadata: dict[str, Any] = field(default_factory=dict)
    # told (stage, items done, items in the stage) as work finishes: W&B progress (eval.loggers)
    progress: Callable[[str, int, int], None] | None = None

    def rows(self, name: str, key_field: str = "key") -> JsonlRows:
        """The resumable row file ``<run_dir>/<name>.jsonl``."""
        return JsonlRows(self.run_dir / f"{name}.jsonl", key_field)

    def path(self, name: str) -> Path:
        return self.run_dir / name


@runtime_checkable
class Benchmark(Protocol):
    """A benchmark drives a memory system through its protocol and returns metrics."""

    name: str

    def run(self, system: MemorySystem, ctx: RunContext) -> dict[str, Any]:
        """Run every stage (resuming from ``ctx`` row files) and return the metrics dict."""

    @staticmethod
    def make_table(metrics: list[dict[str, Any]], convention: str | None = None) -> "Any":
        """Build this benchmark's paper-shaped table (a pandas DataFrame) from metrics.json dicts."""
