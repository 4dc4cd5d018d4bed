"""A run folder as plain data for the viewer: header, metric chart, item tables, memory stores.

Read-only: rows come through ``eval.rows.read_rows`` (and the benchmarks' outcome readers,
eval/benchmarks/<name>/compare.py, that ``scripts.compare_runs`` uses, so a verdict on the page is the verdict the
paired comparison counts),
MOSAIC's stores as the plain JSON they are saved as, Mem0's history through SQLite opened immutable, Zep's entity
edges from the JSON lines its adapter writes after each write (``system/zep_edges/<group>.jsonl``).
A damaged JSON line is skipped by ``read_rows``, which names its file and line; those messages are kept
and shown on the page. Dataset text (LoCoMo evidence turns, conflict-suite context turns) is read from the
files the run's config names, and the page says when a file is missing or differs from the run's.
"""

from __future__ import annotations

import functools
import json
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from core.api import HarnessError
from core.paths import sha256_of
from eval.rows import SCORED_ROW_FIELD, read_rows, scores

REPO = Path(__file__).resolve().parents[2]
# A folder is a run when it holds one of these (eval.runner writes config.yaml and provenance.json first,
# metrics.json last).
RUN_MARKERS = ("metrics.json", "config.yaml", "provenance.json")
# The headline metric of each benchmark's index row: where it sits in metrics.json and what it is called.
HEADLINE = {"locomo": (("overall", "judge"), "judge"), "halumem": (("qa", "correct"), "QA correct"),
            "conflict": (("detection_rate",), "detection")}  # fmt: skip
# The row files each benchmark's item view needs, and what each holds (for "what is missing" lines).
ROW_FILES = {"locomo": {"predictions.jsonl": "answers", "judgements.jsonl": "judge verdicts"},
             "conflict": {"cases.jsonl": "the conflict cases"},
             "halumem": {"halumem_qa.jsonl": "questions", "halumem_updates.jsonl": "update points"}}  # fmt: skip


class ViewError(HarnessError, ValueError):
    """A folder the viewer cannot show; the message names it and what to pass instead."""


@contextmanager
def row_warnings() -> Iterator[list[str]]:
    """Collect what ``eval.rows`` reports while reading (a damaged line: its file and line number)."""
    found: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage()
            if message not in found:  # a file read twice (rows, then outcomes) is reported once
                found.append(message)

    handler = Keep(logging.WARNING)
    logger = logging.getLogger("eval.rows")
    logger.addHandler(handler)
    try:
        yield found
    finally:
        logger.removeHandler(handler)


