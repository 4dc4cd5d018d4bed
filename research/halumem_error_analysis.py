"""Why MOSAIC misses what rag answers on HaluMem: a question-by-question analysis of two oracle runs.

    python -m research.halumem_error_analysis <MOSAIC oracle run> <rag oracle-facts run> [--out DIR]
    python -m research.halumem_error_analysis <MOSAIC oracle run>        # every question MOSAIC gets wrong

The HaluMem twin of research/error_analysis.py (LoCoMo). Both folders are HaluMem runs over the same questions,
made with gold facts (``ablation=oracle_extractor`` / ``oracle_facts``), whose QA rows carry gold fact ids
(eval/benchmarks/halumem/benchmark.py, ``_evidence_fields``: the evidence's ids, those of the retrieved items, and
which evidence the system held when the question was asked or at any earlier snapshot). Published folders keep
these ids (no text), so the analysis also runs on them. Every question that rag answers correctly and MOSAIC does
not falls in exactly one class, checked in this order:

1. ``no_evidence_id``: the question's evidence names no gold point (abstention items, or evidence text that is no
   memory point's);
2. ``never_held``: MOSAIC never held any evidence fact (gated out, rejected by the conflict check, or dropped as a
   restatement of a held fact);
3. ``superseded``: MOSAIC held an evidence fact earlier, and none now (superseded by a later fact);
4. ``held_not_retrieved``: an evidence fact is held, but the search returned none;
5. ``retrieved_answered_wrong``: the search returned an evidence fact.

A second table, ``evidence_reach``, places every question with evidence ids in the same four places for each
run, whoever answered it. Without a rag run, the classes cover every question MOSAIC gets wrong (where its own
failures sit, not where it loses to rag). Writes halumem_error_analysis.{json,md} to ``--out`` (default: the MOSAIC
run folder).
Rows written before these fields existed are refused with a one-line message.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from eval.rows import read_rows

CLASSES = ("no_evidence_id", "never_held", "superseded", "held_not_retrieved", "retrieved_answered_wrong")
FIELDS = ("evidence_fact_ids", "retrieved_fact_ids", "evidence_held", "evidence_ever_held")


def evidence_place(row: dict[str, Any]) -> str:
    """Where a question's evidence sits in one run (the classes above, without the answer)."""
    ids = set(row["evidence_fact_ids"])
    if not ids:
        return "no_evidence_id"
    if ids & set(row["retrieved_fact_ids"]):
        return "retrieved_answered_wrong"
    if ids & set(row["evidence_held"]):
        return "held_not_retrieved"
    if ids & set(row["evidence_ever_held"]):
        return "superseded"
    return "never_held"


def qa_rows(run_dir: Path) -> dict[str, dict[str, Any]]:
    """QA rows by key; refuses a folder whose rows lack the gold fact ids (a run made before they were kept)."""
    path = Path(run_dir) / "halumem_qa.jsonl"
    if not path.exists():
        raise SystemExit(f"error: {path} not found: is {run_dir} a HaluMem run folder with QA (benchmark.score_qa=true)?")
    rows = {row["key"]: row for row in read_rows(path)}
    missing = next((row["key"] for row in rows.values() if any(field not in row for field in FIELDS)), None)
    if missing is not None:
        raise SystemExit(f"error: {path}: row {missing} has no gold fact ids ({', '.join(FIELDS)}); re-run it with this code "
                         "(an oracle run: ablation=oracle_extractor or oracle_facts)")
    return rows


