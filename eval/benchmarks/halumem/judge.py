"""HaluMem's LLM judges (memory integrity, memory accuracy, update, QA), one question per call.

The rubrics follow HaluMem's evaluation toolkit (MemTensor/HaluMem, ``eval/eval_tools.py``); the prompt texts
live in conf/halumem_judge/ (the benchmark's ``judge_prompts``). Two official prompts ask two things at once and
are split here so a small judge model answers one question per call (docs/halumem.md, deviation table):

* accuracy: the 0/1/2 support score, and separately whether every field of the memory is a gold field;
* update: does a returned memory state the new version (complete / partial / wrong / missing), and, when it
  does, is the original still presented as current. HaluMem's Correct needs both the new version and the
  original "effectively replaced or marked as outdated"; a complete update whose original is still current is
  ``Other`` (neither hallucinated nor omitted).

The update judge has two structures (``update_structure`` in the prompts file): ``verdict`` (above: a reason, then
a four-way verdict) and ``questions``: yes/no answers with no reason, each one question a small model can answer:
is the new version there (``update_new``)? if so, is the original still stated as current (``update_old_current``:
yes -> Other, no -> Correct)? if not, does a memory give the fact another value (``update_other_value``: yes ->
Hallucination, no -> Omission)?

Output is constrained by a JSON schema; output that still breaks it after the client's retries is a counted
failure (``verdict=None``, excluded from the "(valid)" ratios), never a crash. An unreachable server still
raises, so a run can resume later.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from omegaconf import OmegaConf

from core.llm import LLMClient, LLMOutputError

log = logging.getLogger(__name__)

INTEGRITY_LABELS = (2, 1, 0)
ACCURACY_LABELS = (2, 1, 0)
UPDATE_LABELS = ("Correct", "Hallucination", "Omission", "Other")
QA_LABELS = ("Correct", "Hallucination", "Omission")
UPDATE_CONTENT_VERDICTS = ("complete", "partial", "wrong", "missing")
PROMPT_NAMES = ("integrity", "accuracy", "gold_fields", "update_content", "update_original", "qa")
UPDATE_STRUCTURES = ("verdict", "questions")
UPDATE_QUESTION_PROMPTS = ("update_new", "update_old_current", "update_other_value")  # the ``questions`` structure's
# the prompts a run uses unless its config names others (conf/benchmark/halumem.yaml composes the same file)
DEFAULT_PROMPTS_FILE = Path(__file__).resolve().parents[3] / "conf" / "halumem_judge" / "default.yaml"


def _schema(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


# A bounded reason first (lets a small judge think, keeps the output short), then the one answer.
_REASON = {"type": "string", "maxLength": 300}

INTEGRITY_SCHEMA = _schema({"reason": _REASON, "score": {"type": "integer", "enum": [0, 1, 2]}})
ACCURACY_SCHEMA = _schema({"reason": _REASON, "score": {"type": "integer", "enum": [0, 1, 2]}})
GOLD_FIELDS_SCHEMA = _schema({"reason": _REASON, "in_gold_fields": {"type": "boolean"}})
UPDATE_CONTENT_SCHEMA = _schema({"reason": _REASON, "verdict": {"type": "string", "enum": list(UPDATE_CONTENT_VERDICTS)}})
UPDATE_ORIGINAL_SCHEMA = _schema({"reason": _REASON, "original_current": {"type": "boolean"}})
QA_SCHEMA = _schema({"reason": _REASON, "label": {"type": "string", "enum": list(QA_LABELS)}})
YES_NO_SCHEMA = _schema({"answer": {"type": "string", "enum": ["yes", "no"]}})  # no reason: a few output tokens

# update_content verdict -> HaluMem label (``complete`` waits for the second question)
_CONTENT_TO_LABEL = {"partial": "Omission", "missing": "Omission", "wrong": "Hallucination"}


@dataclass(frozen=True)
class JudgePrompt:
    """One judge's system text and user template (Python format string)."""

    system: str
    user: str

    def messages(self, **fields: str) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user.format(**fields)}]


def _prompts_mapping(raw: Mapping[str, Any] | None, where: str) -> tuple[Mapping[str, Any], str]:
    if raw is None:
        return OmegaConf.to_container(OmegaConf.load(DEFAULT_PROMPTS_FILE), resolve=True), str(DEFAULT_PROMPTS_FILE)  # type: ignore[return-value]
    if not isinstance(raw, Mapping):
        raw = OmegaConf.to_container(raw, resolve=True)  # type: ignore[arg-type]
    return raw or {}, where


