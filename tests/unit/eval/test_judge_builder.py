"""The one judge builder (eval.judge.build_judge): every conf/judge setting reaches the judge in the runner,
scripts/rejudge.py and scripts/calibrate_judge.py, or is refused; the judge stays out of the hash of runs
that never call it; and the calibrated judge (one token, P(correct) from log-probabilities).

Fake LLMs drive control flow only; the real judge's numbers are in results/bench/locomo_judge_calibration.*.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from core.api import ChatResult
from eval.benchmarks.locomo.judge_agreement import rejudge
from eval.benchmarks.locomo.judge_calibration import acceptance, at_threshold, fit_threshold, halves, load_bank, roc
from eval.judge import CalibratedJudge, LLMJudge, build_judge, word_probability
from eval.runner import ConfigError, config_hash, validate
from tests.conftest import REPO
from tests.fakes import FakeLLM
from tests.hydra_config import compose_config, conf_judge
from tests.script_loader import load_script
from tests.unit.eval.test_judge import PREDICTION_FIELDS, write_bank


class LogprobFakeLLM(FakeLLM):
    """Answers every chat with one token whose top log-probabilities give p(yes) = ``p_yes(last user message)``."""

    def __init__(self, p_yes: Any, model_id: str = "fake-logprob", words: tuple[str, str] = ("yes", "no")) -> None:
        super().__init__(lambda m, s: "", model_id=model_id)
        self.p_yes, self.words = p_yes, words

    def chat(self, messages, *, response_schema=None, max_tokens=256, temperature=0.0, seed=0, purpose="other", top_logprobs=0):
        self.requests.append({"messages": messages, "max_tokens": max_tokens, "top_logprobs": top_logprobs, "purpose": purpose})
        p = self.p_yes(messages[-1]["content"])
        if p is None:  # neither answer word offered
            top = [{"token": "The", "logprob": 0.0}]
        else:
            top = [{"token": w, "logprob": math.log(max(q, 1e-12))} for w, q in zip(self.words, (p, 1 - p))]
        text = top[0]["token"] if p is None else (self.words[0] if p >= 0.5 else self.words[1])
        return ChatResult(text=text, prompt_tokens=10, completion_tokens=1, latency_s=0.0, cached=False, model=self.model_id,
                          logprobs=[{"token": text, "logprob": 0.0, "top_logprobs": top}])  # fmt: skip


def counting_llm(record_to: str, **_: object) -> FakeLLM:
    """A judge client built by Hydra whose replies always break the schema; each request is written to ``record_to``."""
    llm = FakeLLM(lambda m, s: "not json", model_id="fake-counting")
    chat = llm.chat

    def recorded(messages, **kwargs):  # type: ignore[no-untyped-def]
        with open(record_to, "a", encoding="utf-8") as out:
            out.write(json.dumps({"max_tokens": kwargs.get("max_tokens")}) + "\n")
        return chat(messages, **kwargs)

    llm.chat = recorded  # type: ignore[method-assign]
    return llm


def _requests(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _finished_run(folder: Path, n: int = 4) -> Path:
    folder.mkdir(parents=True)
    predictions = [{"key": f"conv-26:q{i}", "sample_id": "conv-26", "qa_index": i, "category": 4, "question": f"q{i}",
                    "gold": "yes" if i % 2 else "no", "prediction": "yes", **PREDICTION_FIELDS} for i in range(n)]  # fmt: skip
    (folder / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in predictions))
    (folder / "judgements.jsonl").write_text("".join(json.dumps({"key": p["key"], "label": "CORRECT", "correct": True}) + "\n" for p in predictions))
    (folder / "metrics.json").write_text(json.dumps({"convention": "locomo", "overall": {}}))
    return folder


# -- one builder, no setting ignored ------------------------------------------------------------
def test_rejudge_uses_judge_max_tokens_and_attempts(tmp_path):
    """Before the builder, rejudge read its own `judge_max_tokens` and left `judge2.attempts` at a default."""
    run, log = _finished_run(tmp_path / "run"), tmp_path / "requests.jsonl"
    client = f"judge2.llm={{_target_:tests.unit.eval.test_judge_builder.counting_llm,record_to:{log}}}"
    assert load_script("rejudge").main([f"run_dir={run}", client, "judge2.max_tokens=55", "judge2.attempts=3"]) == 0
    requests = _requests(log)
    assert len(requests) == 4 * 3 and {r["max_tokens"] for r in requests} == {55}  # every judgement tried `attempts` times


def test_calibrate_judge_uses_judge_max_tokens_and_attempts(tmp_path):
    """Before the builder, calibrate_judge read `calibration.judge_max_tokens` and never passed `judge.attempts`."""
    log = tmp_path / "requests.jsonl"
    client = f"judge.llm={{_target_:tests.unit.eval.test_judge_builder.counting_llm,record_to:{log}}}"
    overrides = [f"calibration.bank_dir={write_bank(tmp_path / 'bank')}", "calibration.dev_per_stratum=2", "calibration.report_per_stratum=2",
                 f"calibration.out_dir={tmp_path / 'judge'}", "calibration.workers=1", client, "judge.max_tokens=44", "judge.attempts=3"]  # fmt: skip
    assert load_script("calibrate_judge").main(overrides) == 0
    requests = _requests(log)
    assert len(requests) == 2 * 3 * 3 and {r["max_tokens"] for r in requests} == {44}


def test_a_setting_the_judge_would_ignore_is_refused_before_any_run():
    with pytest.raises(ConfigError, match=r"^judge\.max_token: not a setting of LLMJudge \(it takes max_tokens, attempts\)"):
        validate(compose_config(["+judge.max_token=5"]))
    with pytest.raises(ConfigError, match=r"^judge\.attempts: missing from the judge config"):
        validate(compose_config(["~judge.attempts"]))
    with pytest.raises(ConfigError, match=r"^judge\.attempts: not a setting of CalibratedJudge"):
        validate(compose_config(["judge=calibrated", "+judge.attempts=2"]))
    with pytest.raises(ValueError, match=r"^judge2\.max_tokens: not a setting of CalibratedJudge"):
        build_judge(compose_config(["judge=calibrated", "+judge.max_tokens=1"]).judge, FakeLLM(lambda m, s: ""), where="judge2")
    validate(compose_config(["judge=calibrated"]))


def test_the_builder_builds_each_judge_class_with_its_settings():
    reasoning = conf_judge(FakeLLM(lambda m, s: {}), ["judge.max_tokens=99"])
    assert isinstance(reasoning, LLMJudge) and (reasoning.max_tokens, reasoning.attempts) == (99, 2)
    calibrated = conf_judge(LogprobFakeLLM(lambda text: 0.5), ["judge=calibrated", "judge.threshold=0.3", "judge.top_logprobs=7"])
    assert isinstance(calibrated, CalibratedJudge) and (calibrated.threshold, calibrated.top_logprobs) == (0.3, 7)
    assert calibrated.prompt.name == "calibrated"


# -- the run hash -------------------------------------------------------------------------------
def test_judge_settings_stay_out_of_the_hash_of_runs_that_never_call_a_judge():
    """The hash is sha256 over the semantic config (minus where-things-go keys) and the input files' hashes;
    the conflict suite is scored from AddReports alone, so its hash ignores conf/judge; LoCoMo's does not."""
    conflict = ["experiment=conflict", "conflict.suite=data/conflicts/household_finance.json"]
    base = config_hash(compose_config(conflict), inputs={})
    for judge in (["judge.max_tokens=7"], ["judge/prompt=strict"], ["judge=calibrated"], ["judge=local"]):
        assert config_hash(compose_config([*conflict, *judge]), inputs={}) == base
    locomo = config_hash(compose_config(["experiment=locomo"]), inputs={})
    for judge in (["judge.max_tokens=7"], ["judge.attempts=3"], ["judge/prompt=strict"], ["judge=calibrated"]):
        assert config_hash(compose_config(["experiment=locomo", *judge]), inputs={}) != locomo


