"""Judge prompts as config, judge calibration on the audit bank, and agreement between two judges.

FakeLLM stands in for the judge model (control flow only); the real 1.5B judge's rates are in
results/judge/ (scripts/calibrate_judge.py).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from eval.judge import JudgePrompt, LLMJudge, build_judge, judge_prompt_of
from eval.benchmarks.locomo.judge_agreement import judge_agreement, rejudge
from eval.benchmarks.locomo.judge_calibration import (
    STRATA,
    calibration_key,
    judge_sample,
    load_bank,
    load_calibration,
    rates,
    split_sample,
    summary_cell,
)
from eval.runner import ConfigError, validate
from tests.conftest import REPO
from tests.fakes import FakeLLM, SchemaFakeLLM
from tests.hydra_config import compose_config, conf_judge
from tests.script_loader import load_script

# sha256 of the judge system prompt every published run was judged with (before prompts moved to conf/)
DEFAULT_SYSTEM_SHA256 = "899b64393a1bbadc2c6cfc3b4dd865b67f7e9b36e5f707dbb49659bae04fda98"


# -- prompts ------------------------------------------------------------------------------------
def test_default_prompt_is_byte_identical_to_the_published_one():
    judge = conf_judge(FakeLLM(lambda m, s: {}))  # the judge a run gets from conf/judge (default prompt)
    messages = judge.messages("When?", "7 May 2023", "May 7th")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert hashlib.sha256(messages[0]["content"].encode()).hexdigest() == DEFAULT_SYSTEM_SHA256
    assert messages[1]["content"] == "Question: When?\nGold answer: 7 May 2023\nGenerated answer: May 7th"
    assert (judge.max_tokens, judge.attempts) == (160, 2)  # what every published LoCoMo run was judged with


def test_prompts_compose_from_config_and_fill_their_template():
    for judge in ("same", "local"):
        for name in ("default", "mem0_generous", "strict"):
            cfg = compose_config([f"judge={judge}", f"judge/prompt={name}"])
            prompt = judge_prompt_of(cfg.judge)
            assert prompt == JudgePrompt.from_mapping(yaml.safe_load((REPO / "conf" / "judge" / "prompt" / f"{name}.yaml").read_text()))
            text = LLMJudge(None, prompt=prompt, max_tokens=1, attempts=1).messages("Q {x}?", "G", "P")[-1]["content"]  # braces in values are fine
            assert "Q {x}?" in text and "Gold answer: G" in text and "Generated answer: P" in text
    assert compose_config([]).judge.prompt.name == "default"
    assert conf_judge(None, ["judge/prompt=mem0_generous"]).messages("q", "g", "p")[0]["role"] == "user"  # no system


def test_bad_prompts_name_the_key_and_the_fix():
    with pytest.raises(ConfigError, match=r"^judge\.prompt: no judge prompt chosen; pick one of conf/judge/prompt/"):
        validate(compose_config(["judge.prompt=null"]))  # no fallback to a default prompt
    with pytest.raises(ConfigError, match=r"^judge\.prompt\.user: the template must contain \{prediction\}"):
        validate(compose_config(["judge.prompt.user='{question} {gold}'"]))
    with pytest.raises(ConfigError, match=r"^judge\.max_tokens=0: must be"):
        validate(compose_config(["judge.max_tokens=0"]))
    with pytest.raises(ValueError, match=r"must contain \{prediction\}"):
        JudgePrompt.from_mapping({"name": "x", "user": "{question} {gold}"})
    with pytest.raises(ValueError, match="needs `name` and `user`"):
        JudgePrompt.from_mapping({"name": "x", "user": "{question} {gold} {prediction}", "sytem": "typo"})


def test_judge_has_no_prompt_of_its_own_and_no_path_into_conf():
    """eval/judge.py reads no prompt file: the prompt arrives from the composed config (conf/judge/prompt/)."""
    import inspect

    import eval.judge

    source = inspect.getsource(eval.judge)
    assert "__file__" not in source and '"conf"' not in source and "from_conf" not in source
    with pytest.raises(TypeError):
        LLMJudge(None)  # type: ignore[call-arg]  # no default prompt


def recording_judge_llm(record_to: str, **_: object) -> SchemaFakeLLM:
    """A judge client built by Hydra (``judge.llm._target_``) that writes each request to ``record_to`` (JSONL)."""
    llm = SchemaFakeLLM(model_id="fake-judge")
    chat = llm.chat

    def recorded(messages, **kwargs):  # type: ignore[no-untyped-def]
        with open(record_to, "a", encoding="utf-8") as out:
            out.write(json.dumps({"messages": messages, **{k: kwargs.get(k) for k in ("max_tokens", "purpose")}}) + "\n")
        return chat(messages, **kwargs)

    llm.chat = recorded  # type: ignore[method-assign]
    return llm


def test_locomo_judges_with_the_judge_built_from_conf_judge(tmp_path):
    """A value changed in the composed conf/judge (prompt, max_tokens, its own client) reaches every
    LoCoMo judgement of a run through the runner: nothing about the judge is fixed in the benchmark."""
    from omegaconf import OmegaConf, open_dict

    from eval.runner import run
    from tests.unit.eval.test_experiments_smoke import _on_fakes, _slice

    overrides = ["experiment=locomo", *_slice("locomo", tmp_path), "judge/prompt=strict", "judge.max_tokens=77", "judge.attempts=1"]
    cfg = _on_fakes(compose_config(overrides), tmp_path)
    with open_dict(cfg):
        cfg.judge.llm = OmegaConf.create({"_target_": "tests.unit.eval.test_judge.recording_judge_llm", "record_to": str(tmp_path / "judge.jsonl")})
    metrics = run(cfg, overrides)
    JUDGE_REQUESTS = [json.loads(line) for line in (tmp_path / "judge.jsonl").read_text().splitlines()]
    strict = yaml.safe_load((REPO / "conf" / "judge" / "prompt" / "strict.yaml").read_text())
    assert metrics["judge_prompt"] == "strict" and metrics["metadata"]["judge_model_id"] == "fake-judge"
    assert len(JUDGE_REQUESTS) == metrics["overall"]["n"] == 4  # one judgement per question, attempts=1
    assert {r["purpose"] for r in JUDGE_REQUESTS} == {"judge"} and {r["max_tokens"] for r in JUDGE_REQUESTS} == {77}
    assert all(r["messages"][0] == {"role": "system", "content": strict["system"]} for r in JUDGE_REQUESTS)


# -- calibration ----------------------------------------------------------------------------------
def _bank_rows(conversation: int, n: int, answer: str, accepted: bool) -> list[dict]:
    return [
        {
            "question_id": f"locomo_{conversation}_qa{j}",
            "question": f"q{conversation}-{j}",
            "golden_answer": f"gold{conversation}-{j}",
            "generated_answer": f"{answer}{conversation}-{j}",
            "llm_judgments": {"judgment_1": accepted, "judgment_2": accepted, "judgment_3": False},
            "category": "2",
        }
        for j in range(n)
    ]


def write_bank(folder: Path) -> Path:
    """A bank shaped like the audit's: conversations 0, 1 and the held-out 8."""
    folder.mkdir(parents=True, exist_ok=True)
    for filename, answer, accepted in (("ap_v2_vague_wrong_scored.json", "vague", True), ("ap_v1_specific_wrong_scored.json", "specific", False)):
        detailed = {f"locomo_exp_user_{c}": _bank_rows(c, 6, answer, accepted) for c in (0, 1, 8)}
        (folder / filename).write_text(json.dumps({"total_questions": 18, "detailed_results": detailed}))
    return folder