def update_structure(raw: Mapping[str, Any] | None = None, where: str = "benchmark.judge_prompts") -> str:
    """The update judge's structure named by the prompts file (``verdict`` when it names none)."""
    raw, where = _prompts_mapping(raw, where)
    structure = raw.get("update_structure", "verdict")
    if structure not in UPDATE_STRUCTURES:
        raise ValueError(f"{where}.update_structure: {structure!r} is not one of {list(UPDATE_STRUCTURES)}")
    return structure


def load_prompts(raw: Mapping[str, Any] | None = None, where: str = "benchmark.judge_prompts") -> dict[str, JudgePrompt]:
    """The six prompts from a config mapping (``raw``), or from conf/halumem_judge/default.yaml when None, plus the
    three of the ``questions`` update structure when it is chosen.
    A missing prompt or field is a ValueError naming ``where`` and the key."""
    structure = update_structure(raw, where)
    raw, where = _prompts_mapping(raw, where)
    out = {}
    for name in PROMPT_NAMES + (UPDATE_QUESTION_PROMPTS if structure == "questions" else ()):
        entry = (raw or {}).get(name)
        if not isinstance(entry, Mapping) or not isinstance(entry.get("system"), str) or not isinstance(entry.get("user"), str):
            raise ValueError(f"{where}.{name}: needs a 'system' and a 'user' string (see conf/halumem_judge/default.yaml)")
        out[name] = JudgePrompt(system=entry["system"], user=entry["user"])
    return out


def _bullets(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items) if items else "(none)"


@dataclass
class Verdict:
    """One judge decision; ``value`` is None (and ``failure`` set) when the output was unusable."""

    value: Any
    reason: str = ""
    failure: str | None = None
    extra: dict[str, Any] | None = None


