"""HaluMem with an oracle answering MOSAIC's clarification questions (``benchmark.clarify=oracle``).

An upper-bound study of clarification targeting, off by default and never a paper row: after
each session the system's top-b targets (``Clarifiable.clarification_targets``) are answered
from that session's gold memory points, standing in for a user who knows the truth. Gold text
reaches the memory system here by design; that is what makes it an oracle, and why the run is
labelled (variant "<variant>+oracle-clarify") and kept out of Table 2.

Answering, without an LLM: a target matches the non-interference gold point of its session that
shares the largest share of the target's content words (at least ``match_threshold``); then the
answer is "yes" when every content word of the queued value appears in that point, else "no";
no match -> "unknown". Interference points (planted falsehoods) are never used as answers.

Extraction and update metrics are judged twice per session, in the same run: before the
clarifications (tables ``*_noclarify``, i.e. without) and after them (the main tables, with),
so the two can be compared item by item; QA runs once, after. Counts: questions asked,
answered yes / no, unknown, and entities committed by the answers.
"""

from __future__ import annotations

import re
from typing import Any

from core.api import Clarifiable, StoredItem

CLARIFY_TABLES = ("clarifications", "integrity_noclarify", "accuracy_noclarify", "updates_noclarify")
_STOP = frozenset("a an the of to in on at for and or is are was were be been has have had do does did i you he she it we they "
                  "my your his her its our their with as by from that this these those not no yes now".split())


def content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[0-9a-z]+", str(text).lower()) if w not in _STOP}


def oracle_answer(target: dict[str, Any], entity: dict[str, Any], points: list[Any], threshold: float) -> tuple[str, str | None]:
    """("yes" | "no" | "unknown", the gold point used) for one target."""
    words = content_words(target["text"])
    best, best_share = None, 0.0
    for point in points:
        if point.is_interference or not words:
            continue
        share = len(words & content_words(point.content)) / len(words)
        if share > best_share:
            best, best_share = point, share
    if best is None or best_share < threshold:
        return "unknown", None
    value_words = content_words(entity.get("value") or entity.get("text", ""))
    return ("yes" if value_words and value_words <= content_words(best.content) else "no"), best.content


def ask_oracle(system: Any, namespace: str, session: Any, budget: int, threshold: float) -> tuple[list[dict[str, Any]], list[StoredItem]]:
    """Ask the top-``budget`` targets, answer each from the session's gold points, feed the answers back."""
    if not isinstance(system, Clarifiable):
        raise ValueError(f"benchmark.clarify=oracle needs a system with clarification targets (Clarifiable); "
                         f"{getattr(system, 'name', type(system).__name__)!r} has none: set benchmark.clarify=off")
    queue = {item["entity"]["entity_id"]: item["entity"] for item in system.clarification_queue(namespace)}
    asked, stored = [], []
    for rank, target in enumerate(system.clarification_targets(namespace, budget)):
        answer, gold = oracle_answer(target, queue[target["entity_id"]], list(session.memory_points), threshold)
        report = system.resolve_clarification(namespace, target["entity_id"], answer)
        asked.append({"rank": rank, "entity_id": target["entity_id"], "text": target["text"], "question": target["question"],
                      "gain": target["gain"], "answer": answer, "gold": gold,
                      "committed": [s.memory_id for s in report.stored], "updated": len(report.updated)})
        stored += report.stored
    return asked, stored


def clarify_session(bench: Any, user: Any, s_idx: int, session: Any, system: Any, namespace: str, judge: Any, mode: str,
                    rows: dict[str, Any], stored: list[StoredItem]) -> list[StoredItem]:
    """The hook in HaluMemBenchmark's session loop: judge without, ask the oracle, return what is stored with."""
    without = {"integrity": rows["integrity_noclarify"], "accuracy": rows["accuracy_noclarify"], "updates": rows["updates_noclarify"]}
    unsearched = bench._judge_updates(user, s_idx, session, system, namespace, judge, without)
    if mode != "none":
        bench._judge_extraction(user, s_idx, session, [item.text for item in stored], judge, without, unsearched)
    before = {item.memory_id for item in system.stored_items(namespace)} if mode == "inspect" else set()
    asked, committed = ask_oracle(system, namespace, session, bench.clarify_budget, bench.clarify_match_threshold)
    for row in asked:
        key = f"{user.uuid}:{s_idx}:c{row['rank']}"
        if key not in rows["clarifications"]:
            rows["clarifications"].append({"key": key, "uuid": user.uuid, "session": s_idx, **row})
    if mode == "inspect":
        return stored + [item for item in system.stored_items(namespace) if item.memory_id not in before]
    return stored + committed if mode == "report" else stored


def clarify_metrics(bench: Any, rows: dict[str, list[dict[str, Any]]], extraction_mode: str) -> dict[str, Any]:
    """Counts of questions and answers, and extraction/update metrics without the clarifications."""
    from eval.benchmarks.halumem.metrics import extraction_metrics, label_metrics

    asked = rows["clarifications"]
    n_boot, seed = bench.bootstrap_samples, bench.seed
    return {
        "mode": bench.clarify,
        "budget_per_session": bench.clarify_budget,
        "asked": len(asked),
        "answers": {a: sum(r["answer"] == a for r in asked) for a in ("yes", "no", "unknown")},
        # the memory ids a clarification stored; a published row holds their count (halumem/public.py)
        "entities_committed": sum(r["committed"] if isinstance(r["committed"], int) else len(r["committed"]) for r in asked),
        "updates_applied": sum(r["updated"] for r in asked),
        "without": {
            "extraction": extraction_metrics(rows["integrity_noclarify"], rows["accuracy_noclarify"], n_boot, seed)
            if extraction_mode != "none" else None,
            "updating": label_metrics([r for r in rows["updates_noclarify"] if r.get("routed") != "integrity"],
                                      ("Correct", "Hallucination", "Omission", "Other"), n_boot, seed),
        },
    }
