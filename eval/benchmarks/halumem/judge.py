"""HaluMem's four LLM judges (memory integrity, memory accuracy, update, QA), in our own words.

The rubrics follow HaluMem's evaluation toolkit (MemTensor/HaluMem, ``eval/eval_tools.py``):
integrity 0/1/2 per gold point against everything the system stored for the session;
accuracy 0/1/2 plus "is this memory about a field the gold points cover" per stored memory;
update Correct/Hallucination/Omission/Other; QA Correct/Hallucination/Omission. Output is
constrained by a JSON schema; output that still breaks it after the client's retries is a
counted failure (``verdict=None``), never a crash. An unreachable server still raises, so a
run can resume later.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from core.llm import LLMClient, LLMOutputError

log = logging.getLogger(__name__)

UPDATE_LABELS = ("Correct", "Hallucination", "Omission", "Other")
QA_LABELS = ("Correct", "Hallucination", "Omission")


def _schema(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


# A bounded reason first (lets a small judge think, keeps the output short), then the verdict.
_REASON = {"type": "string", "maxLength": 300}

INTEGRITY_SCHEMA = _schema({"reason": _REASON, "score": {"type": "integer", "enum": [0, 1, 2]}})
ACCURACY_SCHEMA = _schema(
    {"reason": _REASON, "accuracy_score": {"type": "integer", "enum": [0, 1, 2]}, "in_gold_fields": {"type": "boolean"}}
)
UPDATE_SCHEMA = _schema({"reason": _REASON, "label": {"type": "string", "enum": list(UPDATE_LABELS)}})
QA_SCHEMA = _schema({"reason": _REASON, "label": {"type": "string", "enum": list(QA_LABELS)}})

INTEGRITY_SYSTEM = """You check whether a memory system kept a fact it should have kept.
You get the list of memories the system stored after a conversation and one expected memory point.
Score how well the stored memories cover the expected point:
2 = one or more stored memories state or clearly imply everything in the expected point (paraphrase is fine);
1 = the point is only partly covered: some element (person, event, time, place, value, preference) is missing, vague ("maybe", "probably") or slightly wrong;
0 = the point is absent, or every key element is wrong.
Unrelated or extra memories do not lower the score. If stored memories disagree with each other, give the best coverage any of them achieves.
Reply with JSON: a one-sentence reason, then the score."""

ACCURACY_SYSTEM = """You check one memory that a memory system stored after a conversation.
You get the dialogue, the gold memory points annotated for it, and the candidate memory.
Break the candidate into atomic facts (name, number, place, time, preference, ...). Use only the dialogue and the gold points, no outside knowledge; watch negation, quantities, times and who a fact is about.
accuracy_score: 2 = every fact is supported by the dialogue or the gold points; 1 = at least one fact is supported but another is unsupported or contradicted; 0 = nothing is supported, or it contradicts the sources (a hallucinated memory).
in_gold_fields: true when every fact in the candidate concerns a field (kind of information, e.g. job, home city, food preference) that some gold point also covers, whatever its value; false when any fact is about a field no gold point covers.
Reply with JSON: a one-sentence reason, then accuracy_score, then in_gold_fields."""

UPDATE_SYSTEM = """You check whether a memory system applied an update correctly.
You get the memories the system returned when asked about the topic, the target memory as it should read after the update, and the original memory it replaces.
Correct = the returned memories contain every piece of information in the target memory, with key details (dates, numbers, names) matching; paraphrase is fine.
Hallucination = a returned memory about this topic states the update with wrong or contradicting details.
Omission = no returned memory reflects the update (only the old version or nothing), or the update is there but misses key information.
Other = the update failed in a way that is neither of the above.
Reply with JSON: a one-sentence reason, then the label."""

QA_SYSTEM = """You grade a memory system's answer to a question about a user.
You get the question, the reference answer, the key memory points behind it, and the system's answer. Use nothing else.
Correct = the answer means the same as the reference answer and contradicts nothing in the key memory points; paraphrase and equivalent formats of numbers and dates are fine. If the reference says the information is unknown and the answer also says it is unknown, that is Correct.
Hallucination = the answer states something that contradicts the reference or the key points, or gives a definite fact where the reference says it is unknown. An answer that both misses and invents information is a Hallucination.
Omission = the answer invents nothing but is incomplete, or says it does not know / has no memory although the key points contain the answer.
Reply with JSON: a one-sentence reason, then the label."""


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

    def __init__(self, llm: LLMClient, max_tokens: int = 200, attempts: int = 2) -> None:
        self.llm = llm
        self.max_tokens = max_tokens
        self.attempts = attempts

    # -- message builders (pure, so tests can read the prompts) ---------------------------
    @staticmethod
    def integrity_messages(stored: list[str], expected_point: str) -> list[dict[str, str]]:
        user = f"Stored memories:\n{_bullets(stored)}\n\nExpected memory point:\n{expected_point}"
        return [{"role": "system", "content": INTEGRITY_SYSTEM}, {"role": "user", "content": user}]

    @staticmethod
    def accuracy_messages(dialogue: str, gold_points: list[str], candidate: str) -> list[dict[str, str]]:
        user = f"Dialogue:\n{dialogue}\n\nGold memory points:\n{_bullets(gold_points)}\n\nCandidate memory:\n{candidate}"
        return [{"role": "system", "content": ACCURACY_SYSTEM}, {"role": "user", "content": user}]

    @staticmethod
    def update_messages(returned: list[str], target: str, original: list[str]) -> list[dict[str, str]]:
        user = (
            f"Memories returned by the system:\n{_bullets(returned)}\n\n"
            f"Target memory after the update:\n{target}\n\nOriginal memory before the update:\n{_bullets(original)}"
        )
        return [{"role": "system", "content": UPDATE_SYSTEM}, {"role": "user", "content": user}]

    @staticmethod
    def qa_messages(question: str, reference: str, key_points: list[str], response: str) -> list[dict[str, str]]:
        user = (
            f"Question: {question}\nReference answer: {reference}\n"
            f"Key memory points:\n{_bullets(key_points)}\nSystem answer: {response}"
        )
        return [{"role": "system", "content": QA_SYSTEM}, {"role": "user", "content": user}]

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

    def integrity(self, stored: list[str], expected_point: str) -> Verdict:
        out = self._ask(self.integrity_messages(stored, expected_point), INTEGRITY_SCHEMA)
        if isinstance(out, str):
            return Verdict(None, failure=out)
        score = _as_score(out.get("score"))
        if score is None:
            return Verdict(None, failure=f"bad score: {str(out)[:200]}")
        return Verdict(score, str(out.get("reason", "")))

    def accuracy(self, dialogue: str, gold_points: list[str], candidate: str) -> Verdict:
        out = self._ask(self.accuracy_messages(dialogue, gold_points, candidate), ACCURACY_SCHEMA)
        if isinstance(out, str):
            return Verdict(None, failure=out)
        score = _as_score(out.get("accuracy_score"))
        included = out.get("in_gold_fields")
        if score is None or not isinstance(included, bool):
            return Verdict(None, failure=f"bad accuracy verdict: {str(out)[:200]}")
        return Verdict(score, str(out.get("reason", "")), extra={"in_gold_fields": included})

    def update(self, returned: list[str], target: str, original: list[str]) -> Verdict:
        return self._label(self.update_messages(returned, target, original), UPDATE_SCHEMA, UPDATE_LABELS)

    def qa(self, question: str, reference: str, key_points: list[str], response: str) -> Verdict:
        return self._label(self.qa_messages(question, reference, key_points, response), QA_SCHEMA, QA_LABELS)

    def _label(self, messages: list[dict[str, str]], schema: dict[str, Any], labels: tuple[str, ...]) -> Verdict:
        out = self._ask(messages, schema)
        if isinstance(out, str):
            return Verdict(None, failure=out)
        label = out.get("label")
        if label not in labels:
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