class HaluMemJudge:
    """HaluMem's judges on any ``LLMClient``; every call is metered as ``purpose='judge'``."""

    def __init__(self, llm: LLMClient, prompts: Mapping[str, Any] | None = None, max_tokens: int = 200, attempts: int = 2) -> None:
        self.llm = llm
        self.prompts = load_prompts(prompts)
        self.update_structure = update_structure(prompts)
        self.max_tokens = max_tokens
        self.attempts = attempts

    # -- message builders (pure, so tests and bank cases can read the prompts) ------------
    def integrity_messages(self, stored: list[str], expected_point: str) -> list[dict[str, str]]:
        return self.prompts["integrity"].messages(stored=_bullets(stored), expected_point=expected_point)

    def accuracy_messages(self, dialogue: str, gold_points: list[str], candidate: str) -> list[dict[str, str]]:
        return self.prompts["accuracy"].messages(dialogue=dialogue, gold_points=_bullets(gold_points), candidate=candidate)

    def gold_fields_messages(self, gold_points: list[str], candidate: str) -> list[dict[str, str]]:
        return self.prompts["gold_fields"].messages(gold_points=_bullets(gold_points), candidate=candidate)

    def update_content_messages(self, returned: list[str], target: str, original: list[str]) -> list[dict[str, str]]:
        return self.prompts["update_content"].messages(returned=_bullets(returned), target=target, original=_bullets(original))

    def update_original_messages(self, returned: list[str], target: str, original: list[str]) -> list[dict[str, str]]:
        return self.prompts["update_original"].messages(returned=_bullets(returned), target=target, original=_bullets(original))

    def update_question_messages(self, name: str, returned: list[str], target: str, original: list[str]) -> list[dict[str, str]]:
        return self.prompts[name].messages(returned=_bullets(returned), target=target, original=_bullets(original))

    def qa_messages(self, question: str, reference: str, key_points: list[str], response: str) -> list[dict[str, str]]:
        return self.prompts["qa"].messages(question=question, reference=reference, key_points=_bullets(key_points), response=response)

    # -- calls ----------------------------------------------------------------------------
    def _ask(self, messages: list[dict[str, str]], schema: dict[str, Any]) -> dict[str, Any] | str:
        """The parsed JSON object, or a failure description."""
        try:
            out = self.llm.chat_json(messages, schema, max_tokens=self.max_tokens, purpose="judge", attempts=self.attempts)
        except LLMOutputError as err:
            log.warning("HaluMem judge output broke the schema after %d attempts: %s", self.attempts, err)
            return f"schema: {err}"[:300]
        if not isinstance(out, dict):
            return f"not an object: {str(out)[:200]}"
        return out

    def _score(self, messages: list[dict[str, str]], schema: dict[str, Any]) -> Verdict:
        out = self._ask(messages, schema)
        if isinstance(out, str):
            return Verdict(None, failure=out)
        score = _as_score(out.get("score"))
        if score is None:
            return Verdict(None, failure=f"bad score: {str(out)[:200]}")
        return Verdict(score, str(out.get("reason", "")))

    def _flag(self, messages: list[dict[str, str]], schema: dict[str, Any], key: str) -> Verdict:
        out = self._ask(messages, schema)
        if isinstance(out, str):
            return Verdict(None, failure=out)
        value = out.get(key)
        if not isinstance(value, bool):
            return Verdict(None, failure=f"bad {key}: {str(out)[:200]}")
        return Verdict(value, str(out.get("reason", "")))

    def integrity(self, stored: list[str], expected_point: str) -> Verdict:
        return self._score(self.integrity_messages(stored, expected_point), INTEGRITY_SCHEMA)

    def accuracy(self, dialogue: str, gold_points: list[str], candidate: str) -> Verdict:
        """The support score alone (HaluMem's accuracy_score)."""
        return self._score(self.accuracy_messages(dialogue, gold_points, candidate), ACCURACY_SCHEMA)

    def gold_fields(self, gold_points: list[str], candidate: str) -> Verdict:
        """Whether every field of the candidate is a gold field (HaluMem's is_included_in_golden_memories)."""
        return self._flag(self.gold_fields_messages(gold_points, candidate), GOLD_FIELDS_SCHEMA, "in_gold_fields")

    def _yes(self, name: str, returned: list[str], target: str, original: list[str]) -> Verdict:
        out = self._ask(self.update_question_messages(name, returned, target, original), YES_NO_SCHEMA)
        if isinstance(out, str):
            return Verdict(None, failure=out)
        answer = out.get("answer")
        if answer not in ("yes", "no"):
            return Verdict(None, failure=f"bad {name} answer: {str(out)[:200]}")
        return Verdict(answer == "yes")

    def _update_by_questions(self, returned: list[str], target: str, original: list[str]) -> Verdict:
        new = self._yes("update_new", returned, target, original)
        if new.value is None:
            return new
        second = "update_old_current" if new.value else "update_other_value"
        then = self._yes(second, returned, target, original)
        extra = {"update_new": new.value, second: then.value}
        if then.value is None:
            return Verdict(None, failure=then.failure, extra=extra)
        label = ("Other" if then.value else "Correct") if new.value else ("Hallucination" if then.value else "Omission")
        return Verdict(label, extra=extra)

    def update(self, returned: list[str], target: str, original: list[str]) -> Verdict:
        """Correct / Hallucination / Omission / Other from one or two questions (module docstring)."""
        if self.update_structure == "questions":
            return self._update_by_questions(returned, target, original)
        out = self._ask(self.update_content_messages(returned, target, original), UPDATE_CONTENT_SCHEMA)
        if isinstance(out, str):
            return Verdict(None, failure=out)
        content = out.get("verdict")
        if content not in UPDATE_CONTENT_VERDICTS:
            return Verdict(None, failure=f"bad update verdict: {str(out)[:200]}")
        reason = str(out.get("reason", ""))
        if content != "complete":
            return Verdict(_CONTENT_TO_LABEL[content], reason, extra={"content": content})
        still = self._flag(self.update_original_messages(returned, target, original), UPDATE_ORIGINAL_SCHEMA, "original_current")
        if still.value is None:
            return Verdict(None, reason, failure=still.failure, extra={"content": content})
        label = "Other" if still.value else "Correct"
        return Verdict(label, f"{reason} | {still.reason}", extra={"content": content, "original_current": still.value})

    def qa(self, question: str, reference: str, key_points: list[str], response: str) -> Verdict:
        out = self._ask(self.qa_messages(question, reference, key_points, response), QA_SCHEMA)
        if isinstance(out, str):
            return Verdict(None, failure=out)
        label = out.get("label")
        if label not in QA_LABELS:
            return Verdict(None, failure=f"bad label: {str(out)[:200]}")
        return Verdict(label, str(out.get("reason", "")))


def _as_score(value: Any) -> int | None:
    """0/1/2 from an int or a numeric string (HaluMem's own prompts ask for strings)."""
    if isinstance(value, bool):
        return None
    try:
        score = int(value)
    except (TypeError, ValueError):
        return None
    return score if score in (0, 1, 2) else None
