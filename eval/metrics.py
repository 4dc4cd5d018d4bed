"""Answer-quality and retrieval metrics and latency percentiles (the bootstrap and its table cell live in
``eval.intervals``; they are importable from here too, as every benchmark has imported them).

All metrics here are LLM-free and deterministic. Two F1 variants are in use in the memory-benchmark
literature, so both are offered and named apart:

* ``token_f1``: SQuAD-style; normalised tokens, overlap counted with multiplicity.
* ``set_f1``: one published harness's variant; lowercased, ``.,!?`` split off, tokens as *sets*.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from eval.intervals import bootstrap, bootstrap_ci, format_ci, resampled_mean

__all__ = ["answer_tokens", "bleu1", "bootstrap", "bootstrap_ci", "evidence_recall", "format_ci", "normalize_answer",
           "percentiles", "resampled_mean", "set_f1", "set_tokens", "token_f1"]

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


def set_tokens(text: object) -> set[str]:
    """The set F1's tokenisation: lowercase, ``. , ! ?`` become spaces, whitespace split, as a set."""
    lowered = str(text).lower()
    for mark in ".,!?":
        lowered = lowered.replace(mark, " ")
    return set(lowered.split())


def set_f1(prediction: object, gold: object) -> float:
    """Set-based F1 (no article/punctuation stripping beyond ``.,!?``; duplicates ignored)."""
    pred, ref = set_tokens(prediction), set_tokens(gold)
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


def percentiles(values: Sequence[float], qs: Sequence[float] = (50, 95)) -> dict[str, float | None]:
    """Latency percentiles (linear interpolation) keyed ``p50``, ``p95``; None when empty."""
    data = np.asarray(list(values), dtype=float)
    return {f"p{q:g}": (float(np.percentile(data, q)) if data.size else None) for q in qs}