def test_bank_drops_held_out_conversations_and_splits_are_disjoint(tmp_path):
    items = load_bank(write_bank(tmp_path / "bank"), held_out_conversations=[8])
    assert len(items) == 12 and {i.conversation for i in items} == {0, 1}
    assert items[0].answers == {"vague_wrong": "vague0-0", "specific_wrong": "specific0-0", "gold": "gold0-0"}
    assert items[0].reference_accepts["vague_wrong"] is True and items[0].reference_accepts["specific_wrong"] is False
    dev, report = split_sample(items, "dev", 4, 6, seed=0), split_sample(items, "report", 4, 6, seed=0)
    assert len(dev) == 4 and len(report) == 6 and not {i.question_id for i in dev} & {i.question_id for i in report}
    assert split_sample(items, "report", 4, 6, seed=0) == report  # seeded
    with pytest.raises(ValueError, match="exceed the bank's 12"):
        split_sample(items, "report", 8, 6, seed=0)


def test_rates_count_accepts_per_stratum_with_cis(tmp_path):
    items = load_bank(write_bank(tmp_path / "bank"), held_out_conversations=[8])
    # accepts gold always, vague answers of conversation 0 only, specific answers never
    judge = conf_judge(FakeLLM(lambda m, s: {"reasoning": "-", "label": "CORRECT" if ("gold" in m[-1]["content"].split("Generated answer: ")[1] or "vague0" in m[-1]["content"]) else "WRONG"}))
    rows = judge_sample(judge.judge, items, workers=2)
    assert [r["stratum"] for r in rows] == [s for s in STRATA for _ in items]  # order kept with workers
    out = rates(rows, n_samples=200, seed=0)
    assert out["vague_wrong"]["false_accept"]["mean"] == pytest.approx(0.5) and out["vague_wrong"]["n"] == 12
    assert out["specific_wrong"]["false_accept"]["mean"] == 0.0 and out["gold"]["true_accept"]["mean"] == 1.0
    assert out["vague_wrong"]["reference_gpt4o_mini_generous"]["mean"] == 1.0 and out["gold"]["reference_gpt4o_mini_generous"] is None
    low, high = out["vague_wrong"]["false_accept"]["ci_low"], out["vague_wrong"]["false_accept"]["ci_high"]
    assert 0.0 <= low < 0.5 < high <= 1.0
    record = {"rates": out, "questions": 12}
    (tmp_path / f"{calibration_key('org/model', 'strict')}.json").write_text(json.dumps(record))
    assert load_calibration(tmp_path, "org/model", "strict") == record and load_calibration(tmp_path, "org/model", "default") is None
    assert summary_cell(record).startswith("vague-wrong FA 50 [") and summary_cell(record).endswith("(n=12/stratum)")
    assert "not calibrated" in summary_cell(None)


