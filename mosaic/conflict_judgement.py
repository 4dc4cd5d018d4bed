"""The LLM judgement of the save-time conflict check (mosaic.conflict, step 3): each mode's prompt and
worked examples, and how its one generated token is read as a score.

Modes (conf/system/mosaic.yaml conflict.mode): ``nli`` asks "is NEW true, false or unknown given the facts?" and
scores p(false); ``pick`` asks for the number of the contradicted fact and scores 1 - p("0"); ``revise`` asks which
held fact NEW makes out of date (same score); ``supersede`` asks one yes/no question about the nearest held fact and
scores p(yes). Every prompt is a fixed system message and fixed worked examples followed by the query, so
llama.cpp's prompt cache covers most of each call. Kept apart from the detector so a prompt can be read, tested
and changed without the candidate search and policy around it.
"""

from __future__ import annotations

import math
import re
from typing import Any

from core.llm import LLMClient

SYSTEM_PROMPT = (
    "You check a memory of facts before a NEW statement is saved. The NEW statement contradicts a fact "
    "when both cannot be true together: it changes a number or a rule, reverses it, or plans something "
    "the facts rule out (combine facts: a person's facts plus a general rule). It does not contradict "
    "when it repeats a fact in other words, adds a detail, applies a rule correctly to a case, or is "
    "about something else. Reply with the number of the contradicted fact, or 0 if none."
)
FEW_SHOT: list[tuple[list[str], str, str]] = [
    (["The team meets every Monday at 9am.", "Anna leads the team.", "Team meetings last 30 minutes."],
     "The weekly team meeting is held on Thursdays.", "1"),
    (["Staff get 25 days of paid leave a year.", "The office is closed on public holidays."],
     "Staff can book their leave days at any time with their manager's approval.", "0"),
    (["Only managers may approve refunds.", "Sam works as a cashier.", "Refunds over 100 euros need a receipt."],
     "Sam approved a customer's refund himself, as his role allows.", "1"),
    (["Tom has a peanut allergy.", "Peanuts are banned from the school canteen."],
     "Tom's lunch box is packed without nuts.", "0"),
    (["The library lends books for 3 weeks.", "Members can renew a loan once online."],
     "Members may keep books as long as they like without renewing.", "1"),
    (["Lena is vegetarian.", "The canteen serves fish on Fridays."],
     "Lena's favourite author is Ursula Le Guin.", "0"),
    (["Guests under 18 need a parent's signature.", "Mia is 15."],
     "Mia signed up on her own, with no parent's signature needed.", "2"),
]  # fmt: skip


NLI_SYSTEM_PROMPT = (
    "You check a NEW statement against facts already in memory. Answer false if the facts show the NEW "
    "statement cannot be true: a different number, the opposite rule, or something the facts rule out for "
    "this person or case (combine a person's facts with a general rule). Answer true if the facts say the "
    "same thing. Answer unknown if the facts neither confirm nor rule it out: an extra detail, a new topic, "
    "or a case the facts allow. Reply with one word: true, false or unknown."
)
NLI_FEW_SHOT: list[tuple[list[str], str, str]] = [
    (FEW_SHOT[0][0], FEW_SHOT[0][1], "false"),
    (FEW_SHOT[1][0], FEW_SHOT[1][1], "unknown"),
    (["The gym opens at 6am on weekdays.", "The pool is closed on Sundays."], "On weekdays the gym opens at six in the morning.", "true"),
    (FEW_SHOT[2][0], FEW_SHOT[2][1], "false"),
    (FEW_SHOT[3][0], FEW_SHOT[3][1], "unknown"),
    (FEW_SHOT[4][0], FEW_SHOT[4][1], "false"),
    (FEW_SHOT[5][0], FEW_SHOT[5][1], "unknown"),
    (FEW_SHOT[6][0], FEW_SHOT[6][1], "false"),
]
NLI_LABELS = ("true", "false", "unknown")


def format_nli_query(facts: list[str], new_text: str) -> str:
    lines = [f"- {text}" for text in facts]
    return "Facts:\n" + "\n".join(lines) + f"\nNEW: {new_text}\nIs NEW true, false or unknown given the facts?"


def few_shot_messages(
    system: str, examples: Any, format_query_fn: Any, facts: list[str], new_text: str
) -> list[dict[str, str]]:
    """System + few-shot turns (a fixed prefix shared by every call, so llama.cpp caches it) + this query."""
    messages = [{"role": "system", "content": system}]
    for ex_facts, ex_new, answer in examples:
        messages.append({"role": "user", "content": format_query_fn(ex_facts, ex_new)})
        messages.append({"role": "assistant", "content": answer})
    messages.append({"role": "user", "content": format_query_fn(facts, new_text)})
    return messages


