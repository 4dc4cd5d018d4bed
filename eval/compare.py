"""Paired comparison of two finished runs over the same items: what a variant changed, with a CI.

Two rows of a table each carry their own bootstrap CI, but whether a variant is better or worse
than its base is a question about the *difference* on the same items, and paired resampling answers
it with a much narrower interval than two overlapping CIs suggest. This module holds what every
benchmark's comparison shares and makes no LLM call: the paired bootstrap of a difference of means
(``paired_difference``) and of a ratio of sums (``paired_rate_difference``), and ``comparison_of``, which
finds a run's benchmark class from its record and asks it how its runs pair (``core.api.Comparison``:
its per-item outcomes, fields, cluster unit and write cost live in the benchmark's package,
``eval/benchmarks/<name>/compare.py``).

The paired bootstrap resamples item indices (the same index for both runs) through
``eval.intervals.bootstrap``, the harness's one bootstrap, and gives two intervals for every difference: per
item, and over clusters then items within them (the benchmark names its cluster), still paired within the
resampled clusters.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from core.api import Comparison, HarnessError, PairedComparable
from eval.intervals import bootstrap, resampled_mean
from eval.rows import read_rows


def jsonl_rows(path: Path, key_field: str = "key") -> list[dict[str, Any]]:
    """A run folder's row file, or FileNotFoundError saying the folder is not a finished run."""
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: is {path.parent} a finished run folder (run.py writes it)?")
    return read_rows(path, key_field)


def _metrics(run_dir: Path) -> dict[str, Any]:
    return json.loads((Path(run_dir) / "metrics.json").read_text())


def _retrieval_only(metrics: dict[str, Any]) -> bool:
    return tuple(metrics.get("stages") or ()) == ("ingest", "retrieve")


def run_kind(run_dir: Path) -> str:
    """The benchmark's registered name (what the run's metrics.json says it measured); '<benchmark>_retrieval' for a
    retrieval-only run (``benchmark.stages=[ingest, retrieve]``: no answers, compared by evidence recall)."""
    metrics = _metrics(run_dir)
    kind = str(metrics.get("benchmark") or metrics.get("metadata", {}).get("benchmark"))
    return f"{kind}_retrieval" if _retrieval_only(metrics) else kind


def comparison_of(run_dir: Path) -> Comparison:
    """How runs of ``run_dir``'s benchmark pair: asked of the benchmark class its metrics.json records."""
    from hydra.utils import get_class

    metrics = _metrics(run_dir)
    target = metrics.get("metadata", {}).get("benchmark_target") or metrics.get("benchmark_target")
    if not target:
        raise HarnessError(f"{Path(run_dir) / 'metrics.json'} records no benchmark_target: which benchmark's run is it (eval.runner writes it)?")
    cls = get_class(str(target))
    if not isinstance(cls, PairedComparable):
        raise HarnessError(f"{target} declares no paired comparison (core.api.PairedComparable): its runs cannot be compared")
    return cls.comparison(_retrieval_only(metrics))


def returned_token_summaries(base_dir: Path, other_dir: Path, searches: str | None = None) -> dict[str, Any]:
    """Each retrieval-only run's tokens returned per search, from its metrics.json (``searches``: the summary of one
    kind of search where the run keeps several)."""
    summaries = [json.loads((Path(d) / "metrics.json").read_text())["retrieval"].get("returned_tokens") or {} for d in (base_dir, other_dir)]
    summaries = [s.get(searches, s) for s in summaries] if searches else summaries
    return {"base": summaries[0], "other": summaries[1]}


def _cluster_labels(keys: list[str], clusters: dict[str, Any] | None) -> list[list[Any]] | None:
    return None if clusters is None else [[clusters.get(k) for k in keys]]


def paired_rate_difference(base: dict[str, tuple[float, float]], other: dict[str, tuple[float, float]], n_samples: int = 2000,
                           seed: int = 0, clusters: dict[str, Any] | None = None) -> dict[str, Any]:
    """``other`` rate minus ``base`` rate, each a ratio of sums (count, out of) over the groups both have, with a
    paired bootstrap over those groups (e.g. false alarms per session out of the points that could raise one);
    with ``clusters`` (key -> cluster) also over clusters, then groups within them."""
    keys = sorted(set(base) & set(other))
    counts_base = [base[k][0] for k in keys]
    counts_other = [other[k][0] for k in keys]
    out_of = [base[k][1] for k in keys]

    def rate_difference(b: np.ndarray, o: np.ndarray, n: np.ndarray) -> np.ndarray:
        return (o.sum(axis=1) - b.sum(axis=1)) / n.sum(axis=1)

    stat = bootstrap(rate_difference, (counts_base, counts_other, out_of), n_samples=n_samples, seed=seed, n=len(keys),
                     clusters=_cluster_labels(keys, clusters))
    total = float(sum(out_of))
    stat["base"] = sum(counts_base) / total if total else None
    stat["other"] = sum(counts_other) / total if total else None
    return stat


def paired_difference(base: dict[str, float], other: dict[str, float], n_samples: int = 2000, seed: int = 0,
                      clusters: dict[str, Any] | None = None) -> dict[str, Any]:
    """Mean of ``other - base`` over the keys both have, with a paired percentile-bootstrap CI; with ``clusters``
    (key -> cluster) also the cluster interval (clusters resampled, then questions within them, each question's
    difference kept whole: paired within the resampled clusters)."""
    keys = sorted(set(base) & set(other))
    diffs = np.array([other[k] - base[k] for k in keys], dtype=float)
    stat = bootstrap(resampled_mean, diffs, n_samples=n_samples, seed=seed, n=len(keys), clusters=_cluster_labels(keys, clusters))
    stat["base"] = float(np.mean([base[k] for k in keys])) if keys else None
    stat["other"] = float(np.mean([other[k] for k in keys])) if keys else None
    return stat


def clusters_of(outcomes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """item key -> its cluster (conversation, user, context), for the cluster interval of every difference."""
    return {k: v.get("cluster") for k, v in outcomes.items()}


def column(outcomes: dict[str, dict[str, Any]], field: str, where: Any = None) -> dict[str, float]:
    """item key -> its ``field``, for the items that have one (and that ``where`` keeps)."""
    return {k: v[field] for k, v in outcomes.items() if field in v and (where is None or where(v))}
