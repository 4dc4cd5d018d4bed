"""How lenient is a judge? False- and true-accept rates on the locomo-audit wrong-answer bank.

The audit (github.com/dial481/locomo-audit) wrote, for every category 1-4 LoCoMo question, a
vague-but-topical wrong answer (``ap_v2_vague_wrong_scored.json``) and a specific-but-wrong one
(``ap_v1_specific_wrong_scored.json``). A judge that accepts the first rewards systems that answer
vaguely. Three strata are judged on the same questions: vague-wrong, specific-wrong and the gold
answer itself (a judge must accept that). Questions of held-out conversations never enter a sample.

Dev and report samples are disjoint slices of one seeded permutation of the eligible questions:
prompts are tuned on ``dev`` and rates are reported on ``report``.

A calibrated judge (eval.judge.CalibratedJudge: P(correct) from one token's log-probabilities) is fitted
the same way on two halves: ``fit_threshold`` picks the threshold on the fit half, ``threshold_rates``
reports acceptance at it on the held-out half, ``roc`` gives both halves' ROC curves.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eval.metrics import bootstrap_ci

BANK_FILES = {"vague_wrong": "ap_v2_vague_wrong_scored.json", "specific_wrong": "ap_v1_specific_wrong_scored.json"}
STRATA = ("vague_wrong", "specific_wrong", "gold")
SPLITS = ("dev", "report")
_QUESTION_ID = re.compile(r"locomo_(\d+)_qa(\d+)")


def parse_question_id(question_id: str) -> tuple[int, int]:
    """``locomo_<conversation position>_qa<qa index>`` -> (position, index); both 0-based."""
    match = _QUESTION_ID.fullmatch(question_id)
    if not match:
        raise ValueError(f"audit question_id {question_id!r}: expected 'locomo_<i>_qa<j>'")
    return int(match.group(1)), int(match.group(2))


@dataclass(frozen=True)
class BankItem:
    """One question of the bank with its gold answer and both deliberately wrong answers."""

    question_id: str
    conversation: int
    qa_index: int
    category: int
    question: str
    gold: str
    answers: dict[str, str]  # stratum -> answer to judge (gold included)
    reference_accepts: dict[str, bool | None]  # gpt-4o-mini under the generous prompt, majority of 3


def _majority(judgments: dict[str, Any] | None) -> bool | None:
    votes = [bool(v) for v in (judgments or {}).values() if v is not None]
    return None if not votes else sum(votes) * 2 > len(votes)


def load_bank(bank_dir: Path, held_out_conversations: Sequence[int]) -> list[BankItem]:
    """Questions present in both banks, minus held-out conversations (dropped before any other use)."""
    held_out = set(held_out_conversations)
    per_stratum: dict[str, dict[str, dict[str, Any]]] = {}
    for stratum, filename in BANK_FILES.items():
        path = bank_dir / filename
        if not path.is_file():
            raise FileNotFoundError(f"{path}: audit bank missing (python -m scripts.download_data, or --mirror DIR)")
        data = json.loads(path.read_text(encoding="utf-8"))
        rows = {}
        for conv_rows in data["detailed_results"].values():
            for row in conv_rows:
                if parse_question_id(row["question_id"])[0] not in held_out:
                    rows[row["question_id"]] = row
        per_stratum[stratum] = rows
    items = []
    common = set(per_stratum["vague_wrong"]) & set(per_stratum["specific_wrong"])
    for question_id in sorted(common, key=parse_question_id):
        vague, specific = per_stratum["vague_wrong"][question_id], per_stratum["specific_wrong"][question_id]
        conversation, qa_index = parse_question_id(question_id)
        gold = str(vague["golden_answer"])
        items.append(
            BankItem(
                question_id=question_id,
                conversation=conversation,
                qa_index=qa_index,
                category=int(vague["category"]),
                question=str(vague["question"]),
                gold=gold,
                answers={"vague_wrong": str(vague["generated_answer"]), "specific_wrong": str(specific["generated_answer"]), "gold": gold},
                reference_accepts={
                    "vague_wrong": _majority(vague.get("llm_judgments")),
                    "specific_wrong": _majority(specific.get("llm_judgments")),
                    "gold": None,  # the audit did not judge gold answers
                },
            )
        )
    return items


def split_sample(items: Sequence[BankItem], split: str, dev_size: int, report_size: int, seed: int) -> list[BankItem]:
    """The ``dev`` or ``report`` questions: disjoint slices of one seeded permutation."""
    if split not in SPLITS:
        raise ValueError(f"calibration.split={split!r}: use one of {SPLITS}")
    if dev_size + report_size > len(items):
        raise ValueError(f"calibration: dev {dev_size} + report {report_size} questions exceed the bank's {len(items)}")
    order = np.random.default_rng(seed).permutation(len(items))
    chosen = order[:dev_size] if split == "dev" else order[dev_size : dev_size + report_size]
    return [items[i] for i in chosen]


Judge = Callable[[str, str, str], dict[str, Any]]


def judge_sample(
    judge: Judge,
    sample: Sequence[BankItem],
    strata: Sequence[str] = STRATA,
    progress: Callable[[], None] | None = None,
    workers: int = 1,
) -> list[dict[str, Any]]:
    """One row per (question, stratum), in that order: the judge's label and whether it accepted the answer.

    ``workers`` > 1 sends that many requests at once (a llama.cpp server with as many slots decodes them together).
    """
    jobs = [(stratum, item) for stratum in strata for item in sample]

    def one(job: tuple[str, BankItem]) -> dict[str, Any]:
        stratum, item = job
        verdict = judge(item.question, item.gold, item.answers[stratum])
        if progress:
            progress()
        return {
            "question_id": item.question_id,
            "category": item.category,
            "stratum": stratum,
            "answer": item.answers[stratum],
            "label": verdict.get("label"),
            "accepted": verdict.get("correct"),
            "reasoning": verdict.get("reasoning", ""),
            "p_correct": verdict.get("p_correct"),  # a calibrated judge's P(correct); None for a reasoning judge
            "reference_accepted": item.reference_accepts[stratum],
        }

    if workers <= 1:
        return [one(job) for job in jobs]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, jobs))


def rates(rows: Sequence[dict[str, Any]], n_samples: int, seed: int) -> dict[str, Any]:
    """Acceptance share per stratum with a bootstrap CI: false-accept for wrong answers, true-accept for gold."""
    out: dict[str, Any] = {}
    for stratum in STRATA:
        mine = [r for r in rows if r["stratum"] == stratum]
        if not mine:
            continue
        name = "true_accept" if stratum == "gold" else "false_accept"
        reference = [float(r["reference_accepted"]) for r in mine if r["reference_accepted"] is not None]
        out[stratum] = {
            name: bootstrap_ci([None if r["accepted"] is None else float(r["accepted"]) for r in mine], n_samples, seed),
            "judge_failures": sum(r["accepted"] is None for r in mine),
            "n": len(mine),
            "reference_gpt4o_mini_generous": bootstrap_ci(reference, n_samples, seed) if reference else None,
        }
    return out


def slices(items: Sequence[BankItem], per_slice: int, seed: int, count: int) -> list[list[BankItem]]:
    """``count`` disjoint slices of ``per_slice`` questions, in order, of one seeded permutation (slice 0 fits the
    threshold; another reports it)."""
    if count * per_slice > len(items):
        raise ValueError(f"threshold_fit.per_half={per_slice}: {count} slices need {count * per_slice} questions, the bank has {len(items)}")
    order = np.random.default_rng(seed).permutation(len(items))
    return [[items[i] for i in order[k * per_slice : (k + 1) * per_slice]] for k in range(count)]


def halves(items: Sequence[BankItem], per_half: int, seed: int) -> tuple[list[BankItem], list[BankItem]]:
    """(fit half, held-out half): the first two slices."""
    fit_half, held_out = slices(items, per_half, seed, 2)
    return fit_half, held_out


def at_threshold(rows: Sequence[dict[str, Any]], threshold: float) -> list[dict[str, Any]]:
    """The rows relabelled at ``threshold`` (accepted when P(correct) >= it; None stays a failure)."""
    return [{**r, "accepted": None if r.get("p_correct") is None else r["p_correct"] >= threshold} for r in rows]


def acceptance(rows: Sequence[dict[str, Any]], stratum: str, threshold: float) -> float | None:
    """Share of one stratum's judged rows with P(correct) >= ``threshold`` (failures left out)."""
    scored = [r["p_correct"] for r in rows if r["stratum"] == stratum and r.get("p_correct") is not None]
    return sum(p >= threshold for p in scored) / len(scored) if scored else None


