"""LoCoMo's QA judge as a bank judge (eval.judge_bank.BankJudge): is a generated answer CORRECT or WRONG?"""

from __future__ import annotations

from typing import Any

from core.llm import LLMClient
from eval.judge import build_judge
from eval.judge_bank import FAILED


class LoCoMoQABankJudge:
    """The LoCoMo judge that conf/judge/<name>.yaml builds (the calibrated one by default), asked through the same
    ``judge()`` that scores every LoCoMo run (eval.benchmarks.locomo.stages.judgement_row); inputs: question, gold, prediction."""

    labels = ("CORRECT", "WRONG")

    def __init__(self, llm: LLMClient, bank: str, judge: Any) -> None:
        self.bank = bank
        self.judge = build_judge(judge, llm, where="judge_bank.judge")  # the one judge builder, the bank's client
        self.settings = {"judge_class": type(self.judge).__name__, "prompt": self.judge.prompt.name,
                         **({"threshold": self.judge.threshold} if hasattr(self.judge, "threshold") else {})}  # fmt: skip

    def verdict(self, inputs: dict[str, Any]) -> str:
        label = self.judge.judge(str(inputs["question"]), str(inputs["gold"]), str(inputs["prediction"]))["label"]
        return FAILED if label is None else str(label)