def build_nli_messages(facts: list[str], new_text: str) -> list[dict[str, str]]:
    """Prompt for the three-way (NLI-style) judgement."""
    return few_shot_messages(NLI_SYSTEM_PROMPT, NLI_FEW_SHOT, format_nli_query, facts, new_text)


# Write-cost variant (``batch: true``): several NLI checks in one call. The same eight worked
# examples, grouped as numbered checks, so the prefix stays fixed (llama.cpp caches it) and the model sees
# the one-line-per-check answer format; a group of one still uses the single-check prompt above.
NLI_BATCH_SYSTEM_PROMPT = NLI_SYSTEM_PROMPT.replace(
    "Reply with one word: true, false or unknown.",
    "Several checks come numbered, each with its own facts: reply one line per check, its number, a dot and one "
    "word: true, false or unknown.",
)
# Indices into NLI_FEW_SHOT, ordered so that no answer position always holds the same label: when every
# example group opened on "false", the batched judgement turned 15 of the quickstart's writes into updates or
# flags where the single prompt made 2 (docs/results_history.md, "MOSAIC's write cost").
NLI_BATCH_FEW_SHOT: list[list[int]] = [[1, 0, 2], [3, 4], [6, 7, 5]]  # labels: unknown false true / false unknown / unknown false false


def format_nli_batch_query(checks: list[tuple[list[str], str]]) -> str:
    blocks = [f"Check {n}:\n" + format_nli_query(facts, new).rsplit("\n", 1)[0] for n, (facts, new) in enumerate(checks, start=1)]
    return "\n\n".join(blocks) + "\n\nFor each check: is NEW true, false or unknown given its facts?"


def format_nli_batch_answer(labels: list[str]) -> str:
    return "\n".join(f"{n}. {label}" for n, label in enumerate(labels, start=1))


def build_nli_batch_messages(checks: list[tuple[list[str], str]]) -> list[dict[str, str]]:
    """Prompt for several three-way judgements in one call (``checks``: (facts, new text) each)."""
    messages = [{"role": "system", "content": NLI_BATCH_SYSTEM_PROMPT}]
    for group in NLI_BATCH_FEW_SHOT:
        examples = [NLI_FEW_SHOT[i] for i in group]
        messages.append({"role": "user", "content": format_nli_batch_query([(facts, new) for facts, new, _ in examples])})
        messages.append({"role": "assistant", "content": format_nli_batch_answer([label for _, _, label in examples])})
    messages.append({"role": "user", "content": format_nli_batch_query(checks)})
    return messages


def label_of(token: str) -> str | None:
    """The NLI label a generated token starts ("fa" -> false), None for any other token."""
    token = token.strip().lower()
    return next((label for label in NLI_LABELS if token and label.startswith(token) and (len(token) >= 2 or token == label)), None)


def batch_label_distributions(logprobs: list[dict[str, Any]] | None, text: str, n_checks: int) -> list[dict[str, float] | None]:
    """One label distribution per check, read at the generated tokens that start a label, in order.

    A check whose line never came (the reply stopped early or wandered) gets None: unjudged, not "true"."""
    found: list[dict[str, float]] = []
    if logprobs:
        for position in logprobs:
            if len(found) == n_checks:
                break
            if label_of(str(position.get("token", ""))):
                found.append(label_distribution([position], str(position.get("token", ""))))
    else:  # no log-probabilities from the server: one-hot on the words of the reply
        words = [w for w in re.findall(r"[a-z]+", text.lower()) if label_of(w)]
        found = [label_distribution(None, w) for w in words[:n_checks]]
    return [*found, *([None] * (n_checks - len(found)))]


def label_distribution(logprobs: list[dict[str, Any]] | None, text: str) -> dict[str, float]:
    """p(true), p(false), p(unknown) from the first token's top log-probabilities (renormalised)."""
    probs: dict[str, float] = {}
    if logprobs:
        for cand in logprobs[0].get("top_logprobs", []):
            label = label_of(str(cand.get("token", "")))
            if label is not None:
                probs[label] = probs.get(label, 0.0) + math.exp(float(cand["logprob"]))
    if not probs:
        word = text.strip().lower()
        probs = {next((lab for lab in NLI_LABELS if word.startswith(lab[:2])), "unknown"): 1.0}
    total = sum(probs.values())
    return {k: probs.get(k, 0.0) / total for k in NLI_LABELS}


def numbered_query(facts: list[str], new_text: str, question: str) -> str:
    """The held facts as a numbered list, then NEW and the question (pick and revise modes)."""
    lines = [f"{i}. {text}" for i, text in enumerate(facts, start=1)]
    return "Facts:\n" + "\n".join(lines) + f"\nNEW: {new_text}\n{question}"


