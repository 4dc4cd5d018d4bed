"""The answer judges (is a prediction the gold answer?), built from conf/judge/ by the project's one judge builder (``build_judge``).

Two judges share the prompt format (conf/judge/prompt/: a user template over ``{question}``, ``{gold}``,
``{prediction}`` and an optional system text):

* ``LLMJudge`` (the default, what every run before the calibrated judge was scored with): a bounded
  sentence of reasoning, then the label CORRECT/WRONG, as JSON. The default prompt is lenient on
  paraphrase and date format; conf/judge/prompt/ also holds the literature's prompt and a strict one of our own.
* ``CalibratedJudge`` (conf/judge/calibrated.yaml): one generated token, ``yes`` or ``no``; P(correct)
  is read from that token's log-probabilities and compared with a threshold fitted on half of an
  audited bank of judged answers (scripts/calibrate_judge.py). P(correct) is stored with every judgement.

A judge config names its class with ``_target_`` (absent: ``LLMJudge``, as every config before the
calibrated judge); its other keys except ``llm`` and ``prompt`` are that class's settings, checked
against its constructor, so a setting is used or refused, never silently ignored.

Output that breaks the schema (after the client's retries) is a counted failure with ``label=None``,
never a crash; an unreachable server still raises, so the run can resume later.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

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
DEFAULT_TARGET = "eval.judge.LLMJudge"  # a judge config without `_target_` (every config before the calibrated judge)
NOT_SETTINGS = ("_target_", "llm", "prompt")  # judge config keys that are not constructor settings


@dataclass(frozen=True)
class JudgePrompt:
    """A judge prompt from conf/judge/prompt/<name>.yaml: optional system text and a user template.

    The template's ``{question}``, ``{gold}`` and ``{prediction}`` are filled in; the reply format is the
    judge class's (JSON for ``LLMJudge``, one word for ``CalibratedJudge``), so only the wording differs.
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

    def messages(self, question: str, gold: str, prediction: str) -> list[dict[str, str]]:
        user = self.user.format(question=question, gold=gold, prediction=prediction)
        system = [{"role": "system", "content": self.system}] if self.system is not None else []
        return [*system, {"role": "user", "content": user}]


class AnswerJudge(Protocol):
    """What a benchmark that judges free-text answers, rejudge and calibration need of a judge."""

    llm: LLMClient
    prompt: JudgePrompt

    def judge(self, question: str, gold: str, prediction: str) -> dict[str, Any]:
        """``{label: CORRECT|WRONG|None, correct, reasoning, failure, ...}``; label None on a failed judgement."""
        ...


class LLMJudge:
    """Reasoning then label, as JSON; one prompt for every system in a run; ``purpose='judge'`` in the usage meter."""

    def __init__(self, llm: LLMClient, prompt: JudgePrompt, max_tokens: int, attempts: int) -> None:
        self.llm = llm
        self.prompt = prompt
        self.max_tokens = max_tokens
        self.attempts = attempts

    def messages(self, question: str, gold: str, prediction: str) -> list[dict[str, str]]:
        return self.prompt.messages(question, gold, prediction)

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


def word_probability(logprobs: list[dict[str, Any]] | None, text: str, yes: str, no: str) -> float | None:
    """p(yes) / (p(yes) + p(no)) over the first generated token's top alternatives (case and spaces ignored).

    Without log-probabilities the generated word decides (1.0 or 0.0); None when neither word is anywhere."""
    mass = {yes: 0.0, no: 0.0}
    for cand in (logprobs[0].get("top_logprobs") or []) if logprobs else []:
        word = str(cand.get("token", "")).strip().lower()
        if word in mass:
            mass[word] += math.exp(float(cand["logprob"]))
    if mass[yes] + mass[no] > 0:
        return mass[yes] / (mass[yes] + mass[no])
    word = text.strip().lower()
    return 1.0 if word == yes else 0.0 if word == no else None


