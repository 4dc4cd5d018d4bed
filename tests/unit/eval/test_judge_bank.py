"""Judge banks (eval.judge_bank, scripts/judge_banks.py): bank validation, per-label accuracy and confusion,
the command's files and table, and the committed banks of locomo_qa and conflict_contradiction.

Fake LLMs drive control flow only; the real judges' accuracies are in results/tables/judges.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eval.judge_bank import FAILED, BankCase, BankError, in_turn, judges_markdown, load_bank, sample_per_label, score_bank
from tests.conftest import REPO
from tests.fakes import FakeLLM
from tests.script_loader import load_script
from tests.unit.eval.test_judge_builder import LogprobFakeLLM


def _write(path: Path, cases: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(c) + "\n" for c in cases))
    return path


def _case(i: int, label: str, **inputs: Any) -> dict[str, Any]:
    return {"id": f"c{i}", "source": "hand-written", "label": label, "inputs": inputs}


def test_a_bank_is_checked_before_any_judge_runs(tmp_path):
    good = [_case(i, "A" if i % 2 else "B", x=i) for i in range(6)]
    assert len(load_bank(_write(tmp_path / "b.jsonl", good), ("A", "B"), 3)) == 6
    with pytest.raises(BankError, match=r"needs at least 4 cases per label; short: \{'A': 3, 'B': 3\}"):
        load_bank(tmp_path / "b.jsonl", ("A", "B"), 4)
    with pytest.raises(BankError, match=r"b\.jsonl:2: label 'A' is not one of the judge's labels \['B'\]"):
        load_bank(tmp_path / "b.jsonl", ("B",), 1)
    with pytest.raises(BankError, match=r":2: id 'c0' is empty or repeated"):
        load_bank(_write(tmp_path / "d.jsonl", [good[0], good[0]]), ("A", "B"), 0)
    with pytest.raises(BankError, match=r":1: a case needs exactly the keys id, source, label, inputs"):
        load_bank(_write(tmp_path / "k.jsonl", [{"id": "x", "label": "A", "inputs": {}}]), ("A",), 0)
    (tmp_path / "j.jsonl").write_text("{not json\n")
    with pytest.raises(BankError, match=r"j\.jsonl:1: not valid JSON"):
        load_bank(tmp_path / "j.jsonl", ("A",), 0)
    with pytest.raises(BankError, match="bank missing"):
        load_bank(tmp_path / "none.jsonl", ("A",), 0)


class ParityJudge:
    """Says A for even x, B for odd x, fails on x == 5."""

    labels = ("A", "B")

    def __init__(self, llm: Any = None, bank: str = "") -> None:
        self.llm, self.bank = llm, bank

    def verdict(self, inputs: dict[str, Any]) -> str:
        return FAILED if inputs["x"] == 5 else "A" if inputs["x"] % 2 == 0 else "B"


def test_per_label_accuracy_and_confusion_count_failures_as_wrong():
    cases = [BankCase(f"c{x}", "-", "A", {"x": x}) for x in range(4)] + [BankCase(f"d{x}", "-", "B", {"x": x}) for x in (1, 3, 5, 6)]
    result = score_bank(ParityJudge(), cases, pass_accuracy=0.6)
    assert result["per_label"]["A"] == {"n": 4, "correct": 2, "accuracy": 0.5}
    assert result["per_label"]["B"] == {"n": 4, "correct": 2, "accuracy": 0.5}
    assert result["confusion"] == {"A": {"A": 2, "B": 2, FAILED: 0}, "B": {"A": 1, "B": 2, FAILED: 1}}
    assert result["failed"] == 1 and result["every_label_reaches_pass_accuracy"] is False
    table = judges_markdown({"parity": {"result": result, "description": "d", "bank": "b", "judge_model_id": "m", "command": "c",
                                        "finished_at": "2026-01-01T00:00"}})  # fmt: skip
    assert "**Not every label reaches 60%** (A 50.0%, B 50.0%)" in table and "| B | 1 | 2 | 1 |" in table
    assert score_bank(ParityJudge(), cases[:2], pass_accuracy=0.5)["every_label_reaches_pass_accuracy"] is False  # a label with no case


def test_the_command_runs_a_bank_judge_it_does_not_know_and_writes_json_and_table(tmp_path):
    """Any conf/judge_bank yaml whose class satisfies BankJudge works: here locomo_qa's file with its class swapped."""
    bank = _write(tmp_path / "bank.jsonl", [_case(x, "A" if x % 2 == 0 else "B", x=x) for x in range(8)])
    out, table = tmp_path / "out", tmp_path / "judges.md"
    args = ["locomo_qa", "judge_bank._target_=tests.unit.eval.test_judge_bank.ParityJudge", "~judge_bank.judge", f"judge_bank.bank={bank}",
            "min_cases_per_label=4", f"out_dir={out}", f"table={table}", "judge.llm={_target_:tests.fakes.FakeLLM,responder:null}"]  # fmt: skip
    assert load_script("judge_banks").main(args) == 0
    record = json.loads((out / "locomo_qa.json").read_text())
    assert record["result"]["per_label"]["B"] == {"n": 4, "correct": 3, "accuracy": 0.75} and record["command"].startswith("python -m scripts.judge_banks locomo_qa")
    assert len(record["result"]["verdicts"]) == 8 and "## locomo_qa" in table.read_text()