def test_calibrate_script_writes_a_record_keyed_by_model_and_prompt(tmp_path):
    script = load_script("calibrate_judge")
    cfg = script.compose_config(
        [f"calibration.bank_dir={write_bank(tmp_path / 'bank')}", "calibration.dev_per_stratum=4", "calibration.report_per_stratum=5",
         "judge/prompt=strict", f"calibration.out_dir={tmp_path / 'judge'}", "calibration.workers=1"]
    )  # fmt: skip
    judge = build_judge(cfg.judge, FakeLLM(lambda m, s: {"reasoning": "-", "label": "WRONG"}, model_id="fake-1.5b"))
    record = script.calibrate(cfg, judge)
    assert record["prompt"] == "strict" and record["questions"] == 5 and len(record["items"]) == 15
    assert record["rates"]["gold"]["true_accept"]["mean"] == 0.0
    assert script.output_path(cfg, record) == tmp_path / "judge" / "fake-1.5b__strict.json"


# -- a second judge ---------------------------------------------------------------------------------
def test_kappa_and_confusion_on_a_hand_computed_case():
    # 10 items: both CORRECT 4, judge C / judge2 W 2, judge W / judge2 C 1, both WRONG 3; plus 1 unlabelled.
    first = ["CORRECT"] * 6 + ["WRONG"] * 4 + [None]
    second = ["CORRECT"] * 4 + ["WRONG"] * 2 + ["CORRECT"] + ["WRONG"] * 3 + ["CORRECT"]
    out = judge_agreement(first, second)
    # p_o = 7/10; p_e = 0.6 * 0.5 + 0.4 * 0.5 = 0.5; kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    assert out["kappa"] == pytest.approx(0.4) and out["agreement"] == pytest.approx(0.7)
    assert out["confusion"] == {
        "judge CORRECT / judge2 CORRECT": 4,
        "judge CORRECT / judge2 WRONG": 2,
        "judge WRONG / judge2 CORRECT": 1,
        "judge WRONG / judge2 WRONG": 3,
    }
    assert out["n_compared"] == 10 and out["n_unlabelled"] == 1
    assert judge_agreement(["CORRECT"] * 3, ["CORRECT"] * 3)["kappa"] is None  # undefined: one label only
    with pytest.raises(ValueError, match="3 first-judge labels but 2"):
        judge_agreement(["CORRECT"] * 3, ["CORRECT"] * 2)


PREDICTION_FIELDS = {"evidence": [], "retrieved_turn_ids": [], "search_latency_s": 0.0, "answer_latency_s": 0.0, "total_latency_s": 0.0,
                     "answer_prompt_tokens": 0, "answer_completion_tokens": 0, "search_tokens": 0}  # fmt: skip


def test_rejudge_adds_a_second_judge_to_metrics(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    predictions = [{"key": f"conv-26:q{i}", "sample_id": "conv-26", "qa_index": i, "category": 4, "question": f"q{i}", "gold": "yes" if i % 2 else "no", "prediction": "yes", **PREDICTION_FIELDS} for i in range(6)]
    (run / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in predictions))
    (run / "judgements.jsonl").write_text("".join(json.dumps({"key": p["key"], "label": "CORRECT", "correct": True}) + "\n" for p in predictions))
    (run / "metrics.json").write_text(json.dumps({"convention": "locomo", "overall": {}}))
    strict = conf_judge(FakeLLM(lambda m, s: {"reasoning": "-", "label": "CORRECT" if "Gold answer: yes" in m[-1]["content"] else "WRONG"}), ["judge/prompt=strict"])
    section = rejudge(run, strict, "fake", n_samples=100)
    assert section["overall"]["judge"]["mean"] == pytest.approx(0.5) and section["prompt"] == "strict"
    assert section["confusion"]["judge CORRECT / judge2 WRONG"] == 3 and section["kappa"] == 0.0  # first judge constant
    assert json.loads((run / "metrics.json").read_text())["judge2"]["rows_file"] == "judgements2__fake__strict.json".replace(".json", ".jsonl")
    calls = len(strict.llm.requests)
    rejudge(run, strict, "fake", n_samples=100)
    assert len(strict.llm.requests) == calls  # rows are reused, nothing re-judged


def test_rejudge_script_maps_judge2_overrides():
    script = load_script("rejudge")
    cfg = script.compose_config(["run_dir=x", "judge2=local", "judge2/prompt=mem0_generous", "judge2.llm.model=some.gguf"])
    assert cfg.judge2.prompt.name == "mem0_generous" and cfg.judge2.llm.model == "some.gguf"
    assert script.compose_config(["run_dir=x"]).judge2.prompt.name == "default"
