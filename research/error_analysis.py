"""Why MOSAIC misses what rag answers: a question-by-question error analysis of two LoCoMo runs.

    python -m research.error_analysis <mosaic run folder> <rag run folder> [--examples 3] [--out DIR]

Both folders are finished LoCoMo runs (predictions.jsonl, judgements.jsonl) over the same
questions; the MOSAIC one also holds MOSAIC's persisted memory under system/mosaic/. Every question
that rag answers correctly and MOSAIC does not falls in exactly one class, checked in this order:

1. ``never_extracted``: no entity MOSAIC made (held, superseded, flagged, queued by the gate or
   rejected by the conflict check, earlier versions in an entity's history included) has a gold
   evidence turn (dia_id) among its source turns.
2. ``gated_or_superseded``: some entity came from an evidence turn, but none of them is held now
   (each was queued by the gate, rejected, or superseded by a later entity).
3. ``stored_not_retrieved``: a held (active or flagged) entity came from an evidence turn, but
   MOSAIC's retrieved items cite no evidence turn (evidence recall 0).
4. ``retrieved_answered_wrong``: at least one evidence turn was cited by what MOSAIC retrieved.

A second table, ``evidence_reach``, covers *every* question with gold evidence, whoever got it right:
where MOSAIC's evidence sits (retrieved; held but not retrieved; only queued, rejected or superseded;
never extracted), and why entities left memory (the superseding rule: the slot belief, the LLM
judge or the numeric rule; the gate's reason for queueing: belief entropy or rho) with the attributes
most often involved. With ``--exact-rank`` it also embeds each question with the run's embedder and
ranks the held entities by plain cosine, splitting "held but not retrieved" into evidence that exact
search would have put in the top k (lost by the dual path or the node-score rerank) and evidence
ranked lower even there (the entity's wording does not match the question).

Writes error_analysis.json and error_analysis.md (counts, then a few examples per class) to the
MOSAIC run folder (or --out) and prints the table. Memories written by older code may lack fields
(kept turn texts, rejected entities, history source turns): each is read when present.
"""

from __future__ import annotations

import argparse
import base64
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable

import numpy as np
from hydra.utils import instantiate
from omegaconf import OmegaConf

from core.paths import file_safe_name
from eval.rows import read_rows
from eval.metrics import evidence_recall
from mosaic.store import MemoryStore, MemoryStoreError

CLASSES = {
    "never_extracted": "evidence never extracted",
    "gated_or_superseded": "extracted but gated/queued, rejected or superseded",
    "stored_not_retrieved": "stored but not retrieved (evidence recall 0)",
    "retrieved_answered_wrong": "retrieved but answered wrong",
}
HELD = ("active", "flagged")


def rows_by_key(run: Path, name: str) -> dict[str, dict[str, Any]]:
    path = run / f"{name}.jsonl"
    if not path.exists():
        raise SystemExit(f"{path} does not exist: pass a finished LoCoMo run folder (results/runs/locomo/<system>/<ablation>/<hash>/)")
    return {row["key"]: row for row in read_rows(path)}  # read only: a damaged line is skipped and named


def load_memory(path: Path) -> dict[str, Any]:
    """A MOSAIC memory file's state; a file that fails the store's checks is read as plain JSON (older code)."""
    try:
        return MemoryStore(path).load()
    except MemoryStoreError:
        document = json.loads(path.read_text(encoding="utf-8"))
        return document.get("state", document)


def turn_index(state: dict[str, Any]) -> dict[str, list[tuple[str, str, str]]]:
    """dia_id -> [(status, entity text, how)] for every entity MOSAIC made from that turn."""
    index: dict[str, list[tuple[str, str, str]]] = defaultdict(list)

    def note(entity: dict[str, Any], status: str, how: str) -> None:
        for turn_id in entity.get("source_turn_ids") or []:
            index[turn_id].append((status, str(entity.get("text", "")), how))
        for earlier in entity.get("history") or []:  # an entity's earlier versions (superseded values)
            if isinstance(earlier, dict) and earlier.get("source_turn_ids") and earlier.get("text"):
                for turn_id in earlier["source_turn_ids"]:
                    index[turn_id].append(("superseded", str(earlier["text"]), "earlier version"))

    for entity in state.get("graph", {}).get("entities", []):
        note(entity, str(entity.get("status", "active")), "graph")
    for item in state.get("queue", []):
        note(item.get("entity", {}), "queued", "gate queue")
    for entity in state.get("rejected", []):
        note(entity, "rejected", "conflict check")
    return index


