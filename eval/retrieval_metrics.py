"""Retrieval quality against gold evidence, as LongMemEval reports it: recall@k, any-hit@k and NDCG@k of
a ranked list of retrieved items, each item covering a set of evidence units (turn ids, session ids, fact ids).

Why a module of its own: a retrieval-only run (``benchmark.stages=[ingest,retrieve]``) measures whether a
system *finds* the gold evidence with no answerer and no judge, so every question of a benchmark can be
scored in minutes with no LLM; every benchmark's retrieval scoring shares these pure functions. No LLM, no files.

Definitions (k counts retrieved *items*, the budget an answerer gets):

* ``recall@k``: share of the question's gold units covered by the first k items (LongMemEval's recall_all
  averaged per unit instead of all-or-nothing);
* ``any_hit@k``: 1 when the first k items cover at least one gold unit (LongMemEval's recall_any);
* ``ndcg@k``: binary gain for an item that covers a gold unit no higher-ranked item covered (so several facts
  citing one turn earn it once), discounted by log2(rank + 1); the ideal list puts min(|gold|, k) such items
  first. Between 0 and 1.

A coarser level (e.g. sessions) maps each id to its unit on both sides (``ranked_units``'s ``unit``; a benchmark's ids are
its own, so the mapping is the benchmark's).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

from eval.metrics import bootstrap_ci

RANK_METRICS = ("recall", "any_hit")


def ranked_units(items: Sequence[Iterable[str]], unit: Callable[[str], str] | None = None) -> list[set[str]]:
    """Each retrieved item's set of evidence units (``unit`` maps an id to its unit, e.g. a turn's session)."""
    return [{unit(i) if unit else str(i) for i in ids} for ids in items]


def question_scores(gold: Iterable[str], items: Sequence[set[str]], ks: Sequence[int], ndcg_k: int) -> dict[str, float] | None:
    """recall@k and any_hit@k for each k, and ndcg@ndcg_k, of one question; None when it has no gold units."""
    wanted = set(gold)
    if not wanted:
        return None
    out: dict[str, float] = {}
    covered: set[str] = set()
    first_rank_covering: list[int] = []  # per rank: how many new gold units it brings
    for item in items:
        new = (item & wanted) - covered
        first_rank_covering.append(len(new))
        covered |= new
    for k in ks:
        found = sum(first_rank_covering[:k])
        out[f"recall@{k}"] = found / len(wanted)
        out[f"any_hit@{k}"] = float(found > 0)
    gains = [1.0 if n else 0.0 for n in first_rank_covering[:ndcg_k]]
    dcg = sum(g / math.log2(rank + 2) for rank, g in enumerate(gains))
    ideal = sum(1 / math.log2(rank + 2) for rank in range(min(len(wanted), ndcg_k)))
    out[f"ndcg@{ndcg_k}"] = dcg / ideal
    return out


def metric_names(ks: Sequence[int], ndcg_k: int) -> list[str]:
    return [f"{name}@{k}" for name in RANK_METRICS for k in ks] + [f"ndcg@{ndcg_k}"]


def summarise(scored: list[dict[str, float]], names: Sequence[str], n_samples: int, seed: int,
              clusters: Sequence[Hashable] | None = None) -> dict[str, Any]:
    """Mean and 95% bootstrap CI (``eval.intervals``, the harness's interval) of each metric; with ``clusters`` (one
    label per scored question: its conversation or user) also the cluster interval and the number of clusters."""
    out: dict[str, Any] = {"n": len(scored)}
    if clusters is not None:
        out["n_clusters"] = len(set(clusters))
    return {**out, **{name: bootstrap_ci([s[name] for s in scored], n_samples, seed, clusters=clusters) for name in names}}


def by_group(scored: list[tuple[Any, dict[str, float]]], names: Sequence[str], n_samples: int, seed: int,
             clusters: Sequence[Hashable] | None = None) -> dict[str, Any]:
    """``summarise`` per group key (a category, a question type), groups in sorted order; ``clusters`` aligned with
    ``scored``."""
    groups = sorted({g for g, _ in scored}, key=str)
    out = {}
    for g in groups:
        picked = [i for i, (key, _) in enumerate(scored) if key == g]
        out[str(g)] = summarise([scored[i][1] for i in picked], names, n_samples, seed,
                                None if clusters is None else [clusters[i] for i in picked])
    return out