def read_json(path: Path) -> dict[str, Any]:
    """A run's JSON record; a damaged one fails naming its file and line."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ViewError(f"{path}: line {err.lineno}: not valid JSON ({err.msg}); the run wrote it damaged: rerun its command") from err
    except UnicodeDecodeError as err:
        raise ViewError(f"{path}: not UTF-8 text ({err.reason}); the run wrote it damaged: rerun its command") from err
    if not isinstance(data, dict):
        raise ViewError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data


def _config(folder: Path) -> dict[str, Any]:
    path = folder / "config.yaml"
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ViewError(f"{path}: not valid YAML ({' '.join(str(err).split())})") from err
    return data if isinstance(data, dict) else {}


def check_run_folder(folder: Path) -> None:
    if not folder.is_dir():
        raise ViewError(f"{folder}: no such folder; pass a run folder (results/runs/<benchmark>/<system>/<ablation>/<hash>)")
    if not any((folder / name).is_file() for name in RUN_MARKERS):
        raise ViewError(f"{folder} is not a run folder (it holds none of {', '.join(RUN_MARKERS)}); "
                        "pass results/runs/<benchmark>/<system>/<ablation>/<hash>, or nothing for the index")  # fmt: skip


def _meta(metrics: dict[str, Any], name: str) -> Any:
    return (metrics.get("metadata") or {}).get(name) or metrics.get(name)


def _stat(value: Any) -> dict[str, Any] | None:
    if isinstance(value, dict) and isinstance(value.get("mean"), int | float):
        return {"mean": value["mean"], "lo": value.get("ci_low"), "hi": value.get("ci_high"), "n": value.get("n")}
    return None


def summary(folder: Path) -> dict[str, Any]:
    """The index row of a run folder: what it measured, whether it finished, its headline metric."""
    check_run_folder(folder)
    config = _config(folder)
    metrics = read_json(folder / "metrics.json") if (folder / "metrics.json").is_file() else {}
    parts = folder.resolve().parts
    benchmark = _meta(metrics, "benchmark") or (config.get("benchmark") or {}).get("name") or parts[-4]
    system = _meta(metrics, "system") or (config.get("system") or {}).get("name") or parts[-3]
    ablation = _meta(metrics, "ablation") or config.get("ablation_name") or parts[-2]
    path, label = HEADLINE.get(str(benchmark), ((), ""))
    node: Any = metrics
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    headline = _stat(node)
    n = (metrics.get("overall") or {}).get("n") or metrics.get("n_cases") or (headline or {}).get("n")
    try:
        shown = str(folder.resolve().relative_to(REPO))
    except ValueError:
        shown = str(folder)
    return {"path": shown, "benchmark": str(benchmark), "system": str(system), "ablation": str(ablation), "hash": folder.name,
            "published": "published" in parts, "finished": bool(metrics), "n": n, "headline": headline, "headline_name": label,
            "code_sha": _meta(metrics, "git_sha"), "git_dirty": _meta(metrics, "git_dirty"), "date": _meta(metrics, "finished_at")}  # fmt: skip


def _header(folder: Path, metrics: dict[str, Any]) -> dict[str, Any]:
    meta = metrics.get("metadata") or {}
    provenance = read_json(folder / "provenance.json") if (folder / "provenance.json").is_file() else {}
    usage = meta.get("llm_usage") or {}
    judge_usage = meta.get("judge_usage") if isinstance(meta.get("judge_usage"), dict) else None
    models = {"answerer and system LLM (extraction, conflict checks)": meta.get("llm_model_id"),
              "judge": meta.get("judge_model_id"), "embedder": meta.get("embedder_model_id")}  # fmt: skip
    return {
        "config_yaml": (folder / "config.yaml").read_text(encoding="utf-8") if (folder / "config.yaml").is_file() else "",
        "overrides": meta.get("overrides") or (read_json_list(folder / "overrides.json")),
        "models": {k: v for k, v in models.items() if v},
        "code": {"git_sha": meta.get("git_sha"), "git_sha_start": meta.get("git_sha_start"), "dirty": meta.get("git_dirty"),
                 "changed_during_run": meta.get("code_changed_during_run")},  # fmt: skip
        "input_files": meta.get("input_files") or provenance.get("inputs") or {},
        "usage": {"LLM calls": usage.get("calls"), "prompt tokens": usage.get("prompt_tokens"),
                  "completion tokens": usage.get("completion_tokens"), "calls served by the cache": usage.get("cached_calls"),
                  "judge calls (own client)": (judge_usage or {}).get("calls"),
                  "wall seconds (last invocation)": meta.get("wall_s_this_invocation"),
                  "invocations": meta.get("invocations") or len(provenance.get("invocations") or []) or None},  # fmt: skip
        "by_purpose": usage.get("by_purpose") or {},
        "finished_at": meta.get("finished_at"),
        "failures": metrics.get("failures"),
    }


def read_json_list(path: Path) -> list[Any]:
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ViewError(f"{path}: line {err.lineno}: not valid JSON ({err.msg})") from err
    return data if isinstance(data, list) else []


_COUNTS = ("calls_per_case", "tokens", "seconds", "_s")  # stats with a CI that are counts, not rates: not drawn on a 0-100 scale


def chart(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """Groups of bars with CIs: LoCoMo per category (judge, F1, evidence recall), the others every stat found."""
    groups: list[dict[str, Any]] = []
    if "per_category" in metrics or "overall" in metrics:
        wanted = ("judge", "f1", "evidence_recall")
        blocks = [("overall", metrics.get("overall") or {})]
        blocks += [(str((v or {}).get("label") or f"category {c}"), v or {}) for c, v in sorted((metrics.get("per_category") or {}).items())]
        for label, block in blocks:
            bars = [{"name": name, **stat} for name in wanted if (stat := _stat(block.get(name)))]
            if bars:
                groups.append({"label": f"{label} (n={block.get('n')})" if block.get("n") is not None else label, "bars": bars})
        return groups
    found: dict[str, list[dict[str, Any]]] = {}

    def walk(path: list[str], value: Any) -> None:
        stat = _stat(value)
        rate = stat is not None and stat["lo"] is not None and 0 <= stat["lo"] <= stat["hi"] <= 1 and not path[-1].endswith(_COUNTS)
        if stat and rate:
            found.setdefault(" / ".join(path[:-1]) or "overall", []).append({"name": path[-1], **stat})
        elif isinstance(value, dict):
            for key, inner in value.items():
                if key not in ("metadata", "system_metrics", "slice", "bootstrap"):
                    walk([*path, str(key)], inner)

    walk([], metrics)
    return [{"label": label, "bars": bars} for label, bars in found.items()]


# ---- dataset text --------------------------------------------------------------------------------
def _dataset_path(config: dict[str, Any], key: str) -> Path | None:
    raw = (config.get("benchmark") or {}).get(key)
    if not isinstance(raw, str) or not raw:
        return None
    path = Path(raw).expanduser()
    for candidate in (path, REPO / path):
        if candidate.is_file():
            return candidate
    return path


def _dataset_note(path: Path | None, expected: str | None, what: str) -> str | None:
    """Why dataset text may be missing or not the run's own, or None when the file is the run's."""
    if path is None:
        return f"the run's config names no {what} file: its text is not shown"
    if not path.is_file():
        return f"{path} is not on this machine ({what}; `python -m scripts.download_data` fetches it): its text is not shown"
    if expected and _sha256(str(path)) != expected:
        return f"{path} differs from the file the run read (sha256 {expected[:12]}): the {what} text shown may not be the run's"
    return None


@functools.lru_cache(maxsize=8)
def _sha256(path: str) -> str:
    return sha256_of(path)


@functools.lru_cache(maxsize=4)
def _locomo_turns(path: str) -> dict[str, dict[str, str]]:
    """sample id -> dia id -> "speaker: text" (with an image caption when the turn shares a photo)."""
    from eval.benchmarks.locomo.data import load_locomo

    return {conv.sample_id: {t.turn_id: f"{t.speaker}: {t.text}" for s in conv.sessions for t in s.turns} for conv in load_locomo(path)}


@functools.lru_cache(maxsize=8)
def _suite_turns(path: str) -> dict[str, str]:
    from eval.benchmarks.conflict.suite import load_suite, turn_id

    suite = load_suite(path)
    return {turn_id(ctx, i): f"{t['speaker']}: {t['text']}" for ctx, turns in suite.contexts.items() for i, t in enumerate(turns)}


# ---- items ----------------------------------------------------------------------------------------
def _fmt(value: Any, digits: int = 3) -> Any:
    return round(value, digits) if isinstance(value, float) else value


def locomo_table(folder: Path, metrics: dict[str, Any], config: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    from eval.benchmarks.locomo.compare import locomo_outcomes
    from eval.metrics import token_f1

    predictions = read_rows(folder / "predictions.jsonl")
    judged = {row["key"]: row for row in read_rows(folder / "judgements.jsonl")} if (folder / "judgements.jsonl").is_file() else {}
    # the verdicts scripts.compare_runs pairs: a judgement of another answer than the one on file does not count
    outcomes = locomo_outcomes(folder) if judged else {}
    labels = metrics.get("category_labels") or {}
    data_path = _dataset_path(config, "path")
    note = _dataset_note(data_path, (_meta(metrics, "input_files") or {}).get("benchmark.path"), "LoCoMo")
    if note:
        notes.append(note)
    turns = _locomo_turns(str(data_path)) if data_path is not None and data_path.is_file() else {}
    items = []
    for row in predictions:
        key = str(row["key"])
        verdict = judged.get(key)
        outcome = outcomes.get(key)
        if outcome is not None:
            state, label = ("right", "CORRECT") if outcome["correct"] else ("wrong", "WRONG")
        elif verdict is not None and SCORED_ROW_FIELD in verdict and not scores(verdict, row):
            state, label = "unjudged", "judged another answer"
        elif verdict is not None and verdict.get("failure"):
            state, label = "unjudged", "judge failed"
        else:
            state, label = "unjudged", "not judged"
        evidence = [str(e) for e in row.get("evidence") or []]
        gold_ids = set(evidence)
        conv = turns.get(str(row.get("sample_id")), {})
        retrieved = []
        for rank, item in enumerate(row.get("retrieved") or [], start=1):
            ids = [str(t) for t in item.get("source_turn_ids") or []]
            retrieved.append([rank, _fmt(item.get("score")), item.get("timestamp"), ", ".join(ids), item.get("text"), bool(gold_ids & set(ids))])
        category = row.get("category")
        group = str(labels.get(str(category), category))
        detail = [
            {"title": "Question", "text": row.get("question")},
            {"title": "Gold answer", "text": row.get("gold")},
            {"title": "Prediction", "text": row.get("prediction")},
            {"title": f"Judge: {label}", "text": (verdict or {}).get("reasoning") or (verdict or {}).get("failure") or ""},
            {"title": "Gold evidence turns (dataset text)",
             "rows": [[e, conv.get(e, "(not in the dataset file on this machine)")] for e in evidence] or [["", "no evidence listed"]],
             "head": ["turn", "text"]},
            {"title": f"Retrieved memories ({sum(r[-1] for r in retrieved)} of {len(retrieved)} cite gold evidence)",
             "head": ["rank", "score", "timestamp", "source turns", "text"], "rows": [r[:-1] for r in retrieved], "mark": [r[-1] for r in retrieved]},
        ]  # fmt: skip
        if row.get("failure"):
            detail.insert(3, {"title": "Answer failure", "text": str(row.get("failure"))})
        f1 = token_f1(row.get("prediction"), row.get("gold"))
        items.append({"key": key, "group": group, "state": state, "label": label,
                      "cols": [key, group, row.get("question"), row.get("gold"), row.get("prediction"), label, round(f1, 2),
                               sum(1 for r in retrieved if r[-1])],
                      "detail": detail})  # fmt: skip
    return {"id": "questions", "title": "Questions", "group_name": "category",
            "head": ["key", "category", "question", "gold", "prediction", "verdict", "F1", "retrieved citing gold"], "items": items}  # fmt: skip


def conflict_table(folder: Path, metrics: dict[str, Any], config: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    from eval.benchmarks.conflict.compare import conflict_outcomes

    cases = read_rows(folder / "cases.jsonl", "id")
    outcomes = conflict_outcomes(folder)
    suite_path = _dataset_path(config, "suite") or (Path(metrics["suite_path"]) if metrics.get("suite_path") else None)
    if suite_path is not None and not suite_path.is_file() and (REPO / suite_path).is_file():
        suite_path = REPO / suite_path
    note = _dataset_note(suite_path, (_meta(metrics, "input_files") or {}).get("benchmark.suite"), "conflict suite")
    if note:
        notes.append(note)
    turns = _suite_turns(str(suite_path)) if suite_path is not None and suite_path.is_file() else {}
    items = []
    for case in cases:
        key = str(case["id"])
        outcome = outcomes.get(key, {})
        conflicting = bool(case.get("conflict"))
        if conflicting:
            right = bool(outcome.get("detected"))
            state, label = ("right", "detected") if right else ("wrong", "missed")
            expected = "a conflict event (flag or update) against the held turn"
        else:
            alarm = bool(outcome.get("false_alarm"))
            state, label = ("wrong", "false alarm") if alarm else ("right", "no event (right)")
            expected = "no conflict event (the probe is consistent)"
        actions = ", ".join(case.get("verdicts") or []) or ("queued by the gate" if case.get("queued") else "stored, no event" if case.get("stored") else "none")
        held = [[t, turns.get(t, "(not in the suite file on this machine)")] for t in case.get("conflicts_with") or []]
        events = [[e.get("kind") or e.get("verdict"), e.get("new_text"), e.get("old_text"), ", ".join(e.get("old_source_turn_ids") or []), e.get("reason")]
                  for e in case.get("events") or []]  # fmt: skip
        group = str(case.get("type") or "non-conflicting")
        detail = [
            {"title": "Injected probe", "text": case.get("probe")},
            {"title": "Held turn(s) it conflicts with", "head": ["turn", "text"], "rows": held or [["", "none: a consistent probe"]]},
            {"title": "Expected", "text": expected},
            {"title": f"Action taken: {actions}", "text": case.get("reason") or ""},
            {"title": "Conflict events", "head": ["event", "new", "old", "old source turns", "reason"], "rows": events},
            {"title": "Miss reason", "text": case.get("miss_reason") or ""},
        ]
        items.append({"key": key, "group": group, "state": state, "label": label,
                      "cols": [key, group, case.get("context"), case.get("probe"), actions, label], "detail": detail})  # fmt: skip
    return {"id": "cases", "title": "Conflict cases", "group_name": "type",
            "head": ["case", "type", "context", "probe", "action taken", "outcome"], "items": items}  # fmt: skip


def _halumem_state(label: Any) -> str:
    return "right" if label == "Correct" else "unjudged" if label is None else "wrong"


def halumem_tables(folder: Path) -> list[dict[str, Any]]:
    from eval.benchmarks.halumem.public import run_rows

    rows = run_rows(folder)
    text_left_out = (folder / "PUBLISHED.md").is_file()
    missing = " (published without text: the row's text stayed on the machine that ran it)" if text_left_out else ""
    tables = []
    qa = []
    for row in rows.get("qa", []):
        label = row.get("label")
        detail = [{"title": "Question", "text": row.get("question", missing)}, {"title": "Gold answer", "text": row.get("gold", missing)},
                  {"title": "Response", "text": row.get("response", missing)},
                  {"title": f"Judge: {label}", "text": row.get("reason") or row.get("failure") or ""},
                  {"title": "Evidence", "head": ["gold fact ids", "retrieved fact ids", "evidence held now", "ever held"],
                   "rows": [[", ".join(map(str, row.get("evidence_fact_ids") or [])), ", ".join(map(str, row.get("retrieved_fact_ids") or [])),
                             row.get("evidence_held"), row.get("evidence_ever_held")]]}]  # fmt: skip
        group = str(row.get("question_type"))
        qa.append({"key": str(row["key"]), "group": group, "state": _halumem_state(label), "label": str(label),
                   "cols": [row["key"], group, row.get("question", ""), row.get("gold", ""), row.get("response", ""), str(label)], "detail": detail})  # fmt: skip
    tables.append({"id": "questions", "title": "Questions", "group_name": "question type",
                   "head": ["key", "question type", "question", "gold", "response", "verdict"], "items": qa})  # fmt: skip
    updates = []
    for row in rows.get("updates", []):
        label = row.get("label")
        originals = row.get("original_memories")
        returned = row.get("returned")
        detail = [{"title": "Original memory (before the update)", "text": "\n".join(originals) if originals is not None else missing},
                  {"title": "New value (the update point)", "text": row.get("memory_content", missing)},
                  {"title": f"What the system returned ({row.get('n_returned', len(returned or []))} items)",
                   "head": ["rank", "text"], "rows": [[i + 1, t] for i, t in enumerate(returned or [])]},
                  {"title": f"Verdict: {label}", "text": row.get("reason") or row.get("failure") or ""}]  # fmt: skip
        group = str(row.get("memory_type"))
        updates.append({"key": str(row["key"]), "group": group, "state": _halumem_state(label), "label": str(label),
                        "cols": [row["key"], group, row.get("memory_content", ""), str(label)], "detail": detail})  # fmt: skip
    tables.append({"id": "updates", "title": "Update points", "group_name": "memory type",
                   "head": ["key", "memory type", "new value", "verdict"], "items": updates})  # fmt: skip
    points = []
    for row in rows.get("integrity", []):
        score = row.get("score")
        label = "extracted" if score == 1 else "partly extracted" if isinstance(score, int | float) and score > 0 else "not extracted"
        state = "unjudged" if row.get("failure") else "right" if score == 1 else "wrong"
        group = str(row.get("memory_type"))
        detail = [{"title": "Memory point", "text": row.get("memory_content", missing)},
                  {"title": f"Judge: {label} (score {score})", "text": row.get("reason") or row.get("failure") or ""},
                  {"title": "Point", "head": ["source", "interference", "importance", "memories stored in the session"],
                   "rows": [[row.get("memory_source"), row.get("is_interference"), row.get("importance"), row.get("n_stored")]]}]  # fmt: skip
        points.append({"key": str(row["key"]), "group": group, "state": state, "label": label,
                       "cols": [row["key"], group, row.get("memory_content", ""), score, label], "detail": detail})  # fmt: skip
    if points:
        tables.append({"id": "points", "title": "Memory points (extraction)", "group_name": "memory type",
                       "head": ["key", "memory type", "memory point", "score", "verdict"], "items": points})  # fmt: skip
    links = []
    for row in rows.get("update_links", []):
        for point in row.get("points") or []:
            key = f"{row['key']}:{point['index']}"
            outcome = str(point.get("outcome"))
            links.append({"key": key, "group": outcome, "state": "right" if outcome == "right" else "wrong", "label": outcome,
                          "cols": [key, outcome, point.get("targets_held"), point.get("events"), ", ".join(point.get("verdicts") or [])],
                          "detail": [{"title": "Update link at save time", "head": ["outcome", "targets held", "events", "verdicts"],
                                      "rows": [[outcome, point.get("targets_held"), point.get("events"), ", ".join(point.get("verdicts") or [])]]}]})  # fmt: skip
    if links:
        tables.append({"id": "links", "title": "Update links (save-time check)", "group_name": "outcome",
                       "head": ["point", "outcome", "targets held", "events", "verdicts"], "items": links})  # fmt: skip
    return tables


# ---- memory stores --------------------------------------------------------------------------------
def _belief(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v:.2f}" if isinstance(v, int | float) else f"{k}: {v}" for k, v in value.items())
    return "" if value is None else str(value)


def mosaic_stores(folder: Path, notes: list[str]) -> list[dict[str, Any]]:
    """Every MOSAIC namespace file under system/mosaic/: entries with their history, the gate's queue, rejections."""
    stores = []
    for path in sorted((folder / "system" / "mosaic").glob("*.json")):
        # The store's documented envelope ({"schema", "checksum", "state"}), read as plain JSON: eval/ imports
        # nothing from mosaic/, and a viewer needs no checksum (MOSAIC checks it when it loads its own store).
        try:
            state = json.loads(path.read_text(encoding="utf-8")).get("state")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as err:
            notes.append(f"memory file {path} cannot be read ({err}); not shown")
            continue
        if not isinstance(state, dict) or not isinstance(state.get("graph"), dict) or not isinstance(state["graph"].get("entities"), list):
            notes.append(f"memory file {path} lacks the state/graph/entities layout MOSAIC writes; not shown")
            continue
        entities = state["graph"]["entities"]
        text_of = {e.get("entity_id"): e.get("text") for e in entities}
        replaced: dict[str, list[str]] = {}
        for e in entities:
            for event in e.get("history") or []:
                if event.get("by"):
                    replaced.setdefault(event["by"], []).append(f"{event.get('event')}: {e.get('text')}")
        rows = []
        for e in entities:
            history = [" ".join(filter(None, [str(h.get("event")), f"by \u201c{text_of.get(h['by'], h['by'])}\u201d:" if h.get("by") else "",
                                              str(h.get("reason") or ""), f"({h['session_time']})" if h.get("session_time") else ""]))
                       for h in e.get("history") or []]  # fmt: skip
            rows.append([e.get("entity_id"), e.get("text"), e.get("type"), e.get("status"), e.get("session_time"),
                         ", ".join(e.get("source_turn_ids") or []), e.get("evidence"), _fmt(e.get("confidence"), 2), _belief(e.get("belief")),
                         "\n".join(history), "\n".join(replaced.get(e.get("entity_id"), []))])  # fmt: skip
        for item in state.get("queue") or []:
            e = item.get("entity") or {}
            rows.append([e.get("entity_id"), e.get("text"), e.get("type"), "queued", e.get("session_time"), ", ".join(e.get("source_turn_ids") or []),
                         e.get("evidence"), _fmt(e.get("confidence"), 2), _belief(e.get("belief")), str(item.get("reason") or ""), ""])  # fmt: skip
        for item in state.get("rejected") or []:
            e = item.get("entity") if isinstance(item, dict) and "entity" in item else item
            e = e if isinstance(e, dict) else {"text": str(e)}
            rows.append([e.get("entity_id"), e.get("text"), e.get("type"), "rejected", e.get("session_time"), ", ".join(e.get("source_turn_ids") or []),
                         e.get("evidence"), _fmt(e.get("confidence"), 2), _belief(e.get("belief")),
                         str((item.get("reason") if isinstance(item, dict) else "") or ""), ""])  # fmt: skip
        stores.append({"name": f"MOSAIC: {path.stem}", "status_col": 3,
                       "head": ["id", "text", "type", "status", "time", "source turns", "evidence", "confidence", "belief",
                                "history (what happened to it, by which incoming fact)", "replaced (entries this one superseded)"],
                       "rows": rows})  # fmt: skip
    return stores