THRESHOLD_RULES = ("strictest", "youden_midpoint")


def fit_threshold(rows: Sequence[dict[str, Any]], gold_accept_min: float, rule: str = "youden_midpoint") -> float:
    """The threshold on P(correct) fitted on ``rows``; candidates are the P(correct) values seen, and every rule keeps
    gold answers accepted at least ``gold_accept_min`` of the time.

    ``strictest``: the highest such candidate (fewest wrong answers accepted on these rows; it sits on a gold
    answer's own value, so it overfits: on a fresh half it rejected a third of the gold answers).
    ``youden_midpoint``: the candidate with the largest gold acceptance minus wrong acceptance (vague and specific
    pooled; ties: the highest), moved down to the midpoint between it and the next lower value seen, so the
    threshold sits in the gap between the classes rather than on one answer."""
    if rule not in THRESHOLD_RULES:
        raise ValueError(f"threshold_fit.rule={rule!r}: use one of {THRESHOLD_RULES}")
    candidates = sorted({float(r["p_correct"]) for r in rows if r.get("p_correct") is not None}, reverse=True)
    eligible = [t for t in candidates if (share := acceptance(rows, "gold", t)) is not None and share >= gold_accept_min]
    if not eligible:
        raise ValueError("fit_threshold: no judged gold answers in the fit half")
    if rule == "strictest":
        return eligible[0]
    wrong = [r for r in rows if r["stratum"] != "gold" and r.get("p_correct") is not None]

    def youden(t: float) -> float:
        return float(acceptance(rows, "gold", t) or 0.0) - (sum(r["p_correct"] >= t for r in wrong) / len(wrong) if wrong else 0.0)

    best = max(eligible, key=lambda t: (youden(t), t))
    lower = [t for t in candidates if t < best]
    return (best + lower[0]) / 2 if lower else best