def test_the_default_judge_block_is_unchanged_so_judged_runs_keep_their_folders():
    """A judged run's hash covers conf/judge: the default block has exactly the keys every published LoCoMo run was hashed with."""
    assert set(compose_config([]).judge) == {"prompt", "max_tokens", "attempts", "llm"}


# -- the calibrated judge -----------------------------------------------------------------------
def test_word_probability_reads_the_first_tokens_alternatives():
    top = [{"token": "Yes", "logprob": math.log(0.6)}, {"token": " yes", "logprob": math.log(0.1)}, {"token": "No", "logprob": math.log(0.3)}]
    assert word_probability([{"token": "Yes", "top_logprobs": top}], "Yes", "yes", "no") == pytest.approx(0.7)
    assert word_probability(None, " no", "yes", "no") == 0.0 and word_probability(None, "Yes", "yes", "no") == 1.0
    assert word_probability([{"token": "The", "top_logprobs": [{"token": "The", "logprob": 0.0}]}], "The", "yes", "no") is None


def test_calibrated_judge_stores_p_correct_and_applies_its_threshold():
    judge = conf_judge(LogprobFakeLLM(lambda text: {"a": 0.8, "b": 0.4, "c": None}[text.split("Answer: ")[1][0]]), ["judge=calibrated", "judge.threshold=0.5"])
    right, wrong, failed = judge.judge("q", "g", "a1"), judge.judge("q", "g", "b1"), judge.judge("q", "g", "c1")
    assert right["label"] == "CORRECT" and right["p_correct"] == pytest.approx(0.8) and right["threshold"] == 0.5
    assert wrong["label"] == "WRONG" and wrong["p_correct"] == pytest.approx(0.4)
    assert failed["label"] is None and failed["failure"].startswith("no yes/no token")
    assert {(r["max_tokens"], r["top_logprobs"], r["purpose"]) for r in judge.llm.requests} == {(1, 10, "judge")}


