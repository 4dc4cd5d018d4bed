"""research/tune_conflict.py: the threshold-free separability of the LLM's score (ROC AUC), and the
gate that keeps evaluation suites out of calibration (by split field and by content)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.benchmarks.conflict.suite import EVAL_SUITE_FINGERPRINTS, load_suite
from tests.conftest import REPO

SUITES = REPO / "data" / "conflicts"

from tests.script_loader import load_script


@pytest.fixture(scope="module")
def tune():
    return load_script("tune_conflict", package="research")


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


def _copy(tmp_path: Path, source: str, file_name: str, **changes) -> Path:
    """A copy of a shipped suite under another file name, top-level fields changed (text never shown)."""
    data = json.loads((SUITES / source).read_text(encoding="utf-8"))
    data.update(changes)
    target = tmp_path / file_name
    target.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return target


def test_dev_suites_pass_the_gate(tune):
    for name in ("household_finance.json", "workplace_policy.json"):
        assert tune.load_dev_suite(str(SUITES / name)).split == "dev"


def test_eval_suite_is_refused_by_its_split_field_under_any_name(tune, tmp_path):
    with pytest.raises(SystemExit, match="field 'split' is 'eval'"):
        tune.load_dev_suite(str(SUITES / "hypertension.json"))
    renamed = _copy(tmp_path, "hypertension.json", "cardiology_dev.json", name="cardiology_dev")
    with pytest.raises(SystemExit, match="field 'split' is 'eval'"):
        tune.load_dev_suite(str(renamed))


def test_relabelled_renamed_copy_of_the_eval_suite_is_refused_by_content(tune, tmp_path):
    disguised = _copy(tmp_path, "hypertension.json", "my_dev_suite.json", name="my_dev_suite", split="dev", description="dev")
    assert load_suite(disguised).split == "dev"  # the file says dev ...
    with pytest.raises(SystemExit, match="evaluation suite 'hypertension' \\(content fingerprint\\)"):
        tune.load_dev_suite(str(disguised))  # ... its content says otherwise


def test_every_shipped_eval_suite_has_its_fingerprint_listed():
    """A new evaluation suite must be added to EVAL_SUITE_FINGERPRINTS, or renamed copies would pass."""
    for path in sorted(SUITES.glob("*.json")):
        suite = load_suite(path)
        if suite.split == "eval":
            assert EVAL_SUITE_FINGERPRINTS.get(suite.name) == suite.fingerprint, path.name
        else:
            assert suite.fingerprint not in EVAL_SUITE_FINGERPRINTS.values(), path.name


def test_detector_llm_and_caches_come_from_conf(tune, monkeypatch, tmp_path):
    """The tool bypassed conf/ (its own model name, context size and .cache paths); now it composes conf/ as
    run.py does: conf's conflict section (with overrides), the sweep's fixed settings on top, caches in cache_dir."""
    monkeypatch.setenv("MOSAIC_CACHE_DIR", str(tmp_path / "cache"))
    cfg = tune.compose_config(["system.conflict.n_facts=3"])
    settings = tune.detector_settings(cfg, "pick")
    assert settings["n_facts"] == 3 and settings["k"] == cfg.system.conflict.k and settings["mode"] == "pick"
    assert settings["threshold"] == 0.0 and settings["explain"] is False  # every check scored, whatever conf's threshold
    assert cfg.system.conflict.threshold != 0.0
    assert cfg.llm.cache_path == str(tmp_path / "cache" / "llm_cache.sqlite")
    assert cfg.embedder.cache_path == str(tmp_path / "cache" / "embed_cache.sqlite")
    assert "_target_" not in settings and "_partial_" not in settings
