"""HaluMem's judges on their labelled banks (data/judge_banks/halumem_*.jsonl; conf/judge_bank/halumem_*.yaml).

Each class satisfies the judge-bank Protocol (``labels``; ``verdict(inputs) -> label or "failed"``) and calls the
very ``HaluMemJudge`` method the benchmark scores runs with (eval/benchmarks/halumem/judge.py), prompts from the
same conf/halumem_judge/ file.

HaluMem's data is CC BY-NC-ND 4.0 and never committed, not even altered: a bank case built from the development
user (HaluMem-Medium user 0) stores a recipe, resolved here at load time from the local file the bank's config
names; hand-written cases store their text. A recipe is a one-key mapping (anything else is literal):

* ``{"point": [s, i]}``: the text of gold memory point ``i`` (its ``index``) of session ``s``;
* ``{"originals": [s, i]}``: that update point's original memories (a list);
* ``{"question": [s, q, field]}``: field ``question``, ``answer`` or ``evidence`` of question ``q`` of session ``s``;
* ``{"dialogue": [s, max_chars]}``: session ``s``'s dialogue as the benchmark formats it, cut to its first
  ``max_chars`` characters at a line end (a shorter dialogue keeps a bank case cheap to ask);
* ``{"first_words": [x, share]}``: the first ``share`` of the words of ``x`` (at least four), a partial statement;
* ``{"also": [x, y]}``: ``"<x> Also, <y>"``, two statements in one memory;
* ``{"outdated": x}``: ``"(outdated) <x>"`` (each of them, for a list), a memory a system marked as replaced;
* a list: each element resolved, lists spliced in.

The file is checked by the user's uuid (``dev_uuid``), so a bank can never resolve against another user's data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Mapping

from core.llm import LLMClient
from eval.benchmarks.halumem.benchmark import dialogue_text
from eval.benchmarks.halumem.data import HaluMemUser, load_halumem_jsonl
from eval.benchmarks.halumem.judge import QA_LABELS, UPDATE_LABELS, HaluMemJudge

FAILED = "failed"


@dataclass
class DevUserRecipes:
    """Resolves bank recipes against the development user's local file (module docstring)."""

    path: str
    uuid: str

    @cached_property
    def user(self) -> HaluMemUser:
        users = [u for u in load_halumem_jsonl(self.path) if u.uuid == self.uuid]
        if not users:
            raise ValueError(f"{self.path}: no user {self.uuid}; bank recipes resolve against the development user only "
                             f"(halumem_file in conf/judge_bank/halumem_*.yaml; docs/halumem.md, 'Judge banks')")  # fmt: skip
        return users[0]

    def _point(self, s: int, i: int) -> Any:
        return next(p for p in self.user.sessions[s].memory_points if p.index == i)

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            out: list[Any] = []
            for item in value:
                got = self.resolve(item)
                out.extend(got) if isinstance(got, list) else out.append(got)
            return out
        if not (isinstance(value, Mapping) and len(value) == 1):
            return value
        (op, arg), = value.items()
        if op == "point":
            return self._point(*arg).content
        if op == "originals":
            return list(self._point(*arg).original_memories)
        if op == "question":
            s, q, field = arg
            got = getattr(self.user.sessions[s].questions[q], field)
            return list(got) if isinstance(got, tuple) else got
        if op == "dialogue":
            s, max_chars = arg
            text = dialogue_text(self.user.sessions[s])
            return text if len(text) <= max_chars else text[: text.rfind("\n", 0, max_chars) if "\n" in text[:max_chars] else max_chars]
        if op == "first_words":
            x, share = arg
            words = str(self.resolve(x)).rstrip(".").split()
            return " ".join(words[: max(4, math.ceil(len(words) * share))]) + "."
        if op == "also":
            x, y = (self.resolve(v) for v in arg)
            return f"{x} Also, {y}"
        if op == "outdated":
            got = self.resolve(arg)
            return [f"(outdated) {x}" for x in got] if isinstance(got, list) else f"(outdated) {got}"
        return value  # a one-key mapping that is no recipe: literal


class HaluMemBankJudge:
    """Shared part: the benchmark's judge on the bank's client, and the recipe resolver."""

    labels: tuple[str, ...] = ()

    def __init__(self, llm: LLMClient, bank: str, halumem_file: str, dev_uuid: str, prompts: Mapping[str, Any] | None = None,
                 max_tokens: int = 200, attempts: int = 2, companion: str | None = None) -> None:
        self.bank = bank
        self.companion = companion  # the LLM-free metric to read where this judge fails (named in judges.md)
        self.judge = HaluMemJudge(llm, prompts, max_tokens=max_tokens, attempts=attempts)
        self.recipes = DevUserRecipes(halumem_file, dev_uuid)

    def resolved(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        return {name: self.recipes.resolve(value) for name, value in inputs.items()}

    def verdict(self, inputs: dict[str, Any]) -> str:
        value = self._ask(self.resolved(inputs)).value
        return FAILED if value is None else str(value).lower() if isinstance(value, bool) else str(value)

    def _ask(self, inputs: dict[str, Any]) -> Any:
        raise NotImplementedError


class IntegrityBankJudge(HaluMemBankJudge):
    """inputs: ``stored`` (list), ``expected_point``; labels the 0/1/2 coverage score."""

    labels = ("2", "1", "0")

    def _ask(self, inputs: dict[str, Any]) -> Any:
        return self.judge.integrity(inputs["stored"], inputs["expected_point"])


class AccuracyBankJudge(HaluMemBankJudge):
    """inputs: ``dialogue``, ``gold_points`` (list), ``candidate``; labels the 0/1/2 support score."""

    labels = ("2", "1", "0")

    def _ask(self, inputs: dict[str, Any]) -> Any:
        return self.judge.accuracy(inputs["dialogue"], inputs["gold_points"], inputs["candidate"])


class GoldFieldsBankJudge(HaluMemBankJudge):
    """inputs: ``gold_points`` (list), ``candidate``; labels whether every field of the candidate is a gold field."""

    labels = ("true", "false")

    def _ask(self, inputs: dict[str, Any]) -> Any:
        return self.judge.gold_fields(inputs["gold_points"], inputs["candidate"])


class UpdateBankJudge(HaluMemBankJudge):
    """inputs: ``returned`` (list), ``target``, ``original`` (list); HaluMem's four update labels."""

    labels = UPDATE_LABELS

    @property
    def settings(self) -> dict[str, Any]:
        return {"update_structure": self.judge.update_structure}

    def _ask(self, inputs: dict[str, Any]) -> Any:
        return self.judge.update(inputs["returned"], inputs["target"], inputs["original"])


class QABankJudge(HaluMemBankJudge):
    """inputs: ``question``, ``reference``, ``key_points`` (list), ``response``; HaluMem's three QA labels."""

    labels = QA_LABELS

    def _ask(self, inputs: dict[str, Any]) -> Any:
        return self.judge.qa(inputs["question"], inputs["reference"], inputs["key_points"], inputs["response"])