def classify(evidence: list[str], retrieved_ids: list[str], index: dict[str, list[tuple[str, str, str]]]) -> str:
    """One class of the module doc for a question MOSAIC got wrong."""
    found = [entry for turn_id in evidence for entry in index.get(turn_id, [])]
    if not found:
        return "never_extracted"
    if not any(status in HELD for status, _, _ in found):
        return "gated_or_superseded"
    if not evidence_recall(evidence, retrieved_ids):
        return "stored_not_retrieved"
    return "retrieved_answered_wrong"


def _memories(mosaic_run: Path) -> dict[str, dict[str, Any]]:
    folder = mosaic_run / "system" / "mosaic"
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        raise SystemExit(f"{folder}: no MOSAIC memory files; the first folder must be a MOSAIC run with persist=true")
    return {path.stem: load_memory(path) for path in files}


def analyse(mosaic_run: Path, rag_run: Path, n_examples: int = 3) -> dict[str, Any]:
    mosaic_pred, rag_pred = rows_by_key(mosaic_run, "predictions"), rows_by_key(rag_run, "predictions")
    mosaic_judge, rag_judge = rows_by_key(mosaic_run, "judgements"), rows_by_key(rag_run, "judgements")
    shared = sorted(set(mosaic_pred) & set(rag_pred) & set(mosaic_judge) & set(rag_judge))
    if not shared:
        raise SystemExit(f"{mosaic_run} and {rag_run} share no judged question: are they runs over the same slice?")
    memories = _memories(mosaic_run)
    indexes = {stem: turn_index(state) for stem, state in memories.items()}
    turns = {stem: state.get("turns", {}) for stem, state in memories.items()}
    counts = {name: 0 for name in CLASSES}
    examples: dict[str, list[dict[str, Any]]] = {name: [] for name in CLASSES}
    tally = {"questions": len(shared), "rag_correct": 0, "mosaic_correct": 0, "both_correct": 0, "mosaic_only": 0, "no_gold_evidence": 0,
             "unjudged": 0, "rag_only": 0}
    for key in shared:
        m_ok, r_ok = mosaic_judge[key].get("correct"), rag_judge[key].get("correct")
        if m_ok is None or r_ok is None or mosaic_judge[key].get("label") is None or rag_judge[key].get("label") is None:
            tally["unjudged"] += 1
            continue
        tally["rag_correct"] += bool(r_ok)
        tally["mosaic_correct"] += bool(m_ok)
        tally["both_correct"] += bool(r_ok and m_ok)
        tally["mosaic_only"] += bool(m_ok and not r_ok)
        if not r_ok or m_ok:
            continue
        tally["rag_only"] += 1
        row = mosaic_pred[key]
        evidence = list(row.get("evidence") or [])
        if not evidence:
            tally["no_gold_evidence"] += 1
            continue
        stem = file_safe_name(f"locomo:{row.get('sample_id', key.split(':')[0])}")
        if stem not in indexes:
            raise SystemExit(f"{mosaic_run}/system/mosaic/{stem}.json is missing: the memory of {row.get('sample_id')} was not kept")
        retrieved = row.get("retrieved_turn_ids") or [t for item in row.get("retrieved", []) for t in item.get("source_turn_ids", [])]
        label = classify(evidence, retrieved, indexes[stem])
        counts[label] += 1
        if len(examples[label]) < n_examples:
            examples[label].append({
                "key": key, "category": row.get("category"), "question": row.get("question"), "gold": row.get("gold"),
                "mosaic": row.get("prediction"), "rag": rag_pred[key].get("prediction"), "evidence": evidence,
                "evidence_text": {t: turns[stem][t]["text"] for t in evidence if t in turns[stem]},
                "entities_from_evidence": [{"status": s, "text": text, "from": how}
                                           for s, text, how in dict.fromkeys(e for t in evidence for e in indexes[stem].get(t, []))][:6],
                "evidence_recall": evidence_recall(evidence, retrieved),
            })
    return {"mosaic_run": str(mosaic_run), "rag_run": str(rag_run), "tally": tally, "counts": counts, "labels": CLASSES, "examples": examples}


REACH = {
    "retrieved": "held and retrieved",
    "held_not_retrieved": "held, not retrieved",
    "held_not_retrieved_exact_top_k": "held, not retrieved; exact cosine search puts it in the top k",
    "held_not_retrieved_exact_lower": "held, not retrieved; ranked below k by exact cosine search too",
    "gated_or_superseded_only": "only queued, rejected or superseded",
    "never_extracted": "never extracted",
}


