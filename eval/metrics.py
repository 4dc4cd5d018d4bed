"""Answer-quality and retrieval metrics, the bootstrap and its table cell, latency percentiles.

All metrics here are LLM-free and deterministic. Two F1 variants exist in the LoCoMo
literature, so both are offered and named apart:

* ``token_f1``: SQuAD-style; normalised tokens, overlap counted with multiplicity.
* ``set_f1_mem0``: Mem0's harness variant; lowercased, ``.,!?`` split off, tokens as *sets*.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: object) -> str:
    """SQuAD normalisation: lowercase, drop punctuation and articles, squeeze whitespace."""
    lowered = str(text).lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", lowered).split())


def answer_tokens(text: object) -> list[str]:
    return normalize_answer(text).split()


def _f1(overlap: int, n_pred: int, n_gold: int) -> float:
    if n_pred == 0 or n_gold == 0:
        return float(n_pred == n_gold)  # both empty counts as a match, one empty as a miss
    if overlap == 0:
        return 0.0
    precision, recall = overlap / n_pred, overlap / n_gold
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: object, gold: object) -> float:
    """SQuAD-style token F1 (multiset overlap of normalised tokens)."""
    pred, ref = answer_tokens(prediction), answer_tokens(gold)
    overlap = sum((Counter(pred) & Counter(ref)).values())
    return _f1(overlap, len(pred), len(ref))


def mem0_tokens(text: object) -> set[str]:
    """Mem0's harness tokenisation: lowercase, ``. , ! ?`` become spaces, whitespace split, as a set."""
    lowered = str(text).lower()
    for mark in ".,!?":
        lowered = lowered.replace(mark, " ")
    return set(lowered.split())


def set_f1_mem0(prediction: object, gold: object) -> float:
    """Mem0-style set-based F1 (no article/punctuation stripping beyond ``.,!?``; duplicates ignored)."""
    pred, ref = mem0_tokens(prediction), mem0_tokens(gold)
    return _f1(len(pred & ref), len(pred), len(ref))


def bleu1(prediction: object, gold: object) -> float:
    """BLEU-1 on normalised tokens: clipped unigram precision times the brevity penalty.

    BP = 1 when the prediction is longer than the reference, else exp(1 - r/c). No smoothing:
    an empty prediction or no shared token scores 0.
    """
    pred, ref = answer_tokens(prediction), answer_tokens(gold)
    if not pred or not ref:
        return 0.0
    clipped = sum((Counter(pred) & Counter(ref)).values())
    precision = clipped / len(pred)
    brevity = 1.0 if len(pred) > len(ref) else math.exp(1 - len(ref) / len(pred))
    return precision * brevity


def evidence_recall(gold_ids: Iterable[str], retrieved_ids: Iterable[str]) -> float | None:
    """Share of gold evidence ids found among retrieved source ids; None when there is no gold."""
    gold = set(gold_ids)
    if not gold:
        return None
    return len(gold & set(retrieved_ids)) / len(gold)


def bootstrap(
    statistic: Callable[..., np.ndarray],
    *groups: Sequence[float] | tuple[Sequence[float], ...],
    n_samples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    n: int | None = None,
) -> dict[str, float | int | None]:
    """Point estimate and percentile-bootstrap CI of ``statistic(*columns)``, the one bootstrap of the harness.

    Each group is a sequence of per-item values, or a tuple of aligned columns resampled with the
    same item indices (a ratio's numerators and denominators). Groups are resampled with
    replacement independently, in order, from one seeded generator. ``statistic`` receives every
    column with a leading resample axis (shape ``(B, items)``) and returns B values; NaN marks a
    resample where the statistic is undefined (dropped). An empty group or an undefined point
    estimate gives ``mean=None``. ``n`` (reported) defaults to the first group's size.
    """
    columns = [tuple(np.asarray(c, dtype=float) for c in (g if isinstance(g, tuple) else (g,))) for g in groups]
    sizes = [len(group[0]) for group in columns]
    reported_n = int(sizes[0] if n is None else n)
    empty = {"mean": None, "ci_low": None, "ci_high": None, "n": reported_n}
    if not sizes or min(sizes) == 0:
        return empty
    with np.errstate(invalid="ignore", divide="ignore"):
        point = float(statistic(*(c[None] for group in columns for c in group))[0])
        if math.isnan(point):
            return empty
        rng = np.random.default_rng(seed)
        resampled = []
        for group, size in zip(columns, sizes):
            idx = rng.integers(0, size, size=(n_samples, size))
            resampled.extend(c[idx] for c in group)
        samples = np.asarray(statistic(*resampled), dtype=float)
    samples = samples[~np.isnan(samples)]
    if samples.size == 0:
        return {"mean": point, "ci_low": None, "ci_high": None, "n": reported_n}
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(samples, [tail, 100 - tail])
    return {"mean": point, "ci_low": float(low), "ci_high": float(high), "n": reported_n}


def resampled_mean(values: np.ndarray) -> np.ndarray:
    """The mean of each resample (the ``statistic`` of a plain rate or average)."""
    return values.mean(axis=1)


def bootstrap_ci(
    values: Sequence[float | None], n_samples: int = 1000, seed: int = 0, confidence: float = 0.95
) -> dict[str, float | int | None]:
    """Mean with a percentile-bootstrap CI over the non-None values (resampling items, seeded)."""
    data = [v for v in values if v is not None]
    return bootstrap(resampled_mean, data, n_samples=n_samples, seed=seed, confidence=confidence, n=len(data))


def format_ci(
    stat: dict[str, Any] | None, scale: float = 100.0, digits: int = 1, ci_digits: int | None = None, missing: str = ""
) -> str:
    """The one table cell for a bootstrap result: ``{"mean", "ci_low", "ci_high"}`` -> ``"62.1 [58.0, 66.2]"``.

    Scaled by ``scale``; the CI is left out when it is undefined; ``missing`` when there is no mean.
    """
    if not stat or stat.get("mean") is None:
        return missing
    ci_digits = digits if ci_digits is None else ci_digits
    text = f"{stat['mean'] * scale:.{digits}f}"
    if stat.get("ci_low") is not None and stat.get("ci_high") is not None:
        text += f" [{stat['ci_low'] * scale:.{ci_digits}f}, {stat['ci_high'] * scale:.{ci_digits}f}]"
    return text


def percentiles(values: Sequence[float], qs: Sequence[float] = (50, 95)) -> dict[str, float | None]:
    """Latency percentiles (linear interpolation) keyed ``p50``, ``p95``; None when empty."""
    data = np.asarray(list(values), dtype=float)
    return {f"p{q:g}": (float(np.percentile(data, q)) if data.size else None) for q in qs}
