"""Metrics on hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from eval.metrics import (
    bootstrap,
    format_ci,
    bleu1,
    bootstrap_ci,
    evidence_recall,
    normalize_answer,
    percentiles,
    set_f1,
    token_f1,
)


def test_normalisation_drops_case_punctuation_articles():
    assert normalize_answer("The  Cat's mat, an   apple!") == "cats mat apple"


def test_token_f1_partial_overlap():
    # pred tokens [cat, sat, on, mat], gold [cat, on, mat]: P = 3/4, R = 1 -> F1 = 6/7
    assert token_f1("The cat sat on the mat", "a cat on a mat") == pytest.approx(6 / 7)


def test_token_f1_counts_multiplicity():
    # overlap = min(2,1) dog + min(1,2) cat = 2; P = R = 2/3
    assert token_f1("dog dog cat", "dog cat cat") == pytest.approx(2 / 3)


def test_token_f1_edges():
    assert token_f1("", "") == 1.0
    assert token_f1("", "cat") == 0.0
    assert token_f1("dog", "cat") == 0.0
    assert token_f1(2022, "2022") == 1.0  # integer gold answers exist in LoCoMo


def test_set_f1_differs_from_squad_where_it_should():
    assert set_f1("dog dog cat", "dog cat cat") == 1.0  # sets ignore duplicates
    # Mem0 keeps articles: {a, cat} vs {the, cat} -> P = R = 1/2
    assert set_f1("a cat", "the cat") == pytest.approx(0.5)
    assert token_f1("a cat", "the cat") == 1.0
    assert set_f1("The cat.", "the cat") == 1.0


def test_bleu1_brevity_penalty_and_clipping():
    # pred [cat, sat] (c=2) vs gold [cat, sat, on, mat] (r=4): precision 1, BP = exp(1 - 4/2)
    assert bleu1("cat sat", "the cat sat on the mat") == pytest.approx(math.exp(-1))
    # clipped: 'cat' counts once; c=3 > r=1 so BP = 1
    assert bleu1("cat cat cat", "cat") == pytest.approx(1 / 3)
    assert bleu1("cat dog", "cat sat") == pytest.approx(0.5)
    assert bleu1("", "cat") == 0.0


def test_evidence_recall():
    assert evidence_recall(["D1:1", "D1:2"], ["D1:2", "D2:5", "D1:2"]) == 0.5
    assert evidence_recall(["D1:1"], []) == 0.0
    assert evidence_recall([], ["D1:1"]) is None


def test_bootstrap_two_points_hand_computed():
    # resampled means of [0, 1] are 0, .5, 1 with prob 1/4, 1/2, 1/4 -> 2.5th pct 0, 97.5th pct 1
    stat = bootstrap_ci([0.0, 1.0], n_samples=2000, seed=0)
    assert stat["mean"] == 0.5 and stat["ci_low"] == 0.0 and stat["ci_high"] == 1.0 and stat["n"] == 2


def test_bootstrap_is_seeded_and_sensible():
    values = [0.0, 1.0] * 50  # sd of the mean = 0.05 -> CI about 0.5 +- 0.1
    a = bootstrap_ci(values, n_samples=1000, seed=3)
    assert a == bootstrap_ci(values, n_samples=1000, seed=3)
    assert a != bootstrap_ci(values, n_samples=1000, seed=4)
    assert 0.38 < a["ci_low"] < 0.45 and 0.55 < a["ci_high"] < 0.62
    constant = bootstrap_ci([1.0, 1.0, 1.0])
    assert constant["ci_low"] == constant["ci_high"] == 1.0


def test_bootstrap_empty_and_none_values():
    assert bootstrap_ci([])["mean"] is None
    assert bootstrap_ci([None, 1.0])["n"] == 1


def test_percentiles_linear_interpolation():
    assert percentiles([1, 2, 3, 4, 5]) == {"p50": 3.0, "p95": pytest.approx(4.8)}
    assert percentiles([]) == {"p50": None, "p95": None}


# -- the one bootstrap behind every CI, and the one table cell ---------------------------------
def test_bootstrap_of_a_ratio_resamples_numerator_and_denominator_together():
    num, den = [1.0, 0.0, 2.0, 1.0], [1.0, 1.0, 2.0, 4.0]
    out = bootstrap(lambda n, d: n.sum(axis=1) / d.sum(axis=1), (num, den), n_samples=400, seed=3)
    assert out["mean"] == pytest.approx(4 / 8) and out["n"] == 4
    rng = np.random.default_rng(3)  # the same resamples by hand
    idx = rng.integers(0, 4, size=(400, 4))
    boot = np.asarray(num)[idx].sum(axis=1) / np.asarray(den)[idx].sum(axis=1)
    assert (out["ci_low"], out["ci_high"]) == tuple(np.percentile(boot, [2.5000000000000027, 97.5]))


def test_bootstrap_groups_are_resampled_independently_and_undefined_resamples_dropped():
    def difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a.mean(axis=1) - b.mean(axis=1)

    out = bootstrap(difference, [1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0], n_samples=300, seed=0, n=7)
    assert out["mean"] == pytest.approx(2 / 3 - 1 / 4) and out["n"] == 7
    assert out["ci_low"] < out["mean"] < out["ci_high"]

    def undefined_when_all_zero(a: np.ndarray) -> np.ndarray:
        total = a.sum(axis=1)
        return np.where(total > 0, a.max(axis=1), np.nan)

    sparse = bootstrap(undefined_when_all_zero, [0.0] * 9 + [1.0], n_samples=200, seed=1)
    assert sparse["mean"] == 1.0 and sparse["ci_low"] == sparse["ci_high"] == 1.0  # NaN resamples left out
    assert bootstrap(undefined_when_all_zero, [0.0, 0.0])["mean"] is None
    assert bootstrap(difference, [], [1.0])["mean"] is None


def test_format_ci_is_the_one_cell():
    stat = {"mean": 0.6213, "ci_low": 0.58, "ci_high": 0.6624}
    assert format_ci(stat) == "62.1 [58.0, 66.2]"
    assert format_ci(stat, digits=2, ci_digits=1) == "62.13 [58.0, 66.2]"
    assert format_ci({"mean": 0.5, "ci_low": None, "ci_high": None}) == "50.0"
    assert format_ci(None) == "" and format_ci({"mean": None}, missing="-") == "-"