def format_query(facts: list[str], new_text: str) -> str:
    return numbered_query(facts, new_text, "Contradicted fact (number, 0 if none):")


def build_messages(facts: list[str], new_text: str) -> list[dict[str, str]]:
    """Prompt for the "which fact is contradicted" judgement."""
    return few_shot_messages(SYSTEM_PROMPT, FEW_SHOT, format_query, facts, new_text)


# Ablation (``mode: revise``): HaluMem's updates are mostly revisions of a person's state (a new
# job, a changed feeling, a plan given up) that an "are both true?" judge accepts as compatible, so this prompt asks
# which held fact the new statement makes out of date. The same numbered list and 1 - p("0") score as ``pick``.
# Its examples are written for this prompt (no benchmark text); the target's position varies.
REVISE_SYSTEM_PROMPT = (
    "You keep a person's memory up to date. A NEW statement replaces a held fact when both are about the same "
    "thing (the same person and the same attribute: where they live, their job, their health, a feeling, a plan, "
    "a preference, a relationship, a routine, a goal) and NEW says how it is now, so the held fact is out of date. "
    "NEW replaces no fact when it repeats one, adds a detail or one more item, or is about something else. Reply "
    "with the number of the fact NEW replaces, or 0 if none."
)
REVISE_FEW_SHOT: list[tuple[list[str], str, str]] = [
    (["Tom works as a bank clerk in Leeds.", "Tom plays football on Sundays.", "Tom's sister is called Ruth."],
     "Tom left the bank and now teaches maths at a secondary school.", "1"),
    (["Priya is training for a half marathon.", "Priya drinks her coffee without sugar."],
     "Priya ran 15 km on Saturday as part of her half-marathon training.", "0"),
    (["Omar is learning to play the cello.", "Omar's partner is a nurse.", "Omar lives in a flat in Lisbon."],
     "Omar has moved to a house in Porto.", "3"),
    (["Greta is allergic to peanuts.", "Greta enjoys hiking in the Alps."],
     "Greta has taken up rock climbing as well.", "0"),
    (["Jonas reads science fiction.", "Jonas wants to study law.", "Jonas has a younger brother."],
     "Jonas has changed his mind and now plans to study medicine.", "2"),
    (["Ben feels anxious about his new job.", "Ben has a cat named Pixel."],
     "Ben's cat Pixel likes to sleep on the sofa.", "0"),
    (["Lina sleeps badly before exams.", "Lina swims twice a week.", "Lina feels lonely since moving to Oslo."],
     "Lina feels at home in Oslo now that she has joined a choir.", "3"),
    (["Sara volunteers at an animal shelter.", "Sara loves Italian food."],
     "Sara said again how much she loves Italian food.", "0"),
]  # fmt: skip


def format_revise_query(facts: list[str], new_text: str) -> str:
    return numbered_query(facts, new_text, "Replaced fact (number, 0 if none):")


def build_revise_messages(facts: list[str], new_text: str) -> list[dict[str, str]]:
    """Prompt for the "which held fact does NEW make out of date" judgement (``mode: revise``)."""
    return few_shot_messages(REVISE_SYSTEM_PROMPT, REVISE_FEW_SHOT, format_revise_query, facts, new_text)


# Ablation (``mode: supersede``): one yes/no question about the nearest held fact alone, "does NEW
# make it out of date?", scored by p(yes) from the first token, the fact blamed being that nearest one (as in nli
# mode). A pair question avoids ``revise``'s failure on the dev probe (the model named a number for nearly every new
# fact, results/bench/halumem_revision_probe_dev.md). Its examples are REVISE_FEW_SHOT's, one fact each: the replaced
# one (yes) or, where none is, the one nearest in topic (no: a detail, one more hobby, the same pet, a repeat), in an
# order where neither answer alternates.
SUPERSEDE_SYSTEM_PROMPT = (
    "You keep a person's memory up to date. You see a HELD fact and a NEW statement. Answer yes if NEW makes HELD out "
    "of date: both are about the same thing (the same attribute of the same person: where they live, their job, their "
    "health, a feeling, a plan, a preference, a relationship, a routine, a goal) and NEW says how it is now. Answer no "
    "if NEW repeats HELD, adds a detail or one more item, or is about something else. Reply with one word: yes or no."
)
_SUPERSEDE_PAIRS = ((0, 0), (1, 0), (3, 1), (2, 2), (5, 1), (4, 1), (6, 2), (7, 1))  # (REVISE_FEW_SHOT example, its held fact)
SUPERSEDE_FEW_SHOT: list[tuple[list[str], str, str]] = [
    ([REVISE_FEW_SHOT[example][0][fact]], REVISE_FEW_SHOT[example][1], "no" if REVISE_FEW_SHOT[example][2] == "0" else "yes")
    for example, fact in _SUPERSEDE_PAIRS
]