def _rows(values: dict[str, list[float]]) -> list[dict[str, Any]]:
    return [{"stratum": s, "p_correct": p} for s, ps in values.items() for p in ps]


def test_fit_threshold_rules_keep_gold_at_its_target():
    rows = _rows({"gold": [0.95, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1], "vague_wrong": [0.65, 0.1], "specific_wrong": [0.05]})
    assert fit_threshold(rows, 0.9, "strictest") == 0.2  # 9 of 10 gold answers at >= 0.2
    assert fit_threshold(rows, 0.5, "strictest") == 0.6
    # youden: gold share minus wrong share; at 0.2: 0.9 - 1/3, at 0.1: 1.0 - 2/3; so 0.2, then midway down to 0.1
    assert fit_threshold(rows, 0.9) == pytest.approx(0.15)
    separated = _rows({"gold": [0.97, 0.93, 0.86], "vague_wrong": [0.82, 0.5], "specific_wrong": [0.3]})
    assert fit_threshold(separated, 0.9) == pytest.approx(0.84) and fit_threshold(separated, 0.9, "strictest") == 0.86
    with pytest.raises(ValueError, match="threshold_fit.rule='best'"):
        fit_threshold(rows, 0.9, "best")
    assert acceptance(rows, "vague_wrong", 0.6) == 0.5 and acceptance(rows, "gold", 0.6) == 0.5
    assert [r["accepted"] for r in at_threshold(_rows({"gold": [0.7, 0.2]}), 0.5)] == [True, False]
    curves = roc(rows)
    assert set(curves) == {"vague_wrong", "specific_wrong", "both_wrong"} and curves["specific_wrong"]["auc"] == 1.0
    with pytest.raises(ValueError, match="no judged gold answers"):
        fit_threshold(_rows({"vague_wrong": [0.3]}), 0.9)