def test_a_sample_per_label_is_the_same_on_every_rerun_and_holds_n_of_each_label():
    cases = [BankCase(f"c{x}", "-", "A" if x % 3 else "B", {"x": x}) for x in range(30)]
    first = sample_per_label(cases, ("A", "B"), 4, seed=0)
    assert [c.label for c in first].count("A") == 4 and [c.label for c in first].count("B") == 4
    assert first == sample_per_label(cases, ("A", "B"), 4, seed=0) and first != sample_per_label(cases, ("A", "B"), 4, seed=1)
    assert [c.id for c in first] == sorted((c.id for c in first), key=lambda i: int(i[1:]))  # bank order kept
    assert sample_per_label(cases, ("A", "B"), None, seed=0) == cases and len(sample_per_label(cases, ("A", "B"), 50, seed=0)) == 30


class AskingJudge(ParityJudge):
    """ParityJudge that asks its LLM first, so the test sees which requests a run makes."""

    def verdict(self, inputs: dict[str, Any]) -> str:
        self.llm.chat([{"role": "user", "content": f"x={inputs['x']}"}])
        return super().verdict(inputs)


def test_per_label_runs_a_fixed_sample_asks_the_same_requests_again_and_the_table_names_unmeasured_judges(tmp_path):
    """A rerun asks exactly the requests of the first run, so the response cache (keyed by the whole request) serves
    a stopped run's verdicts; every judge of conf/judge_bank/ without a result file is listed as not measured."""
    bank = _write(tmp_path / "bank.jsonl", [_case(x, "A" if x % 2 == 0 else "B", x=x) for x in range(20)])
    out, table = tmp_path / "out", tmp_path / "judges.md"
    script = load_script("judge_banks")
    asked = []
    for _ in range(2):
        args = ["locomo_qa", "--per-label", "3", "judge_bank._target_=tests.unit.eval.test_judge_bank.AskingJudge", "~judge_bank.judge",
                f"judge_bank.bank={bank}", "min_cases_per_label=4", f"out_dir={out}", f"table={table}", "workers=1",
                "judge.llm={_target_:tests.fakes.FakeLLM,responder:{_target_:tests.unit.eval.test_judge_bank.echo,_partial_:true}}"]  # fmt: skip
        assert script.main(args) == 0
        record = json.loads((out / "locomo_qa.json").read_text())
        asked.append([v["id"] for v in record["result"]["verdicts"]])
    assert asked[0] == asked[1] and len(asked[0]) == 6
    assert record["sample"] == {"per_label": 3, "seed": 0} and record["bank_cases_per_label"] == {"A": 10, "B": 10}
    text = table.read_text()
    assert "A sample of 3 cases per label (seed 0) of the bank's A 10, B 10 judged." in text
    assert "| halumem_accuracy | - | not measured (no results/bench/judge_banks/halumem_accuracy.json) | **no** | none named (conf/judge_bank/<judge>.yaml companion) |" in text
    assert "| halumem_update | - | not measured (no results/bench/judge_banks/halumem_update.json) | **no** | \"Update: new version ranked above" in text
    with pytest.raises(SystemExit, match="--per-label needs a whole number"):
        script.main(["locomo_qa", "--per-label", "all"])