def format_supersede_query(facts: list[str], new_text: str) -> str:
    return f"HELD: {facts[0]}\nNEW: {new_text}\nIs HELD out of date now?"


def build_supersede_messages(facts: list[str], new_text: str) -> list[dict[str, str]]:
    """Prompt for the yes/no "does NEW make the nearest held fact out of date" judgement (``mode: supersede``)."""
    return few_shot_messages(SUPERSEDE_SYSTEM_PROMPT, SUPERSEDE_FEW_SHOT, format_supersede_query, facts[:1], new_text)


def yes_probability(logprobs: list[dict[str, Any]] | None, text: str) -> float:
    """p(yes) against p(no) from the first token's top log-probabilities (renormalised over the two); falls back to
    the generated word when the server returned none."""
    probs = {"yes": 0.0, "no": 0.0}
    for cand in (logprobs[0].get("top_logprobs", []) if logprobs else []):
        word = str(cand.get("token", "")).strip().lower()
        if word in probs:
            probs[word] += math.exp(float(cand["logprob"]))
    if not any(probs.values()):
        return 1.0 if text.strip().lower().startswith("yes") else 0.0
    return probs["yes"] / (probs["yes"] + probs["no"])


def digit_distribution(logprobs: list[dict[str, Any]] | None, text: str, n_facts: int) -> dict[int, float]:
    """p(answer = i) for i in 0..n_facts from the first token's top log-probabilities (renormalised).

    Falls back to a one-hot on the generated text when the server returned no log-probabilities.
    """
    probs: dict[int, float] = {}
    if logprobs:
        for cand in logprobs[0].get("top_logprobs", []):
            token = str(cand.get("token", "")).strip()
            if token.isdigit() and int(token) <= n_facts:
                probs[int(token)] = probs.get(int(token), 0.0) + math.exp(float(cand["logprob"]))
    if not probs:
        digits = re.findall(r"\d+", text)
        value = int(digits[0]) if digits and int(digits[0]) <= n_facts else 0
        probs = {value: 1.0}
    total = sum(probs.values())
    return {k: v / total for k, v in probs.items()}


GOLD_REASON = "gold judge: the benchmark labels NEW as replacing fact {pick}: {old}"
# What each judgement mode's verdict says in a ConflictDecision's reason (when no "why?" call was made).
LLM_REASONS: dict[str, str] = {
    "nli": "LLM: NEW is false given the held facts (p(false)={score:.2f}); nearest: {old}",
    "pick": "LLM picked fact {pick} (p={score:.2f}): {old}",
    "revise": "LLM: NEW replaces fact {pick} (p={score:.2f}): {old}",
    "supersede": "LLM: NEW makes the nearest held fact out of date (p(yes)={score:.2f}): {old}",
}


def ask_judgement(llm: LLMClient, mode: str, texts: list[str], new_text: str, top_logprobs: int) -> tuple[float, int, list[dict[str, str]], str, dict[str, Any]]:
    """One LLM call of ``mode`` over held ``texts`` and ``new_text``: (score, 1-based index of the blamed fact, messages,
    first answer, what was read from the answer for the check's trace). The score is compared with conflict.threshold."""
    if mode in ("pick", "revise"):
        messages = (build_messages if mode == "pick" else build_revise_messages)(texts, new_text)
        result = llm.chat(messages, max_tokens=1, top_logprobs=top_logprobs, purpose="conflict")
        dist = digit_distribution(result.logprobs, result.text, len(texts))
        pick = max((i for i in dist if i > 0), key=lambda i: dist[i], default=0)
        return 1.0 - dist.get(0, 0.0), pick, messages, str(pick), {"digits": {k: round(v, 4) for k, v in sorted(dist.items())}}
    if mode == "supersede":
        messages = build_supersede_messages(texts, new_text)
        result = llm.chat(messages, max_tokens=1, top_logprobs=top_logprobs, purpose="conflict")
        score = yes_probability(result.logprobs, result.text)
        return score, 1, messages, "yes", {"p_yes": round(score, 4)}
    messages = build_nli_messages(texts, new_text)
    result = llm.chat(messages, max_tokens=1, top_logprobs=top_logprobs, purpose="conflict")
    labels = label_distribution(result.logprobs, result.text)
    return labels["false"], 1, messages, "false", {"labels": {k: round(v, 4) for k, v in labels.items()}}
