"""research/judge_scores.py: NLI answers found in a cache archive by their shape, scored as the detector scores them."""

from __future__ import annotations

import gzip
import json
import math

import pytest

from research.judge_scores import judged_checks, main


def _position(token: str, probs: dict[str, float]) -> dict:
    return {"token": token, "top_logprobs": [{"token": " " + label, "logprob": math.log(p)} for label, p in probs.items()]}


SINGLE = {"text": "unknown", "logprobs": [_position("unknown", {"unknown": 0.7, "false": 0.2, "true": 0.1})]}
BATCHED = {
    "text": "1. true\n2. false",
    "logprobs": [
        {"token": "1", "top_logprobs": []}, {"token": ".", "top_logprobs": []}, _position(" true", {"true": 0.6, "false": 0.4}),
        {"token": "\n", "top_logprobs": []}, {"token": "2", "top_logprobs": []}, {"token": ".", "top_logprobs": []},
        _position(" false", {"false": 0.5, "true": 0.3, "unknown": 0.2}),
    ],
}  # fmt: skip
OTHER = [{"text": '{"facts":[]}', "logprobs": None}, {"text": "1. Paris\n2. Rome", "logprobs": None}, {"text": "true story", "logprobs": None}]


def test_single_and_batched_answers_are_told_apart_and_scored():
    checks = judged_checks([SINGLE, BATCHED, *OTHER])
    assert checks["single"] == [("unknown", pytest.approx(0.2))]
    assert [label for label, _ in checks["batched"]] == ["true", "false"]
    assert [score for _, score in checks["batched"]] == [pytest.approx(0.4), pytest.approx(0.5)]


def test_the_report_counts_scores_at_the_threshold_per_written_label(tmp_path):
    archive = tmp_path / "cache.jsonl.gz"
    with gzip.open(archive, "wt", encoding="utf-8") as out:
        for n, value in enumerate([SINGLE, BATCHED, *OTHER]):
            out.write(json.dumps({"key": str(n), "value": value}) + "\n")
    report = main([str(archive), "--threshold", "0.45", "--out", str(tmp_path / "r.json")])
    assert report["batched"]["all"]["n"] == 2 and report["batched"]["all"]["at_or_above_threshold"] == 1
    assert report["batched"]["true"]["max"] == pytest.approx(0.4) and report["batched"]["unknown"] == {"n": 0}
    assert json.loads((tmp_path / "r.json").read_text())["single"]["all"]["n"] == 1


def test_a_missing_archive_names_the_export_command(tmp_path):
    with pytest.raises(SystemExit, match="cache_archive export"):
        main([str(tmp_path / "none.jsonl.gz")])


def test_the_threshold_defaults_to_the_detectors_own(tmp_path):
    from omegaconf import OmegaConf

    from research.judge_scores import MOSAIC_CONF

    archive = tmp_path / "cache.jsonl.gz"
    with gzip.open(archive, "wt", encoding="utf-8") as out:
        out.write(json.dumps({"key": "k", "value": BATCHED}) + "\n")
    assert main([str(archive)])["threshold"] == OmegaConf.load(MOSAIC_CONF).conflict.threshold