def test_a_stopped_run_keeps_its_verdicts_with_labels_in_turn_and_the_table_marks_it_not_decided(tmp_path):
    cases = [BankCase(f"a{x}", "-", "A", {"x": 2 * x}) for x in range(4)] + [BankCase(f"b{x}", "-", "B", {"x": 2 * x + 1}) for x in range(4)]
    ordered = in_turn(cases, ("A", "B"))
    assert [c.id for c in ordered[:4]] == ["a0", "b0", "a1", "b1"]
    seen: list[dict[str, Any]] = []
    score_bank(ParityJudge(), ordered, pass_accuracy=0.5, progress=seen.append)
    assert [r["n"] for r in seen] == list(range(1, 9)) and seen[1]["per_label"]["B"] == {"n": 1, "correct": 1, "accuracy": 1.0}
    record = {"result": seen[1], "description": "d", "bank": "b", "judge_model_id": "m", "command": "c", "finished_at": "2026-01-01T00:00",
              "complete": False, "cases_planned": 8, "sample": None}  # fmt: skip
    table = judges_markdown({"parity": record})
    assert "| parity | A (1), B (1) | A 100.0%, B 100.0% | not decided: stopped after 2 of 8 cases | none named (conf/judge_bank/<judge>.yaml companion) |" in table
    assert "**the run stopped after 2 of its 8 cases**" in table and "may score published runs" not in table


def echo(messages: list[dict[str, str]], schema: Any) -> str:
    return messages[-1]["content"]


def test_locomo_qa_bank_judge_asks_the_run_judge(tmp_path):
    bank = _write(tmp_path / "bank.jsonl", [_case(i, "CORRECT" if i % 2 else "WRONG", question="q", gold="g", prediction=f"p{i % 2}") for i in range(4)])
    out = tmp_path / "out"
    args = ["locomo_qa", f"judge_bank.bank={bank}", "min_cases_per_label=2", f"out_dir={out}", f"table={tmp_path / 'j.md'}",
            "judge.llm={_target_:tests.unit.eval.test_judge_bank.half_sure_llm}"]  # fmt: skip
    assert load_script("judge_banks").main(args) == 0
    record = json.loads((out / "locomo_qa.json").read_text())
    assert record["settings"]["judge_class"] == "CalibratedJudge" and record["result"]["per_label"]["CORRECT"]["accuracy"] == 1.0
    assert record["result"]["per_label"]["WRONG"]["accuracy"] == 1.0


def half_sure_llm() -> LogprobFakeLLM:
    """p(yes) 0.99 for an answer starting p1, 0.01 otherwise (either side of any threshold in conf)."""
    return LogprobFakeLLM(lambda text: 0.99 if text.split("Answer: ")[1].startswith("p1") else 0.01)


def test_conflict_bank_judge_uses_mosaics_detector_and_threshold(tmp_path):
    from tests.hydra_config import CONF  # noqa: F401  (conf/ is the repository's)

    script = load_script("judge_banks")
    cfg = script.compose_config("conflict_contradiction", [])
    from hydra.utils import instantiate

    llm = FakeLLM(lambda m, s: "false" if "NEW: clash" in m[-1]["content"] else "unknown")
    judge = instantiate(cfg.judge_bank, llm=llm)
    assert judge.verdict({"facts": ["a"], "new": "clash"}) == "contradiction"
    assert judge.verdict({"facts": ["a"], "new": "fine"}) == "no_contradiction"
    assert judge.settings == {"mode": "nli", "threshold": 0.35, "top_logprobs": 10}
    assert {r["purpose"] for r in llm.requests} == {"conflict"} and {r["max_tokens"] for r in llm.requests} == {1}


@pytest.mark.parametrize(("judge", "labels"), [("locomo_qa", ("CORRECT", "WRONG")), ("conflict_contradiction", ("contradiction", "no_contradiction"))])
def test_committed_banks_are_whole_and_from_development_data(judge, labels):
    cases = load_bank(REPO / "data" / "judge_banks" / f"{judge}.jsonl", labels, 40)
    sources = {c.source for c in cases}
    if judge == "locomo_qa":
        assert all(s.startswith("locomo conv-26 ") for s in sources)
        assert {frozenset(c.inputs) for c in cases} == {frozenset({"question", "gold", "prediction"})}
    else:
        assert all(s == "hand-written" or s.startswith(("conflict suite household_finance ", "conflict suite workplace_policy ")) for s in sources)
        assert all(c.inputs["facts"] and c.inputs["new"] for c in cases)
