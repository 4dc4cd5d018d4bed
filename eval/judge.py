"""LoCoMo LLM judge: binary CORRECT/WRONG, lenient on paraphrase and date format.

Output that breaks the schema (after the client's retries) is a counted failure with
``label=None``, never a crash; an unreachable server still raises, so the run can resume later.
"""

from __future__ import annotations

import logging
from typing import Any

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

JUDGE_SYSTEM = (
    "You grade answers to questions about a conversation. You get a question, a gold answer "
    "and a generated answer. Label the generated answer CORRECT when it refers to the same "
    "thing as the gold answer, even if it is worded differently, longer, or less specific "
    "but still compatible. For dates and times, accept any format or relative phrasing that "
    "points to the same date or period (e.g. '7 May 2023', 'May 7th, 2023', 'the day before "
    "8 May 2023'). Label it WRONG when it contradicts the gold answer, names something else, "
    "or says the information is not available. Reply with JSON: a one-sentence reasoning, "
    "then the label."
)


class LLMJudge:
    """One judge prompt for every system; ``purpose='judge'`` in the usage meter."""

    def __init__(self, llm: LLMClient, max_tokens: int = 160, attempts: int = 2) -> None:
        self.llm = llm
        self.max_tokens = max_tokens
        self.attempts = attempts

    @staticmethod
    def messages(question: str, gold: str, prediction: str) -> list[dict[str, str]]:
        user = f"Question: {question}\nGold answer: {gold}\nGenerated answer: {prediction}"
        return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]

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
