"""HaluMem's paired retrieval differences: a retrieval-only run against its base row, per level both runs can be
scored at (session always; fact where both carry gold fact ids), every question evidence metric overall and per
question type, clustered by user (the shared machinery is eval/retrieval_paired.py).

``recompute_retrieval`` is ``HaluMemBenchmark``'s ``core.api.RetrievalRecomputable``: a run's retrieval metrics
recomputed from its ``halumem_retrievals.jsonl`` with today's code, and its differences to the base run
(``python -m scripts.add_fields``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from eval.benchmarks.halumem.retrieval import session_of_id
from eval.retrieval_metrics import metric_names, question_scores
from eval.retrieval_paired import SECTION, Scored, base_record, paired_differences, recorded_settings

ROWS_FILE = "halumem_retrievals.jsonl"


def paired_to_base(rows: list[dict[str, Any]], base_rows: list[dict[str, Any]], ks: Sequence[int], n_samples: int, seed: int) -> dict[str, Any]:
    """Per level both runs can be scored at (session always; fact where both carry gold fact ids) the question
    evidence differences of every metric, overall and per question type (clusters: users)."""
    qa, base_qa = [r for r in rows if r["kind"] == "qa"], [r for r in base_rows if r["kind"] == "qa"]
    clusters = {r["key"]: str(r["uuid"]) for r in (*base_qa, *qa)}
    names = metric_names(ks, 10)
    levels: dict[str, tuple[Callable[..., set[str]], Callable[[dict[str, Any]], list[set[str]]]]] = {
        "session": (lambda ids: {session_of_id(i) for i in ids}, lambda r: [set(s) for s in r["retrieved_sessions"]])}
    if all(any(f is not None for r in run for f in r["retrieved_fact_ids"]) for run in (rows, base_rows)):
        levels["fact"] = (set, lambda r: [{f} if f else set() for f in r["retrieved_fact_ids"]])

    def scored(run: list[dict[str, Any]], gold_of: Callable[..., set[str]], items_of: Callable[[dict[str, Any]], list[set[str]]]) -> Scored:
        return {r["key"]: (r["question_type"], s) for r in run if (s := question_scores(gold_of(r["evidence_fact_ids"]), items_of(r), ks, 10)) is not None}

    types = sorted({r["question_type"] for r in qa}, key=str)
    return {"clusters": "user", **{level: paired_differences(scored(base_qa, *fns), scored(qa, *fns), types, names, clusters, n_samples, seed,
                                                             lambda _: True)
                                   for level, fns in levels.items()}}  # fmt: skip


def recompute_retrieval(run_dir: Path, base_dir: Path | None) -> dict[str, Any] | None:
    """The run's retrieval metrics from its ranked rows and, unless it is the base, its paired differences to
    ``base_dir``; None without ``halumem_retrievals.jsonl``."""
    from eval.benchmarks.halumem.retrieval import retrieval_metrics
    from eval.rows import read_rows

    run_dir = Path(run_dir)
    if not (run_dir / ROWS_FILE).is_file():
        return None
    _, seed, samples, ks = recorded_settings(run_dir)
    rows = read_rows(run_dir / ROWS_FILE)
    recomputed: dict[str, Any] = {"retrieval": retrieval_metrics(rows, ks, samples, seed)}
    if base_dir is not None and Path(base_dir).resolve() != run_dir.resolve():
        recomputed[SECTION] = {"base_run": base_record(base_dir), **paired_to_base(rows, read_rows(Path(base_dir) / ROWS_FILE), ks, samples, seed)}
    return recomputed