def mem0_stores(folder: Path) -> list[dict[str, Any]]:
    """Mem0's history table (every ADD, UPDATE, DELETE with the old and new text), opened read-only."""
    stores = []
    for path in sorted((folder / "system").glob("**/history.db")):
        connection = sqlite3.connect(f"file:{path.resolve()}?mode=ro&immutable=1", uri=True)
        try:
            rows = connection.execute("SELECT memory_id, event, old_memory, new_memory, created_at FROM history ORDER BY created_at").fetchall()
        except sqlite3.Error:
            continue
        finally:
            connection.close()
        stores.append({"name": f"Mem0 history: {path.relative_to(folder)}", "status_col": 1,
                       "head": ["memory id", "event", "old text", "new text", "time"], "rows": [list(r) for r in rows]})  # fmt: skip
    return stores


def _edge_status(edge: dict[str, Any]) -> str:
    """graphiti's two end marks: ``expired_at`` (when it stopped believing the edge: a contradicting edge superseded
    it, or it arrived with an end date) and ``invalid_at`` (when the fact stopped holding). graphiti-core 0.31 sets
    both together; an end date without an expiry is shown as "ended", not as current."""
    return "expired" if edge.get("expired_at") else "ended" if edge.get("invalid_at") else "current"


def zep_stores(folder: Path) -> list[dict[str, Any]]:
    """Zep's entity edges per graph (one file per namespace, as it stood after the namespace's last write): current,
    expired or ended, with graphiti's dates, the turns behind each edge, and which edge caused an expiry."""
    stores = []
    for path in sorted((folder / "system" / "zep_edges").glob("*.jsonl")):
        edges = read_rows(path, key_field="uuid")  # a damaged line is named by file and line (row_warnings)
        fact_of = {str(e["uuid"]): e.get("fact") for e in edges}
        caused: dict[str, list[str]] = {}
        for e in edges:
            if e.get("expired_by"):
                caused.setdefault(str(e["expired_by"]), []).append(f"{_edge_status(e)}: \u201c{e.get('fact')}\u201d ({e['uuid']})")
        rows = [[e["uuid"], e.get("fact"), e.get("relation"), _edge_status(e), e.get("valid_at"), e.get("invalid_at"), e.get("expired_at"),
                 e.get("created_at"), ", ".join(e.get("source_turn_ids") or []),
                 f"\u201c{fact_of.get(str(e['expired_by']))}\u201d ({e['expired_by']})" if e.get("expired_by") else "",
                 "\n".join(caused.get(str(e["uuid"]), []))] for e in edges]  # fmt: skip
        stores.append({"name": f"Zep edges: {path.stem}", "status_col": 3,
                       "head": ["edge", "fact", "relation", "status", "valid at", "invalid at", "expired at", "created at", "source turns",
                                "expired by (the edge that made graphiti expire it)", "expired (edges this one made graphiti expire)"],
                       "rows": rows})  # fmt: skip
    return stores


