"""Write the labelled banks of every judge (data/judge_banks/<judge>.jsonl); HaluMem's five come from
eval/benchmarks/halumem/judge_bank_cases.py (the development user's cases stored as recipes).

    python -m scripts.build_judge_banks

Development data and hand-written cases only (never conv-49, HaluMem user 3 or data/conflicts/hypertension.json):

* locomo_qa (labels CORRECT, WRONG), all on LoCoMo conv-26 (position 0 of data/locomo10.json, which the
  calibrated judge's threshold fit never samples: conf/calibrate_judge.yaml threshold_fit): gold answers given
  as the answer; paraphrases of gold answers written here; the locomo-audit's vague-wrong and specific-wrong
  answers to conv-26 questions, hand-picked (``VAGUE_IDS``, ``SPECIFIC_IDS``) to leave out the audit answers
  that in fact state the gold fact (e.g. 'Not currently in a relationship' for 'Single', 'A couple of times' for
  '2'; the audit's category-3
  inference answers often agree with gold and are left out altogether); and wrong answers written here.
* conflict_contradiction (labels contradiction, no_contradiction): every case of the development suites
  household_finance and workplace_policy, the probe as the new statement and the facts MOSAIC's check would
  see approximated without a model: the gold contradicted turns plus the context turns sharing most words
  with the probe (``FACTS_SHOWN`` in all, in a seeded order); plus pairs written here.
The banks are committed; this script is how they were made (rerun: the same files).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

from eval.benchmarks.halumem.judge_bank_cases import bank_cases as halumem_bank_cases

REPO = Path(__file__).resolve().parents[1]
AUDIT = REPO / "data" / "locomo-audit"
OUT = REPO / "data" / "judge_banks"
DEV_SUITES = ("household_finance", "workplace_policy")
FACTS_SHOWN = 4
SEED = 0

# Sizes: a little over the 40 cases per label the bank command requires, because every case costs a judge call
# (about 12 s on the shared 2-core machine).
GOLD_IDS = [2, 5, 8, 9, 15, 17, 18, 20, 21, 23, 24, 25, 28, 29, 31, 32, 33, 35, 36, 38, 41, 45, 48, 51]
VAGUE_IDS = [0, 1, 3, 4, 6, 8, 9, 10, 11, 15, 16, 17, 18, 19, 20, 23, 24, 25, 28, 37, 43, 44]
SPECIFIC_IDS = [0, 1, 3, 4, 5, 6, 10, 11, 12, 16, 17, 19, 20, 37, 40]
PARAPHRASES = {  # conv-26 question index -> an answer that states the gold fact in other words
    0: "Caroline went on May 7, 2023.", 1: "She painted it in 2022.", 3: "She was researching agencies for adopting a child.",
    4: "Caroline is a trans woman.", 6: "In June of 2023.", 7: "She is single.", 10: "For four years.",
    11: "She moved from Sweden.", 16: "On July 2nd, 2023.", 19: "Her kids love nature and dinosaurs.",
    37: "She recently painted a sunset.", 40: "Twice.", 43: "She makes abstract paintings.", 44: "On August 13th.",
    52: "Luna, Bailey and Oliver.", 75: "She has three children.", 83: "That taking care of herself matters.",
    92: "Her grandma is from Sweden.", 93: "A necklace.", 123: "She has a guinea pig.", 131: "She is a fan of Ed Sheeran.",
}  # fmt: skip
WRITTEN_WRONG = {  # conv-26 question index -> a wrong answer of a kind the audit bank lacks
    0: "I don't know.", 40: "Three times.", 11: "She moved from Norway.", 93: "A bracelet.", 123: "She has a hamster.",
    44: "On 13 July.", 75: "The conversation does not say.", 131: "Taylor Swift.",
}  # fmt: skip
WRITTEN_PAIRS: list[tuple[list[str], str, str]] = [  # (held facts, new statement, label)
    (["The bakery opens at 7am.", "The bakery is closed on Mondays."], "On Tuesday the bakery opened at seven in the morning.", "no_contradiction"),
    (["Jonas cycles to work.", "Jonas lives 5 km from the office."], "Jonas bought a new helmet for his commute.", "no_contradiction"),
    (["The club's fee is 40 euros a year.", "Members under 16 pay half."], "Lea, who is 12, paid 20 euros for the year.", "no_contradiction"),
    (["Mara is allergic to cats.", "Mara has a dog called Pip."], "Mara took Pip for a walk by the river.", "no_contradiction"),
    (["Library fines are 10 cents a day.", "Children's books carry no fines."], "The library added a new shelf of comics.", "no_contradiction"),
    (["The team stand-up is at 9:30.", "Remote staff join by video."], "Remote staff dial into the 9:30 stand-up by video.", "no_contradiction"),
    (["Rent is due on the first of the month.", "Late rent costs a 25 euro fee."], "Paying rent on the first avoids the 25 euro fee.", "no_contradiction"),
    (["Omar speaks Arabic and French.", "Omar works as a translator."], "Omar is learning Spanish in the evenings.", "no_contradiction"),
]  # fmt: skip


def audit_rows(filename: str) -> dict[int, dict[str, Any]]:
    """conv-26's rows of one audit file, by question index."""
    data = json.loads((AUDIT / filename).read_text(encoding="utf-8"))
    rows = [r for conv in data["detailed_results"].values() for r in conv if r["question_id"].startswith("locomo_0_qa")]
    return {int(r["question_id"].rsplit("qa", 1)[1]): r for r in rows}


