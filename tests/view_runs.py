"""Run folders written for the viewer's tests, shaped as eval.runner and the benchmarks write them.

Each is small and made up (no dataset text): a LoCoMo run with its own little dataset file, a conflict-suite
run with its suite, a HaluMem run with text, a MOSAIC memory store, a Zep edges file. ``locomo_run(n=2000)`` is the
full-LoCoMo-sized run the open-time test uses.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from mosaic.store import MemoryStore

CATEGORIES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"}
XSS = "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>"


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _stat(mean: float, n: int) -> dict[str, Any]:
    return {"mean": mean, "ci_low": max(0.0, mean - 0.1), "ci_high": min(1.0, mean + 0.1), "n": n}


def locomo_dataset(path: Path, sample_id: str = "conv-t", sessions: int = 3, turns: int = 8) -> Path:
    """A LoCoMo-format file with one made-up conversation (dia ids D<session>:<turn>)."""
    conversation: dict[str, Any] = {"speaker_a": "Ann", "speaker_b": "Bo"}
    for s in range(1, sessions + 1):
        conversation[f"session_{s}_date_time"] = f"1:00 pm on {s} May, 2023"
        conversation[f"session_{s}"] = [{"speaker": "Ann" if t % 2 else "Bo", "dia_id": f"D{s}:{t}", "text": f"made-up turn {s}.{t}"}
                                         for t in range(1, turns + 1)]  # fmt: skip
    path.write_text(json.dumps([{"sample_id": sample_id, "conversation": conversation, "qa": []}]), encoding="utf-8")
    return path


def locomo_run(folder: Path, n: int = 30, seed: int = 0, dataset: Path | None = None, xss_key: int | None = 1,
               finished: bool = True, retrieved: int = 10) -> Path:
    """A LoCoMo run folder of ``n`` questions; question i's verdict is random (seeded); question ``xss_key``'s
    prediction is markup that must show as text."""
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    predictions, judgements = [], []
    for i in range(n):
        category = 1 + i % 4
        evidence = [f"D{1 + i % 3}:{1 + i % 8}"]
        items = [{"text": f"memory {i}.{r} about thing {rng.randint(0, 99)}", "score": 1.0 - r / 20, "timestamp": "2023-05-01T13:00:00",
                  "source_turn_ids": evidence if r == 2 else [f"D{1 + r % 3}:{1 + (i + r + 3) % 8}"]} for r in range(retrieved)]  # fmt: skip
        predictions.append({"key": f"conv-t:q{i}", "sample_id": "conv-t", "qa_index": i, "category": category,
                            "question": f"question number {i} about thing {i % 7}?", "gold": f"gold answer {i}", "evidence": evidence,
                            "prediction": XSS if i == xss_key else f"predicted answer {i}", "retrieved": items})  # fmt: skip
        judgements.append({"key": f"conv-t:q{i}", "label": "CORRECT", "correct": rng.random() < 0.5, "reasoning": f"reason {i}"})
        judgements[-1]["label"] = "CORRECT" if judgements[-1]["correct"] else "WRONG"
    _jsonl(folder / "predictions.jsonl", predictions)
    _jsonl(folder / "judgements.jsonl", judgements)
    usage = {"calls": 12, "prompt_tokens": 1000, "completion_tokens": 100, "cached_calls": 0}
    _jsonl(folder / "ingest.jsonl", [{"key": "conv-t", "n_turns": 24, "usage_reported": usage, "usage_metered": usage, "add_latency_s": [1.0]}])
    (folder / "config.yaml").write_text(f"benchmark:\n  name: locomo\n  path: {dataset or ''}\nsystem:\n  name: rag\nablation_name: none\n")
    (folder / "overrides.json").write_text(json.dumps(["experiment=locomo"]))
    if finished:
        right = [j["correct"] for j in judgements]
        per_category = {c: {"label": label, "n": sum(1 for i in range(n) if 1 + i % 4 == int(c)),
                            "judge": _stat(0.5, n // 4), "f1": _stat(0.3, n // 4)} for c, label in CATEGORIES.items()}  # fmt: skip
        metrics = {"benchmark": "locomo", "benchmark_target": "eval.benchmarks.locomo.LoCoMoBenchmark", "system": "rag",
                   "category_labels": CATEGORIES, "main_metric": sum(right) / n,
                   "overall": {"n": n, "judge": _stat(sum(right) / n, n), "f1": _stat(0.3, n)}, "per_category": per_category,
                   "metadata": {"git_sha": "0" * 40, "benchmark": "locomo", "system": "rag", "ablation": "none",
                                "llm_model_id": "made-up-llm", "judge_model_id": "made-up-judge", "finished_at": "2026-12-07T00:00:00+00:00",
                                "llm_usage": {"calls": 2 * n, "prompt_tokens": 100 * n, "completion_tokens": 5 * n}}}  # fmt: skip
        (folder / "metrics.json").write_text(json.dumps(metrics))
    return folder


def conflict_run(folder: Path, suite: Path) -> Path:
    """A conflict-suite run of three cases over its own made-up suite: detected, missed, false alarm."""
    folder.mkdir(parents=True)
    suite.write_text(json.dumps({"name": "made_up", "description": "test suite", "split": "dev",
                                 "contexts": {"home": [{"speaker": "Ann", "text": "The rent is 900 a month."},
                                                       {"speaker": "Ann", "text": "The car is blue."}]},
                                 "cases": [{"id": "c1", "context": "home", "probe": {"speaker": "Ann", "text": "The rent is 1,400 a month."},
                                            "conflict": True, "type": "numeric", "explicit": True, "conflicts_with": [0]}]}))  # fmt: skip
    base = {"context": "home", "llm_calls": 2, "llm_calls_by_purpose": {"extraction": 1, "conflict": 1}, "seconds": 1.0, "stored": 1, "queued": []}
    _jsonl(folder / "cases.jsonl", [
        {**base, "id": "c1", "conflict": True, "type": "numeric", "probe": "The rent is 1,400 a month.", "conflicts_with": ["home:0"],
         "detected_strict": True, "detected_lenient": True, "verdicts": ["update"],
         "events": [{"kind": "update", "new_text": "rent 1,400", "old_text": "rent 900", "old_source_turn_ids": ["home:0"], "reason": "numbers differ"}]},
        {**base, "id": "c2", "conflict": True, "type": "semantic", "probe": "The car is red.", "conflicts_with": ["home:1"],
         "detected_strict": False, "detected_lenient": False, "verdicts": [], "events": [], "miss_reason": "no event"},
        {**base, "id": "n1", "conflict": False, "type": None, "probe": "Ann likes tea.", "conflicts_with": [],
         "detected_strict": False, "detected_lenient": True, "verdicts": ["flag"], "events": [{"kind": "flag", "new_text": "tea", "old_text": "car"}]},
    ])  # fmt: skip
    (folder / "config.yaml").write_text(f"benchmark:\n  name: conflict\n  suite: {suite}\nsystem:\n  name: mosaic\nablation_name: none\n")
    metrics = {"detection_rate": _stat(0.5, 2), "false_alarm_rate": _stat(1.0, 1), "n_cases": 3,
               "metadata": {"benchmark": "conflict", "system": "mosaic", "ablation": "none", "git_sha": "1" * 40}}  # fmt: skip
    (folder / "metrics.json").write_text(json.dumps(metrics))
    return folder


def halumem_run(folder: Path) -> Path:
    """A HaluMem run with text: two questions, one update point, two memory points."""
    folder.mkdir(parents=True)
    where = {"uuid": "u0", "session": 0}
    _jsonl(folder / "halumem_qa.jsonl", [
        {**where, "key": "u0:0:q0", "question": "Where does Ann live?", "gold": "Oslo", "response": "Oslo", "question_type": "Basic Fact Recall",
         "label": "Correct", "reason": "same city"},
        {**where, "key": "u0:0:q1", "question": "What does Ann drink?", "gold": "tea", "response": "coffee", "question_type": "Memory Conflict",
         "label": "Hallucination", "reason": "wrong drink"},
    ])  # fmt: skip
    _jsonl(folder / "halumem_updates.jsonl", [
        {**where, "key": "u0:0:3", "memory_content": "Ann now lives in Oslo", "original_memories": ["Ann lives in Bergen"],
         "returned": ["Ann lives in Bergen"], "memory_type": "Persona Memory", "label": "Omission", "reason": "old value only"},
    ])  # fmt: skip
    _jsonl(folder / "halumem_integrity.jsonl", [
        {**where, "key": "u0:0:1", "memory_content": "Ann likes tea", "memory_type": "Persona Memory", "score": 1, "reason": "stored"},
        {**where, "key": "u0:0:2", "memory_content": "Ann has a dog", "memory_type": "Event Memory", "score": 0, "reason": "absent"},
    ])  # fmt: skip
    (folder / "config.yaml").write_text("benchmark:\n  name: halumem\nsystem:\n  name: rag\nablation_name: none\n")
    metrics = {"benchmark": "halumem", "system": "rag", "main_metric": 0.5, "qa": {"correct": _stat(0.5, 2)},
               "metadata": {"benchmark": "halumem", "system": "rag", "ablation": "none"}}  # fmt: skip
    (folder / "metrics.json").write_text(json.dumps(metrics))
    return folder


def mosaic_store(folder: Path) -> Path:
    """A MOSAIC namespace file under <run>/system/mosaic/: one entry superseded by another, one queued."""
    def entity(eid: str, text: str, status: str, history: list[dict[str, Any]]) -> dict[str, Any]:
        return {"entity_id": eid, "text": text, "type": "persona", "value": text.split()[-1], "confidence": 0.9, "session_time": "2023-05-01T13:00:00",
                "source_turn_ids": ["D1:1"], "evidence": "made-up turn", "belief": {text.split()[-1]: 1.0}, "history": history, "status": status}  # fmt: skip

    old = entity("e-old", "Ann lives in Bergen", "superseded", [{"event": "superseded", "by": "e-new", "reason": "moved", "session_time": "2023-06-01"}])
    new = entity("e-new", "Ann lives in Oslo", "active", [])
    state = {"graph": {"entities": [old, new]}, "queue": [{"entity": entity("e-q", "Ann maybe likes jazz", "queued", []), "reason": "rho 0.4 < 0.6"}],
             "rejected": []}  # fmt: skip
    path = folder / "system" / "mosaic" / "locomo_conv-t.json"
    MemoryStore(path).save(state)
    return path


ZEP_ODD_FACT = 'Ann "moved" to <b>Oslo</b>\nfrom Bergen \u00e9'


def zep_edges(folder: Path, damaged: bool = False) -> Path:
    """A Zep edges file under <run>/system/zep_edges/, shaped as baselines.zep writes it: an edge graphiti expired
    (invalid_at, expired_at and the edge that caused it), the current edge that did (markup and quotes in its fact),
    an edge that arrived with an end date (graphiti expires it at once; nothing expired it) and one with an end date
    but no expiry (shown as ended). ``damaged``: a torn line after the first."""
    def edge(uuid: str, fact: str, valid: str, invalid: str | None, expired: str | None, by: str | None, turn: str) -> dict[str, Any]:
        return {"uuid": uuid, "group": "locomo_conv-t", "relation": "LIVES_IN", "fact": fact, "valid_at": valid, "invalid_at": invalid,
                "expired_at": expired, "created_at": valid, "episodes": [f"ep-{turn}"], "source_turn_ids": [turn], "expired_by": by}  # fmt: skip

    rows = [edge("z-old", "Ann lives in Bergen", "2023-05-01T00:00:00+00:00", "2023-06-01T00:00:00+00:00", "2026-12-07T10:00:00+00:00", "z-new", "D1:1"),
            edge("z-new", ZEP_ODD_FACT + XSS, "2023-06-01T00:00:00+00:00", None, None, None, "D2:1"),
            edge("z-job", "Ann worked at the bakery until 2022", "2020-01-01T00:00:00+00:00", "2022-01-01T00:00:00+00:00", None, None, "D2:3"),
            edge("z-trip", "Ann was in Rome in 2021", "2021-03-01T00:00:00+00:00", "2021-03-09T00:00:00+00:00", "2026-12-07T10:05:00+00:00", None, "D2:4")]  # fmt: skip
    lines = [json.dumps(r) for r in rows]
    if damaged:
        lines.insert(1, '{"uuid": "z-torn", "fact": "cut')
    path = folder / "system" / "zep_edges" / "locomo_conv-t.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
