"""The harness's one bootstrap: a per-item interval and, where items come in clusters, a cluster interval.

Why two: a benchmark's questions often come from a few conversations or a few users, and questions about
one conversation succeed or fail together. Resampling questions as if independent then gives an interval
that is too narrow once a run spans several conversations. The cluster bootstrap resamples clusters
(conversations, users) with replacement, then items within each drawn cluster with replacement (two-stage,
Davison & Hinkley 1997, sec. 3.8), so the spread between clusters enters the interval. It errs wide: the
within-cluster spread is counted twice, so with no cluster effect at all the interval is up to sqrt(2) times
the per-item one (tests/unit/eval/test_intervals.py); a strong cluster effect widens it far more.

A stat dict is ``{"mean", "ci_low", "ci_high", "n"}`` (the per-item interval, as every run has written it)
plus, when cluster labels are given, ``n_clusters``, ``cluster_ci_low``, ``cluster_ci_high``. Tables show
the cluster interval where a run spans ``min_clusters`` or more clusters (conf/report.yaml), else the
per-item one, and say which (``chosen_interval``, ``interval_note``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

REPORT_CONF = Path(__file__).resolve().parents[1] / "conf" / "report.yaml"

Groups = Sequence[float] | tuple[Sequence[float], ...]


@lru_cache(maxsize=4)
def report_settings(path: Path = REPORT_CONF) -> dict[str, Any]:
    """conf/report.yaml: how tables choose an interval and which token budgets they show."""
    from omegaconf import OmegaConf

    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: restore conf/report.yaml from git")
    return OmegaConf.to_container(OmegaConf.load(path), resolve=True)  # type: ignore[return-value]


def _columns(groups: tuple[Groups, ...]) -> list[tuple[np.ndarray, ...]]:
    return [tuple(np.asarray(c, dtype=float) for c in (g if isinstance(g, tuple) else (g,))) for g in groups]


def _percentile_ci(samples: np.ndarray, confidence: float) -> tuple[float | None, float | None]:
    samples = samples[~np.isnan(samples)]
    if samples.size == 0:
        return None, None
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(samples, [tail, 100 - tail])
    return float(low), float(high)


def bootstrap(
    statistic: Callable[..., np.ndarray],
    *groups: Groups,
    n_samples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    n: int | None = None,
    clusters: Sequence[Sequence[Hashable]] | None = None,
) -> dict[str, Any]:
    """Point estimate and percentile-bootstrap CIs of ``statistic(*columns)``.

    Each group is a sequence of per-item values, or a tuple of aligned columns resampled with the same item
    indices (a ratio's numerators and denominators; a paired difference's two runs). Groups are resampled
    with replacement independently, in order, from one seeded generator. ``statistic`` receives every column
    with a leading resample axis (shape ``(B, items)``) and returns B values; NaN marks a resample where the
    statistic is undefined (dropped). An empty group or an undefined point estimate gives ``mean=None``.
    ``n`` (reported) defaults to the first group's size.

    ``clusters``: one label per item for each group (a conversation id, a user id). Adds the two-stage
    cluster interval: the clusters are drawn once per resample, shared by all groups (so a paired
    difference stays paired, and two groups of one user move together), then each group's items within
    each drawn cluster. Its generator is seeded apart from the per-item one, so adding clusters leaves the
    per-item interval exactly as before.
    """
    columns = _columns(groups)
    sizes = [len(group[0]) for group in columns]
    reported_n = int(sizes[0] if n is None else n)
    out: dict[str, Any] = {"mean": None, "ci_low": None, "ci_high": None, "n": reported_n}
    if clusters is not None:
        if len(clusters) != len(columns) or any(len(labels) != size for labels, size in zip(clusters, sizes)):
            raise ValueError("bootstrap: clusters needs one label per item for every group")
        out.update(n_clusters=len({label for labels in clusters for label in labels}), cluster_ci_low=None, cluster_ci_high=None)
    if not sizes or min(sizes) == 0:
        return out
    with np.errstate(invalid="ignore", divide="ignore"):
        point = float(statistic(*(c[None] for group in columns for c in group))[0])
        if math.isnan(point):
            return out
        out["mean"] = point
        rng = np.random.default_rng(seed)
        resampled = []
        for group, size in zip(columns, sizes):
            idx = rng.integers(0, size, size=(n_samples, size))
            resampled.extend(c[idx] for c in group)
        out["ci_low"], out["ci_high"] = _percentile_ci(np.asarray(statistic(*resampled), dtype=float), confidence)
        if clusters is not None:
            samples = _cluster_samples(statistic, columns, clusters, n_samples, seed)
            out["cluster_ci_low"], out["cluster_ci_high"] = _percentile_ci(samples, confidence)
    return out


def _cluster_samples(
    statistic: Callable[..., np.ndarray], columns: list[tuple[np.ndarray, ...]], clusters: Sequence[Sequence[Hashable]],
    n_samples: int, seed: int,
) -> np.ndarray:
    """``statistic`` on ``n_samples`` two-stage resamples (clusters, then items within them)."""
    names = sorted({label for labels in clusters for label in labels}, key=str)
    position = {name: i for i, name in enumerate(names)}
    rng = np.random.default_rng([seed, 1])  # apart from the per-item generator
    drawn = rng.integers(0, len(names), size=(n_samples, len(names)))
    picked = []  # per group: (row of each resampled item, its item index), all resamples at once
    for labels in clusters:
        codes = np.array([position[label] for label in labels], dtype=int)
        order = np.argsort(codes, kind="stable")  # items sorted by cluster
        counts = np.bincount(codes, minlength=len(names))
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        sizes = counts[drawn].ravel()  # every drawn cluster's size, resample by resample
        offsets = np.floor(rng.random(int(sizes.sum())) * np.repeat(sizes, sizes)).astype(int)
        rows = np.repeat(np.repeat(np.arange(n_samples), len(names)), sizes)
        picked.append((rows, order[np.repeat(starts[drawn].ravel(), sizes) + offsets]))
    if statistic is resampled_mean and len(columns) == 1 and len(columns[0]) == 1:  # the common case, without a loop
        rows, idx = picked[0]
        totals = np.bincount(rows, weights=columns[0][0][idx], minlength=n_samples)
        counts = np.bincount(rows, minlength=n_samples)
        return np.where(counts > 0, totals / np.maximum(counts, 1), np.nan)
    bounds = [np.searchsorted(rows, np.arange(n_samples + 1)) for rows, _ in picked]
    samples = np.full(n_samples, np.nan)
    for b in range(n_samples):
        chosen = [idx[edges[b]:edges[b + 1]] for (_, idx), edges in zip(picked, bounds)]
        if all(len(c) for c in chosen):  # a group with no item in the drawn clusters: undefined, dropped
            samples[b] = float(statistic(*(c[i][None] for group, i in zip(columns, chosen) for c in group))[0])
    return samples


def resampled_mean(values: np.ndarray) -> np.ndarray:
    """The mean of each resample (the ``statistic`` of a plain rate or average)."""
    return values.mean(axis=1)


def bootstrap_ci(
    values: Sequence[float | None], n_samples: int = 1000, seed: int = 0, confidence: float = 0.95,
    clusters: Sequence[Hashable] | None = None,
) -> dict[str, Any]:
    """Mean with a percentile-bootstrap CI over the non-None values (resampling items, seeded); with
    ``clusters`` (one label per value, None values included) also the cluster interval."""
    data = [v for v in values if v is not None]
    labels = None if clusters is None else [[c for v, c in zip(values, clusters) if v is not None]]
    return bootstrap(resampled_mean, data, n_samples=n_samples, seed=seed, confidence=confidence, n=len(data), clusters=labels)


def chosen_interval(stat: dict[str, Any] | None, min_clusters: int) -> str:
    """``"cluster"`` where the stat has a cluster interval over ``min_clusters`` or more clusters, else ``"item"``."""
    if stat and (stat.get("n_clusters") or 0) >= min_clusters and stat.get("cluster_ci_low") is not None:
        return "cluster"
    return "item"


def format_ci(
    stat: dict[str, Any] | None, scale: float = 100.0, digits: int = 1, ci_digits: int | None = None, missing: str = "",
    min_clusters: int | None = None,
) -> str:
    """The one table cell for a bootstrap result: ``{"mean", "ci_low", "ci_high"}`` -> ``"62.1 [58.0, 66.2]"``.

    Scaled by ``scale``; the CI is left out when it is undefined; ``missing`` when there is no mean. The cluster
    interval where ``chosen_interval`` picks it (``min_clusters``, by default conf/report.yaml's), else the
    per-item one: a row over a single conversation shows its per-question interval, as before.
    """
    if not stat or stat.get("mean") is None:
        return missing
    ci_digits = digits if ci_digits is None else ci_digits
    if min_clusters is None:
        min_clusters = int(report_settings()["min_clusters_for_cluster_interval"])
    prefix = "cluster_" if chosen_interval(stat, min_clusters) == "cluster" else ""
    text = f"{stat['mean'] * scale:.{digits}f}"
    low, high = stat.get(f"{prefix}ci_low"), stat.get(f"{prefix}ci_high")
    if low is not None and high is not None:
        text += f" [{low * scale:.{ci_digits}f}, {high * scale:.{ci_digits}f}]"
    return text


def interval_note(stat: dict[str, Any] | None, min_clusters: int, item: str = "question", cluster: str = "conversation",
                  cluster_names: Sequence[str] = ()) -> str:
    """Which interval a row's cells show, e.g. ``"question bootstrap; 1 conversation (conv-26): holds for it only"``."""
    if not stat:
        return ""
    count = stat.get("n_clusters")
    if count is None:
        return f"{item} bootstrap ({cluster}s not recorded)"
    if chosen_interval(stat, min_clusters) == "cluster":
        return f"{cluster} bootstrap over {count} {cluster}s, then {item}s within them"
    named = f" ({', '.join(cluster_names)})" if cluster_names else ""
    if count == 1:
        return f"{item} bootstrap; 1 {cluster}{named}: holds for that {cluster} only"
    return f"{item} bootstrap; {count} {cluster}s{named}, under {min_clusters}: too few for a {cluster} interval"
