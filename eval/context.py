"""What a benchmark gets from the runner: run folder, resumable row files, LLMs, embedder, logger.

Benchmarks implement ``Benchmark.run(system, ctx) -> metrics dict``; the runner owns the
run folder, the resolved config, metadata and metrics.json. Rows are appended to JSONL
files as they are produced (flushed and fsynced), so a killed run resumes where it stopped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from core.embed import Embedder
from core.llm import LLMClient
from core.api import MemorySystem
from eval.provenance import check_parsed, read_hashed
from eval.rows import JsonlRows

__all__ = ["Benchmark", "InputChecked", "JsonlRows", "RunContext"]


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
    input_hash: str | None = None  # hash of the run's input files; stamped on (and checked against) every row
    # resolved path -> sha256 of every input file the run folder is named for (eval.provenance.expected_inputs);
    # None: nothing to check against (unit tests, ad-hoc use)
    inputs: dict[str, str] | None = None

    def read_input(self, path: str | Path) -> bytes:
        """An input file's bytes, read once and checked against the run's identity before anything parses them."""
        data, sha256 = read_hashed(path)
        self.check_input(path, sha256)
        return data

    def check_input(self, path: str | Path, parsed_sha256: str) -> None:
        """Fail (InputChangedError) unless the bytes parsed from ``path`` are those the run folder is named for."""
        check_parsed(path, parsed_sha256, self.inputs, self.run_dir)

    def rows(self, name: str, key_field: str = "key") -> JsonlRows:
        """The resumable row file ``<run_dir>/<name>.jsonl``."""
        return JsonlRows(self.run_dir / f"{name}.jsonl", key_field, input_hash=self.input_hash)

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


@runtime_checkable
class InputChecked(Protocol):
    """A benchmark that can read and check its inputs (data files, slice) without a system or an LLM.

    The runner calls it before the run folder exists, so a missing file, a format error or a slice that
    selects nothing fails with its one-line error (a HarnessError naming the file/key and the fix).
    """

    def check_inputs(self) -> None: ...
