"""The shared answerer: one prompt, LLM and context budget for every system.

Systems differ only in what ``search`` returns. Memories are listed in the order the system
gave them, each with its date; when they exceed the budget (tokens approximated as
characters / ``chars_per_token``), the lowest-scored items are dropped first, so a ranked
list loses its tail and a recency-scored history loses its oldest turns.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Annotated, Any

from pydantic import Field

from core.config_check import Count, Positive
from core.llm import LLMClient, LLMOutputError
from core.api import Retrieved

ANSWER_SYSTEM = (
    "You answer questions about a long conversation between two people, using only the "
    "memories given. Each memory starts with the date it was said. Resolve relative times "
    "('yesterday', 'last year') against that date and answer with the absolute date. "
    "Answer with a short phrase of at most 10 words, no explanation. If the memories do not "
    "contain the answer, reply exactly: Not mentioned in the conversation."
)


def display_time(timestamp: str | None) -> str:
    """ISO date-time -> '8 May 2023, 13:56'; anything else is shown as given."""
    if not timestamp:
        return "unknown date"
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        return timestamp
    return f"{moment.day} {moment:%B %Y, %H:%M}"


class Answerer:
    """Turns (question, retrieved memories) into a short answer; ``purpose='answer'``."""

    def __init__(
        self,
        llm: LLMClient,
        max_context_tokens: Count = 2000,
        max_answer_tokens: Count = 64,
        chars_per_token: Positive = 4.0,
        temperature: Annotated[float, Field(ge=0, le=2)] = 0.0,
    ) -> None:
        self.llm = llm
        self.max_context_tokens = max_context_tokens
        self.max_answer_tokens = max_answer_tokens
        self.chars_per_token = chars_per_token
        self.temperature = temperature

    def approx_tokens(self, text: str) -> int:
        return int(len(text) / self.chars_per_token) + 1

    def memory_lines(self, retrieved: list[Retrieved]) -> list[str]:
        """One line per memory, lowest-scored dropped until the budget holds; order kept."""
        lines = [f"[{display_time(item.timestamp)}] {item.text.strip()}" for item in retrieved]
        costs = [self.approx_tokens(line) for line in lines]
        keep = set(range(len(lines)))
        by_score = sorted(range(len(lines)), key=lambda i: (retrieved[i].score, -i))
        for index in by_score:
            if sum(costs[i] for i in keep) <= self.max_context_tokens:
                break
            keep.discard(index)
        if not keep and lines:  # even the best item alone is too long: keep its head
            best = by_score[-1]
            return [lines[best][: int(self.max_context_tokens * self.chars_per_token)]]
        return [lines[i] for i in sorted(keep)]

    def messages(self, question: str, retrieved: list[Retrieved], question_time: str | None) -> list[dict[str, str]]:
        memories = "\n".join(self.memory_lines(retrieved)) or "(no memories)"
        asked = f"\nThe question is asked on {display_time(question_time)}." if question_time else ""
        user = f"Memories:\n{memories}\n{asked}\nQuestion: {question}\nAnswer:"
        return [{"role": "system", "content": ANSWER_SYSTEM}, {"role": "user", "content": user}]

    def answer(self, question: str, retrieved: list[Retrieved], question_time: str | None = None) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            result = self.llm.chat(
                self.messages(question, retrieved, question_time),
                max_tokens=self.max_answer_tokens,
                temperature=self.temperature,
                purpose="answer",
            )
        except LLMOutputError as err:  # empty output after the client's retries: an empty answer, not a crash
            return {"text": "", "prompt_tokens": 0, "completion_tokens": 0, "latency_s": 0.0,
                    "wall_s": time.perf_counter() - started, "cached": False, "failure": str(err)[:300]}
        return {
            "text": result.text.strip(),
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "latency_s": result.latency_s,
            "wall_s": time.perf_counter() - started,
            "cached": result.cached,
        }