def roc(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """ROC of P(correct), gold answers positive, against each wrong stratum and both together: false-accept
    rate, gold accept rate, thresholds and the area under the curve (sklearn)."""
    from sklearn.metrics import roc_auc_score, roc_curve

    out: dict[str, Any] = {}
    gold = [r["p_correct"] for r in rows if r["stratum"] == "gold" and r.get("p_correct") is not None]
    for name, strata in (("vague_wrong", ("vague_wrong",)), ("specific_wrong", ("specific_wrong",)), ("both_wrong", ("vague_wrong", "specific_wrong"))):
        wrong = [r["p_correct"] for r in rows if r["stratum"] in strata and r.get("p_correct") is not None]
        if not gold or not wrong:
            continue
        truth, score = [1] * len(gold) + [0] * len(wrong), gold + wrong
        fpr, tpr, thresholds = roc_curve(truth, score)
        out[name] = {"false_accept": [round(float(x), 4) for x in fpr], "gold_accept": [round(float(x), 4) for x in tpr],
                     "thresholds": [min(1.0, float(x)) for x in thresholds], "auc": round(float(roc_auc_score(truth, score)), 4)}  # fmt: skip
    return out


def calibration_key(judge_model_id: str, prompt_name: str) -> str:
    """File stem under results/judge/: the judge model and prompt (model ids may carry slashes)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{judge_model_id}__{prompt_name}")


def load_calibration(directory: Path, judge_model_id: str, prompt_name: str) -> dict[str, Any] | None:
    """The report-split calibration of this judge and prompt, or None when it was never run."""
    path = directory / f"{calibration_key(judge_model_id, prompt_name)}.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def summary_cell(calibration: dict[str, Any] | None) -> str:
    """``vague FA 40.0 [23.3, 56.7] · specific FA 10.0 [..] · gold TA 100.0 [..] (n=30/stratum)`` for tables."""
    if not calibration:
        return "not calibrated (scripts/calibrate_judge.py)"
    parts = []
    for stratum, label in (("vague_wrong", "vague-wrong FA"), ("specific_wrong", "specific-wrong FA"), ("gold", "gold TA")):
        cell = calibration.get("rates", {}).get(stratum)
        if not cell:
            continue
        stat = cell["true_accept" if stratum == "gold" else "false_accept"]
        if stat.get("mean") is None:
            continue
        parts.append(f"{label} {stat['mean'] * 100:.0f} [{stat['ci_low'] * 100:.0f}, {stat['ci_high'] * 100:.0f}]")
    n = calibration.get("questions", "?")
    return "; ".join(parts) + f" (n={n}/stratum)"