def _superseding_rule(entity: dict[str, Any]) -> str:
    """Which rule superseded an entity, from the reason its last history event records."""
    reason = str((entity.get("history") or [{}])[-1].get("reason", ""))
    if reason.startswith("belief over"):
        return "slot belief"
    if reason.startswith("LLM"):
        return "LLM judge"
    return "numeric or duplicate rule" if reason else "unrecorded"


def _top(counter: Counter[str], n: int = 6) -> list[list[Any]]:
    return [[name, count] for name, count in counter.most_common(n)]


def evidence_reach(mosaic_run: Path, encode: Callable[[list[str]], np.ndarray] | None = None, top_k: int | None = None) -> dict[str, Any]:
    """Where each question's evidence sits in MOSAIC's memory, and why entities left memory (module doc)."""
    predictions = rows_by_key(mosaic_run, "predictions")
    memories = _memories(mosaic_run)
    if top_k is None:
        metrics = mosaic_run / "metrics.json"
        top_k = int(json.loads(metrics.read_text()).get("top_k", 10)) if metrics.exists() else 10
    counts = {name: 0 for name in REACH}
    held_cache: dict[str, tuple[list[dict[str, Any]], np.ndarray | None]] = {}
    indexes = {stem: turn_index(state) for stem, state in memories.items()}
    questions = [row for row in predictions.values() if row.get("evidence")]
    query_vectors = _unit_rows(encode([str(row.get("question", "")) for row in questions])) if encode and questions else None
    for i, row in enumerate(questions):
        stem = file_safe_name(f"locomo:{row.get('sample_id', row['key'].split(':')[0])}")
        if stem not in memories:
            raise SystemExit(f"{mosaic_run}/system/mosaic/{stem}.json is missing: the memory of {row.get('sample_id')} was not kept")
        evidence = set(row["evidence"])
        retrieved = row.get("retrieved_turn_ids") or [t for item in row.get("retrieved", []) for t in item.get("source_turn_ids", [])]
        if stem not in held_cache:
            held = [e for e in memories[stem].get("graph", {}).get("entities", []) if e.get("status", "active") in HELD]
            held_cache[stem] = (held, _held_vectors(memories[stem], held) if encode else None)
        held, vectors = held_cache[stem]
        from_evidence = [j for j, e in enumerate(held) if evidence & set(e.get("source_turn_ids") or [])]
        if evidence_recall(list(evidence), retrieved):
            counts["retrieved"] += 1
        elif from_evidence:
            counts["held_not_retrieved"] += 1
            if vectors is not None and query_vectors is not None:
                ranks = np.argsort(-(vectors @ query_vectors[i]))
                best = min(int(np.where(ranks == j)[0][0]) for j in from_evidence)
                counts["held_not_retrieved_exact_top_k" if best < top_k else "held_not_retrieved_exact_lower"] += 1
        elif indexes[stem].keys() & evidence:
            counts["gated_or_superseded_only"] += 1
        else:
            counts["never_extracted"] += 1
    superseded: Counter[str] = Counter()
    superseded_attributes: Counter[str] = Counter()
    queued: Counter[str] = Counter()
    queued_attributes: Counter[str] = Counter()
    for state in memories.values():
        for entity in state.get("graph", {}).get("entities", []):
            if entity.get("status") == "superseded":
                superseded[_superseding_rule(entity)] += 1
                superseded_attributes[str(entity.get("attribute") or "")] += 1
        for item in state.get("queue", []):
            queued["belief entropy > delta" if "entropy" in str(item.get("reason", "")) else "rho < rho_min"] += 1
            queued_attributes[str(item.get("entity", {}).get("attribute") or "")] += 1
    if not encode:
        counts.pop("held_not_retrieved_exact_top_k")
        counts.pop("held_not_retrieved_exact_lower")
    return {"questions_with_evidence": len(questions), "top_k": top_k, "counts": counts, "labels": {k: REACH[k] for k in counts},
            "superseded_by": dict(superseded), "superseded_attributes": _top(superseded_attributes),
            "queued_because": dict(queued), "queued_attributes": _top(queued_attributes)}


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def _held_vectors(state: dict[str, Any], held: list[dict[str, Any]]) -> np.ndarray:
    """The stored vectors of the held entities, in order (MemoryGraph.to_dict's base64 float32)."""
    blobs = state.get("graph", {}).get("vectors", {})
    missing = [e["entity_id"] for e in held if e["entity_id"] not in blobs]
    if missing:
        raise SystemExit(f"the memory has no vector for {missing[0]} (and {len(missing) - 1} more): --exact-rank needs a memory written with vectors")
    return _unit_rows(np.stack([np.frombuffer(base64.b64decode(blobs[e["entity_id"]]), dtype=np.float32) for e in held]))