def test_calibrate_fits_on_one_half_and_reports_the_other(tmp_path):
    bank = write_bank(tmp_path / "bank")
    items = load_bank(bank, [8])
    fit_half, held = halves(items, 5, seed=0)
    assert len(fit_half) == len(held) == 5 and not {i.question_id for i in fit_half} & {i.question_id for i in held}
    out = tmp_path / "cal" / "locomo_judge_calibration"

    def p_yes(text: str) -> float:  # gold answers high, vague middling, specific low
        answer = text.split("Answer: ")[1]
        return 0.9 if answer.startswith("gold") else 0.5 if answer.startswith("vague") else 0.1

    script = load_script("calibrate_judge")
    overrides = ["judge=calibrated", f"calibration.bank_dir={bank}", "calibration.workers=1", "threshold_fit.per_half=4",
                 "threshold_fit.held_out_conversations=[8]", f"threshold_fit.out={out}", "threshold_fit.held_out_slice=2",
                 "threshold_fit.inspected_slices=[1]"]  # fmt: skip
    cfg = script.compose_config(overrides)
    record = script.fit(cfg, build_judge(cfg.judge, LogprobFakeLLM(p_yes)), "python -m scripts.calibrate_judge ...")
    assert record["fitted_threshold"] == pytest.approx(0.7) and record["held_out_acceptance"] == {"gold": 1.0, "vague_wrong": 0.0, "specific_wrong": 0.0}
    fitted_on = {r["question_id"] for r in record["items"]["fit"]}
    assert not fitted_on & {r["question_id"] for r in record["items"]["held_out"]} and set(record["inspected_slices_acceptance"]) == {1}
    with pytest.raises(ValueError, match="held_out_slice=1: must be >= 1 and not among inspected_slices"):
        script.fit(script.compose_config([*overrides, "threshold_fit.held_out_slice=1"]), build_judge(cfg.judge, LogprobFakeLLM(p_yes)), "-")
    assert all(record["targets_reached_on_held_out"].values()) and len(record["items"]["held_out"]) == 12
    assert record["roc"]["held_out"]["both_wrong"]["auc"] == 1.0
    script.roc_figure(record, out.with_name("roc.png"))
    assert out.with_name("roc.png").stat().st_size > 1000
    assert "| gold answers | 100.0% |" in script.fit_markdown(record)


def test_conf_threshold_is_the_fitted_one():
    """conf/judge/calibrated.yaml's threshold is the one the committed calibration fitted (copied by hand: checked here)."""
    fitted = json.loads((REPO / "results" / "bench" / "locomo_judge_calibration.json").read_text())
    conf = yaml.safe_load((REPO / "conf" / "judge" / "calibrated.yaml").read_text())
    assert conf["threshold"] == pytest.approx(fitted["fitted_threshold"], abs=1e-4)
    assert fitted["prompt"] == conf["defaults"][0]["prompt"]


def test_rejudge_with_the_calibrated_judge_fills_its_own_section(tmp_path):
    run = _finished_run(tmp_path / "run")
    judge = conf_judge(LogprobFakeLLM(lambda text: 0.9 if "Gold answer: yes" in text else 0.2), ["judge=calibrated", "judge.threshold=0.5"])
    section = rejudge(run, judge, "fake", n_samples=100, section_key="judge_calibrated")
    metrics = json.loads((run / "metrics.json").read_text())
    assert "judge2" not in metrics and metrics["judge_calibrated"]["threshold"] == 0.5
    assert section["overall"]["judge"]["mean"] == pytest.approx(0.5) and section["judge_class"] == "CalibratedJudge"
    rows = [json.loads(line) for line in (run / section["rows_file"]).read_text().splitlines()]
    assert section["rows_file"] == "judgements2__fake__calibrated__t0.5.jsonl" and {r["p_correct"] for r in rows} == {0.9, 0.2}


def test_table_one_shows_the_calibrated_column_beside_the_run_judge():
    from eval.benchmarks.locomo.table import calibrated_cell, headline_table

    rejudged = {"judge_calibrated": {"overall": {"judge": {"mean": 0.5, "ci_low": 0.25, "ci_high": 0.75, "n": 20}}, "threshold": 0.42}}
    assert calibrated_cell({}) == "not re-judged"
    assert calibrated_cell(rejudged).endswith("(t=0.42)") and calibrated_cell(rejudged).startswith("50.0")
    table = headline_table([{"overall": {"judge": {"mean": 0.6, "ci_low": 0.4, "ci_high": 0.8, "n": 20}}, **rejudged}])
    assert list(table["calibrated judge"]) == [calibrated_cell(rejudged)] and "judge" in table.columns
