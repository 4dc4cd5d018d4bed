"""What a benchmark gets from the runner: run folder, resumable row files, LLMs, judge, workers, embedder, logger.

Benchmarks implement ``core.api.Benchmark.run(system, ctx) -> metrics dict``; the runner owns the
run folder, the resolved config, metadata and metrics.json. Rows are appended to JSONL
files as they are produced (flushed and fsynced), so a killed run resumes where it stopped.

Config is read once, by the runner: what a benchmark needs from it beyond its own block arrives as a
typed field here (``workers`` from ``run.workers``, ``judge`` built from ``conf/judge``), validated before
the run folder exists (eval.config_checks, eval.runner.validate). The raw config is not here: a benchmark
reads its own block (its constructor's arguments) and these fields, never keys of the whole config.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from core.api import Benchmark, InputChecked
from core.embed import Embedder
from core.llm import LLMClient
from eval.judge import AnswerJudge
from eval.provenance import check_parsed, read_hashed
from eval.rows import JsonlRows

__all__ = ["Benchmark", "InputChecked", "JsonlRows", "RunContext"]


@dataclass
class RunContext:
    run_dir: Path
    llm: LLMClient  # the LLM every system and the shared answerer use
    # the judge built from conf/judge (eval.judge.build_judge): its client ``judge.llm`` (may be ``llm`` itself),
    # prompt, max_tokens, attempts; a benchmark judges answers with it or asks its own rubrics through ``judge.llm``
    judge: AnswerJudge
    workers: int  # run.workers: independent units processed at once (eval.workers); checked >= 1 by eval.config_checks
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
    # whether this invocation used the system (ingested or asked it something): the runner keeps the system's own
    # counters (``system_metrics``) of the last invocation that did, so a resume with only judging left does not
    # report the empty counters of a system it never used. A benchmark that resumes past the system sets it False.
    system_did_work: bool = True

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