class CalibratedJudge:
    """One generated token read through its log-probabilities: P(correct) = p(yes) / (p(yes) + p(no)).

    CORRECT when P(correct) >= ``threshold`` (fitted on the fit half of the audited answer bank by
    scripts/calibrate_judge.py and copied into conf/judge/calibrated.yaml). One token instead of a
    sentence of reasoning: the verdict costs prompt reading only. ``top_logprobs`` alternatives are asked
    for; when neither answer word is among them and the token is neither, the judgement failed.
    """

    def __init__(self, llm: LLMClient, prompt: JudgePrompt, threshold: float, top_logprobs: int, yes_word: str, no_word: str) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"judge.threshold={threshold}: must be a probability in [0, 1]")
        self.llm = llm
        self.prompt = prompt
        self.threshold = float(threshold)
        self.top_logprobs = int(top_logprobs)
        self.yes_word, self.no_word = yes_word.strip().lower(), no_word.strip().lower()

    def messages(self, question: str, gold: str, prediction: str) -> list[dict[str, str]]:
        return self.prompt.messages(question, gold, prediction)

    def p_correct(self, question: str, gold: str, prediction: str) -> tuple[float | None, str]:
        """(P(correct) or None, the generated token): one LLM call, one token."""
        result = self.llm.chat(self.messages(question, gold, prediction), max_tokens=1, top_logprobs=self.top_logprobs, purpose="judge")
        return word_probability(result.logprobs, result.text, self.yes_word, self.no_word), result.text

    def judge(self, question: str, gold: str, prediction: str) -> dict[str, Any]:
        """``{label, correct, reasoning: '', failure, p_correct, threshold}``."""
        p, token = self.p_correct(question, gold, prediction)
        if p is None:
            return {"label": None, "correct": None, "reasoning": "", "failure": f"no {self.yes_word}/{self.no_word} token: {token[:50]!r}",
                    "p_correct": None, "threshold": self.threshold}  # fmt: skip
        correct = p >= self.threshold
        return {"label": "CORRECT" if correct else "WRONG", "correct": correct, "reasoning": "", "failure": None,
                "p_correct": round(p, 6), "threshold": self.threshold}  # fmt: skip


def judge_class(judge_cfg: Any) -> type:
    """The class a judge config builds: its ``_target_``, or ``LLMJudge`` when it names none."""
    return get_class(str(judge_cfg.get("_target_") or DEFAULT_TARGET))


def judge_settings(judge_cfg: Any, where: str = "judge") -> dict[str, Any]:
    """The judge class's constructor settings from its config block, every one checked: a key the class does
    not take, or a setting it needs that the block lacks, is a ValueError naming the key and the file to fix."""
    cls = judge_class(judge_cfg)
    params = inspect.signature(cls.__init__).parameters
    takes = [name for name in params if name not in ("self", "llm", "prompt")]
    given = {key: judge_cfg[key] for key in judge_cfg if key not in NOT_SETTINGS}
    for key in given:
        if key not in takes:
            raise ValueError(f"{where}.{key}: not a setting of {cls.__name__} (it takes {', '.join(takes)}); remove it from conf/judge/<name>.yaml")
    for key in takes:
        if key not in given and params[key].default is inspect.Parameter.empty:
            raise ValueError(f"{where}.{key}: missing from the judge config; set it in conf/judge/<name>.yaml (see conf/judge/same.yaml)")
    return {key: OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig) else value for key, value in given.items()}


def build_judge(judge_cfg: Any, llm: LLMClient | DictConfig, where: str = "judge") -> AnswerJudge:
    """The judge from a ``judge`` config block (conf/judge/<name>.yaml): its class (``_target_``), the client
    ``judge.llm`` names (built with Hydra), or else ``llm`` (a client, or the config of one, built only when
    needed: conf/judge/same.yaml), the prompt ``judge.prompt`` (conf/judge/prompt/) and its settings.

    The one place a judge is built from config: the runner (``RunContext.judge``), scripts/rejudge.py,
    scripts/calibrate_judge.py and scripts/judge_banks.py all call it.
    """
    settings = judge_settings(judge_cfg, where)
    prompt = judge_prompt_of(judge_cfg, where)
    return judge_class(judge_cfg)(judge_client(judge_cfg, llm), prompt=prompt, **settings)


def judge_client(judge_cfg: Any, llm: LLMClient | DictConfig) -> LLMClient:
    """The judge's model: ``judge.llm`` when set, else the run's ``llm`` (built from its config if given one)."""
    if judge_cfg.get("llm"):
        return instantiate(judge_cfg.llm)
    return instantiate(llm) if isinstance(llm, DictConfig) else llm


def judge_prompt_of(judge_cfg: Any, where: str = "judge") -> JudgePrompt:
    """``judge.prompt`` of a composed config, checked (the runner's validate() calls this before any run folder)."""
    raw = judge_cfg.get("prompt")
    return JudgePrompt.from_mapping(None if raw is None else OmegaConf.to_container(raw, resolve=True), f"{where}.prompt")  # type: ignore[arg-type]


def calls_judge(benchmark_cfg: Any) -> bool:
    """Whether a benchmark asks the judge (its class's ``calls_judge``, True unless it says otherwise): a run whose
    benchmark never does keeps conf/judge out of its config hash (eval.runner.semantic_config)."""
    target = benchmark_cfg.get("_target_") if benchmark_cfg is not None else None
    return bool(getattr(get_class(str(target)), "calls_judge", True)) if target else True
