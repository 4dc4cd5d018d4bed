"""LoCoMo LLM judge: binary CORRECT/WRONG under a prompt chosen in config (conf/judge/prompt/).

The default prompt is lenient on paraphrase and date format; ``mem0_generous`` is the literature's
prompt and ``strict`` our own (results/judge/ holds each prompt's calibration on the audit bank).

Output that breaks the schema (after the client's retries) is a counted failure with
``label=None``, never a crash; an unreachable server still raises, so the run can resume later.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hydra.utils import instantiate
from omegaconf import OmegaConf

from core.llm import LLMClient, LLMOutputError

log = logging.getLogger(__name__)

JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string", "maxLength": 300},  # bounds tokens so the JSON is never cut off
        "label": {"type": "string", "enum": ["CORRECT", "WRONG"]},
    },
    "required": ["reasoning", "label"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class JudgePrompt:
    """A judge prompt from conf/judge/prompt/<name>.yaml: optional system text and a user template.

    The template's ``{question}``, ``{gold}`` and ``{prediction}`` are filled in; the reply schema
    (one-sentence reasoning, then the label) is the same for every prompt, so only the wording differs.
    """

    name: str
    user: str
    system: str | None = None

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None, where: str = "judge.prompt") -> JudgePrompt:
        """Build from a config node (``cfg.judge.prompt``); a missing or malformed one is a ValueError naming ``where``."""
        if raw is None:
            raise ValueError(f"{where}: no judge prompt chosen; pick one of conf/judge/prompt/ (e.g. `judge/prompt=default`)")
        unknown = set(raw) - {"name", "system", "user"}
        if unknown or not raw.get("name") or not raw.get("user"):
            raise ValueError(f"{where}: needs `name` and `user` (optional `system`), got keys {sorted(raw)}")
        for field in ("{question}", "{gold}", "{prediction}"):
            if field not in raw["user"]:
                raise ValueError(f"{where}.user: the template must contain {field}")
        return cls(name=str(raw["name"]), user=str(raw["user"]), system=None if raw.get("system") is None else str(raw["system"]))


class LLMJudge:
    """One judge prompt for every system in a run; ``purpose='judge'`` in the usage meter."""

    # attempts: a run takes conf/judge `attempts`; the default serves scripts/calibrate_judge.py and rejudge.py
    def __init__(self, llm: LLMClient, prompt: JudgePrompt, max_tokens: int, attempts: int = 2) -> None:
        self.llm = llm
        self.prompt = prompt
        self.max_tokens = max_tokens
        self.attempts = attempts

    def messages(self, question: str, gold: str, prediction: str) -> list[dict[str, str]]:
        user = self.prompt.user.format(question=question, gold=gold, prediction=prediction)
        system = [{"role": "system", "content": self.prompt.system}] if self.prompt.system is not None else []
        return [*system, {"role": "user", "content": user}]

    def judge(self, question: str, gold: str, prediction: str) -> dict[str, Any]:
        """Return ``{label, correct, reasoning, failure}``; label None and failure set on bad output."""
        try:
            out = self.llm.chat_json(
                self.messages(question, gold, prediction),
                JUDGE_SCHEMA,
                max_tokens=self.max_tokens,
                purpose="judge",
                attempts=self.attempts,
            )
        except LLMOutputError as err:
            log.warning("judge output broke the schema after %d attempts: %s", self.attempts, err)
            return {"label": None, "correct": None, "reasoning": "", "failure": f"schema: {err}"[:300]}
        label = out.get("label") if isinstance(out, dict) else None
        if label not in ("CORRECT", "WRONG"):
            return {"label": None, "correct": None, "reasoning": "", "failure": f"bad label: {str(out)[:200]}"}
        return {"label": label, "correct": label == "CORRECT", "reasoning": str(out.get("reasoning", "")), "failure": None}


def build_judge(judge_cfg: Any, llm: LLMClient) -> LLMJudge:
    """The run's judge from its ``judge`` config block (conf/judge/<name>.yaml): the client ``judge.llm``
    names (built with Hydra), or the run's own ``llm`` when it is null (conf/judge/same.yaml); the prompt
    ``judge.prompt`` (conf/judge/prompt/); ``judge.max_tokens`` and ``judge.attempts``.

    The one place a judge is built from config: the runner hands it to every benchmark as ``RunContext.judge``.
    """
    client = instantiate(judge_cfg.llm) if judge_cfg.get("llm") else llm
    return LLMJudge(client, prompt=judge_prompt_of(judge_cfg), max_tokens=int(judge_cfg.max_tokens), attempts=int(judge_cfg.attempts))


def judge_prompt_of(judge_cfg: Any) -> JudgePrompt:
    """``judge.prompt`` of a composed config, checked (the runner's validate() calls this before any run folder)."""
    raw = judge_cfg.get("prompt")
    return JudgePrompt.from_mapping(None if raw is None else OmegaConf.to_container(raw, resolve=True), "judge.prompt")  # type: ignore[arg-type]
