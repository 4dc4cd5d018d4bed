"""MOSAIC's save-time contradiction judgement (mosaic.conflict, step 3) as a bank judge (eval.judge_bank.BankJudge)."""

from __future__ import annotations

from typing import Any

from hydra.utils import instantiate
from omegaconf import OmegaConf

from core.llm import LLMClient


class ConflictContradictionBankJudge:
    """Does a NEW statement contradict held facts? The detector is built from MOSAIC's own ``conflict`` block
    (conf/system/mosaic.yaml: mode, threshold, top_logprobs), and each verdict is its ``judge_texts`` (the one LLM
    call of the save-time check) against its ``threshold``; inputs: facts (the held texts shown), new.

    Only the LLM judgement is measured: the numeric rule and candidate selection that precede it in a write are not."""

    labels = ("contradiction", "no_contradiction")

    def __init__(self, llm: LLMClient, bank: str, system: Any) -> None:
        self.bank = bank
        self.detector = instantiate(system.conflict)(llm=llm)  # a partial (the memory adds its LLM)
        conflict = OmegaConf.to_container(system.conflict, resolve=True)
        assert isinstance(conflict, dict)
        self.settings = {key: conflict[key] for key in ("mode", "threshold", "top_logprobs")}

    def verdict(self, inputs: dict[str, Any]) -> str:
        score, *_ = self.detector.judge_texts([str(f) for f in inputs["facts"]], str(inputs["new"]))
        return "contradiction" if score >= self.detector.threshold else "no_contradiction"