# ---- the whole run --------------------------------------------------------------------------------
def read_run(folder: Path) -> dict[str, Any]:
    """Everything the run page shows. An unfinished run gives a page that says what is missing."""
    row = summary(folder)
    config = _config(folder)
    metrics = read_json(folder / "metrics.json") if (folder / "metrics.json").is_file() else {}
    missing = [] if metrics else ["metrics.json (the run has not finished: rerun its command to finish it; the rows so far are shown)"]
    kind = row["benchmark"]
    for name, what in ROW_FILES.get(kind, {}).items():
        if not (folder / name).is_file():
            missing.append(f"{name} ({what})")
    notes: list[str] = []
    tables: list[dict[str, Any]] = []
    with row_warnings() as damaged:
        if kind == "locomo" and (folder / "predictions.jsonl").is_file():
            tables = [locomo_table(folder, metrics, config, notes)]
        elif kind == "conflict" and (folder / "cases.jsonl").is_file():
            tables = [conflict_table(folder, metrics, config, notes)]
        elif kind == "halumem" and any(folder.glob("halumem_*.jsonl")):
            tables = halumem_tables(folder)
        stores = [*mosaic_stores(folder, notes), *mem0_stores(folder), *zep_stores(folder)]
    return {**row, "header": _header(folder, metrics), "chart": chart(metrics), "tables": tables, "stores": stores,
            "missing": missing, "damaged": damaged, "notes": notes}  # fmt: skip


def find_runs(roots: list[Path]) -> list[Path]:
    """Every run folder under ``roots`` (results/runs/<benchmark>/<system>/<ablation>/<hash>), sorted by path."""
    found = []
    for root in roots:
        if root.is_dir():
            found += [p for p in sorted(root.glob("*/*/*/*")) if p.is_dir() and any((p / m).is_file() for m in RUN_MARKERS)]
    return found
