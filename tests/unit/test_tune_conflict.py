"""scripts/tune_conflict.py: the threshold-free separability of the LLM's score (ROC AUC)."""

from __future__ import annotations

import pytest

from tests.script_loader import load_script


@pytest.fixture(scope="module")
def tune():
    return load_script("tune_conflict")


def _row(conflict: bool, score: float | None, decided_by: str | None = "llm") -> dict:
    return {"conflict": conflict, "score": score, "decided_by": decided_by}


def test_auc_counts_only_llm_judged_cases(tune):
    rows = [_row(True, 0.9), _row(True, 0.6), _row(False, 0.5), _row(False, 0.1),
            _row(False, None, "numeric"), _row(False, 0.99, "duplicate")]  # fmt: skip
    assert tune.llm_score_auc(rows) == 1.0  # the numeric and duplicate rows do not enter


def test_auc_is_one_half_when_scores_do_not_separate_and_none_without_both_classes(tune):
    assert tune.llm_score_auc([_row(True, 0.3), _row(False, 0.3)]) == 0.5
    assert tune.llm_score_auc([_row(True, 0.2), _row(True, 0.4), _row(False, 0.3)]) == 0.5
    assert tune.llm_score_auc([_row(True, 0.9), _row(False, None, "numeric")]) is None