def locomo_cases() -> list[dict[str, Any]]:
    vague, specific = audit_rows("ap_v2_vague_wrong_scored.json"), audit_rows("ap_v1_specific_wrong_scored.json")

    def case(kind: str, index: int, label: str, prediction: str, source: str) -> dict[str, Any]:
        row = vague[index]
        inputs = {"question": row["question"], "gold": str(row["golden_answer"]), "prediction": prediction}
        return {"id": f"conv26-qa{index}-{kind}", "source": f"locomo conv-26 qa{index}, {source}", "label": label, "inputs": inputs}

    cases = [case("gold", i, "CORRECT", str(vague[i]["golden_answer"]), "gold answer as the answer") for i in GOLD_IDS]
    cases += [case("paraphrase", i, "CORRECT", text, "gold answer paraphrased (hand-written)") for i, text in PARAPHRASES.items()]
    cases += [case("vague", i, "WRONG", vague[i]["generated_answer"], "locomo-audit vague-wrong answer") for i in VAGUE_IDS]
    cases += [case("specific", i, "WRONG", specific[i]["generated_answer"], "locomo-audit specific-wrong answer") for i in SPECIFIC_IDS]
    cases += [case("written-wrong", i, "WRONG", text, "wrong answer (hand-written)") for i, text in WRITTEN_WRONG.items()]
    return cases


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2}


def conflict_cases() -> list[dict[str, Any]]:
    rng = np.random.default_rng(SEED)
    cases = []
    for suite in DEV_SUITES:
        data = json.loads((REPO / "data" / "conflicts" / f"{suite}.json").read_text(encoding="utf-8"))
        if data.get("split") != "dev":
            raise SystemExit(f"data/conflicts/{suite}.json: not a dev suite")
        for c in data["cases"]:
            turns = [t["text"] for t in data["contexts"][c["context"]]]
            probe = _words(c["probe"]["text"])
            others = sorted((i for i in range(len(turns)) if i not in c["conflicts_with"]), key=lambda i: (-len(_words(turns[i]) & probe), i))
            shown = list(c["conflicts_with"][:FACTS_SHOWN]) + others[: FACTS_SHOWN - len(c["conflicts_with"][:FACTS_SHOWN])]
            facts = [turns[i] for i in rng.permutation(shown)]
            label = "contradiction" if c["conflict"] else "no_contradiction"
            kind = f"{c['type']} conflict" if c["conflict"] else "no conflict"
            cases.append({"id": f"{suite}-{c['id']}", "source": f"conflict suite {suite} case {c['id']} ({kind})", "label": label,
                          "inputs": {"facts": facts, "new": c["probe"]["text"]}})  # fmt: skip
    for n, (facts, new, label) in enumerate(WRITTEN_PAIRS, start=1):
        cases.append({"id": f"written-{n:02d}", "source": "hand-written", "label": label, "inputs": {"facts": facts, "new": new}})
    return cases


def write(name: str, cases: list[dict[str, Any]]) -> Path:
    path = OUT / f"{name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases), encoding="utf-8")
    return path


def main() -> int:
    banks = {"locomo_qa": locomo_cases(), "conflict_contradiction": conflict_cases(), **halumem_bank_cases()}
    for name, cases in banks.items():
        labels = sorted({c["label"] for c in cases})
        print(write(name, cases), {label: sum(c["label"] == label for c in cases) for label in labels})
    return 0


if __name__ == "__main__":
    sys.exit(main())