def analyse(mosaic_dir: Path, rag_dir: Path | None) -> dict[str, Any]:
    """The classes of the questions rag answers and MOSAIC does not (with no rag run: every question MOSAIC misses)."""
    mosaic = qa_rows(mosaic_dir)
    rag = qa_rows(rag_dir) if rag_dir is not None else {}
    shared = sorted(set(mosaic) & set(rag)) if rag_dir is not None else sorted(mosaic)
    losses = [k for k in shared if rag.get(k, {}).get("label", "Correct") == "Correct" and mosaic[k]["label"] != "Correct"]
    wins = [k for k in shared if mosaic[k]["label"] == "Correct" and k in rag and rag[k]["label"] != "Correct"]
    classes = {k: evidence_place(mosaic[k]) for k in losses}
    by_type: dict[str, Counter] = {}
    for key, cls in classes.items():
        by_type.setdefault(mosaic[key].get("question_type", "?"), Counter())[cls] += 1
    reach = {name: Counter(evidence_place(rows[k]).replace("_answered_wrong", "") for k in shared if k in rows)
             for name, rows in (("mosaic", mosaic), ("rag", rag))}  # fmt: skip
    return {
        "mosaic_run": str(mosaic_dir), "rag_run": None if rag_dir is None else str(rag_dir), "shared_questions": len(shared),
        "only_mosaic": len(set(mosaic) - set(rag)) if rag_dir is not None else None,
        "only_rag": len(set(rag) - set(mosaic)) if rag_dir is not None else None,
        "classed": len(losses),  # rag right and MOSAIC not; with no rag run, MOSAIC not correct
        "rag_right_mosaic_not": len(losses) if rag_dir is not None else None,
        "mosaic_right_rag_not": len(wins) if rag_dir is not None else None,
        "classes": {cls: sum(c == cls for c in classes.values()) for cls in CLASSES},
        "classes_by_question_type": {t: dict(c) for t, c in sorted(by_type.items())},
        "evidence_reach": {name: dict(counter) for name, counter in reach.items()},
        "losses": [{"key": k, "class": classes[k], "question_type": mosaic[k].get("question_type"),
                    "mosaic_label": mosaic[k]["label"]} for k in losses],  # fmt: skip
    }


def markdown(result: dict[str, Any]) -> str:
    if result["rag_run"] is None:
        lines = ["# HaluMem: where MOSAIC's (oracle facts) wrong answers come from", "",
                 f"MOSAIC run `{result['mosaic_run']}`: {result['shared_questions']} questions, {result['classed']} "
                 "not answered correctly (no rag run given: every miss, not only those rag gets right).", "",
                 "| class (MOSAIC not correct) | questions |", "|---|---|"]  # fmt: skip
    else:
        lines = ["# HaluMem: where MOSAIC (oracle facts) loses to rag over the same facts", "",
                 f"MOSAIC run `{result['mosaic_run']}`, rag run `{result['rag_run']}`: {result['shared_questions']} shared questions; "
                 f"rag right and MOSAIC not: {result['rag_right_mosaic_not']}; MOSAIC right and rag not: {result['mosaic_right_rag_not']}.", "",
                 "| class (rag right, MOSAIC not) | questions |", "|---|---|"]  # fmt: skip
    lines += [f"| {cls} | {result['classes'][cls]} |" for cls in CLASSES]
    lines += ["", "Evidence reach over every shared question (where each run's evidence sat when the question was asked):", "",
              "| place | MOSAIC | rag |", "|---|---|---|"]  # fmt: skip
    places = ("no_evidence_id", "never_held", "superseded", "held_not_retrieved", "retrieved")
    lines += [f"| {p} | {result['evidence_reach']['mosaic'].get(p, 0)} | {result['evidence_reach']['rag'].get(p, 0)} |" for p in places]
    if result["classes_by_question_type"]:
        lines += ["", "| question type | " + " | ".join(CLASSES) + " |", "|---|" + "---|" * len(CLASSES)]
        for qtype, counts in result["classes_by_question_type"].items():
            lines.append(f"| {qtype} | " + " | ".join(str(counts.get(cls, 0)) for cls in CLASSES) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mosaic_run", type=Path)
    parser.add_argument("rag_run", type=Path, nargs="?", default=None, help="rag over the same oracle facts (optional)")
    parser.add_argument("--out", type=Path, default=None, help="folder for halumem_error_analysis.{json,md} (default: the MOSAIC run)")
    args = parser.parse_args(argv)
    result = analyse(args.mosaic_run, args.rag_run)
    out = args.out or args.mosaic_run
    out.mkdir(parents=True, exist_ok=True)
    (out / "halumem_error_analysis.json").write_text(json.dumps(result, indent=1))
    (out / "halumem_error_analysis.md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