def reach_markdown(reach: dict[str, Any]) -> list[str]:
    lines = [f"## Where the evidence of every question sits ({reach['questions_with_evidence']} questions with gold evidence, k = {reach['top_k']})", "",
             "| evidence | questions |", "|---|---|", *[f"| {label} | {reach['counts'][name]} |" for name, label in reach["labels"].items()], ""]
    for what, by, attributes in (("Superseded entities", "superseded_by", "superseded_attributes"),
                                 ("Entities queued by the gate", "queued_because", "queued_attributes")):
        if not reach[by]:
            lines.append(f"{what}: none.  ")
            continue
        lines.append(f"{what}, by reason: " + ", ".join(f"{k} {v}" for k, v in reach[by].items())
                     + "; most often of attribute: " + ", ".join(f"{a or '(none)'} {n}" for a, n in reach[attributes]) + ".  ")
    return lines + [""]


def to_markdown(result: dict[str, Any]) -> str:
    t = result["tally"]
    lines = [
        "# Error analysis: questions rag answers correctly and MOSAIC does not",
        "",
        f"MOSAIC run: `{result['mosaic_run']}`  ",
        f"rag run: `{result['rag_run']}`",
        "",
        f"{t['questions']} shared questions ({t['unjudged']} without a verdict from either judge left out): rag correct {t['rag_correct']}, "
        f"MOSAIC correct {t['mosaic_correct']}, both {t['both_correct']}, MOSAIC only {t['mosaic_only']}, rag only {t['rag_only']}"
        + (f" ({t['no_gold_evidence']} of them without gold evidence, not classified)" if t["no_gold_evidence"] else "") + ".",
        "",
        "| class | questions |",
        "|---|---|",
        *[f"| {label} | {result['counts'][name]} |" for name, label in result["labels"].items()],
        "",
    ]
    if result.get("evidence_reach"):
        lines += reach_markdown(result["evidence_reach"])
    for name, label in result["labels"].items():
        if not result["examples"][name]:
            continue
        lines += [f"## {label}", ""]
        for ex in result["examples"][name]:
            lines.append(f"- `{ex['key']}` (category {ex['category']}): {ex['question']} gold: *{ex['gold']}*; "
                         f"MOSAIC: *{ex['mosaic']}*; rag: *{ex['rag']}*; evidence {', '.join(ex['evidence'])}")
            for turn_id, text in ex["evidence_text"].items():
                lines.append(f"  - {turn_id}: \"{text}\"")
            for entity in ex["entities_from_evidence"]:
                lines.append(f"  - entity ({entity['status']}, {entity['from']}): {entity['text']}")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mosaic_run", type=Path, help="a finished MOSAIC LoCoMo run folder (with system/mosaic/)")
    parser.add_argument("rag_run", type=Path, help="a finished rag LoCoMo run folder over the same questions")
    parser.add_argument("--examples", type=int, default=3, help="examples shown per class")
    parser.add_argument("--out", type=Path, default=None, help="folder for error_analysis.{md,json} (default: the MOSAIC run folder)")
    parser.add_argument("--exact-rank", action="store_true",
                        help="embed the questions with the run's embedder and rank held entities by exact cosine (needs the model)")
    args = parser.parse_args(argv)
    result = analyse(args.mosaic_run, args.rag_run, args.examples)
    result["evidence_reach"] = evidence_reach(args.mosaic_run, run_embedder(args.mosaic_run).encode if args.exact_rank else None)
    out = args.out or args.mosaic_run
    out.mkdir(parents=True, exist_ok=True)
    (out / "error_analysis.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    markdown = to_markdown(result)
    (out / "error_analysis.md").write_text(markdown + "\n", encoding="utf-8")
    print(markdown)
    return result


def run_embedder(run: Path) -> Any:
    """The embedder the run used (its config.yaml's ``embedder`` block), without its cache."""
    config = OmegaConf.load(run / "config.yaml")
    block = OmegaConf.to_container(config.embedder, resolve=False)
    block.pop("cache_path", None)
    return instantiate(block)


if __name__ == "__main__":
    main()
