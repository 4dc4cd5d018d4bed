"""What of a HaluMem run folder may be published (eval/publishing.py), and the check that it still scores the same.

Why: HaluMem's data is licensed CC BY-NC-ND 4.0 (no derivatives), and its files are never committed here
(docs/halumem.md, "Getting the data"). A run folder holds much of it verbatim: questions, gold answers and
memory points in the rows, the memory system's saved state under ``system/`` (an oracle run stores the gold
points themselves), retrieved dialogue text, answers and judge reasons that quote them, and W&B tables with
the same text. Published into git, such a folder would redistribute the dataset, and for the evaluation user
it would put evaluation text where later developers read it. So a HaluMem run is published without text:

* rows (``halumem_<table>.jsonl``): only the fields named in ``PUBLIC_FIELDS`` (keys, labels, scores, types,
  importance, counts, token counts, latencies, failure kinds); a field not named there, a new one included,
  is left out. Lists of texts become their lengths (``DERIVED``); a failure message, which can quote the
  LLM's output, becomes its kind (``failure_kind``). A table with no entry here is refused, not guessed at.
* files: only ``PUBLIC_FILES`` (config, overrides, provenance, metrics, table); ``system/``, ``wandb/`` and
  anything else stay behind in the run folder, on the machine that ran it.
* checks before anything is written: no kept string is longer than ``MAX_KEPT_STRING`` (labels and keys are
  short; text is not), no dataset text the rows held (questions, gold answers, memory points, original
  memories) occurs in a kept file, and ``reaggregate`` gives the run's metrics back from the kept rows.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any, Callable

import yaml

from eval.rows import INPUT_HASH_FIELD, SCORED_ROW_FIELD, read_rows

# Whole files published as they are: none holds dataset text (config: settings and prompts of this project;
# metrics and table: rates, counts and labels; provenance and overrides: code shas, input file hashes, usage).
REPO = Path(__file__).resolve().parents[3]
PUBLIC_FILES = ("config.yaml", "overrides.json", "provenance.json", "metrics.json", "table.md")
ROW_PREFIX = "halumem_"
_ROW_STAMPS = (INPUT_HASH_FIELD, SCORED_ROW_FIELD)  # hashes eval/rows.py stamps on rows
_WHERE = ("key", "uuid", "session")
_INTEGRITY = (*_WHERE, "memory_type", "memory_source", "is_interference", "importance", "score", "failure", "n_stored")
_ACCURACY = (*_WHERE, "score", "in_gold_fields", "failure", "gold_fields_failure")
_UPDATES = (*_WHERE, "memory_type", "importance", "routed", "label", "content_verdict", "original_current", "rank_new", "rank_old", "failure",
            "n_returned", "n_original_memories", "retrieved_tokens", "returned_tokens")

# Per row table (file halumem_<table>.jsonl): the fields published. Left out, as text of the dataset or of a
# model reading it: integrity/updates memory_content, updates original_memories and returned, accuracy memory,
# qa question, gold and response, clarifications text, question, gold and entity_id, and every judge reason
# (accuracy gold_fields_reason included).
PUBLIC_FIELDS: dict[str, tuple[str, ...]] = {
    "users": ("key", "sessions"),
    "sessions": ("key", "generated_qa_session", "n_turns", "n_stored", "n_updated", "n_rejected", "n_flagged", "add_failures", "usage"),
    "integrity": _INTEGRITY,
    "integrity_noclarify": _INTEGRITY,
    "accuracy": _ACCURACY,
    "accuracy_noclarify": _ACCURACY,
    "updates": _UPDATES,
    "updates_noclarify": _UPDATES,
    # gold fact ids ("<session>:p<index>") name points without quoting them (benchmark.py, _evidence_fields)
    "qa": (*_WHERE, "question_type", "difficulty", "answer_failure", "n_retrieved", "retrieved_tokens", "returned_tokens", "answer_prompt_tokens", "answer_latency_s",
           "label", "failure", "n_evidence", "evidence_fact_ids", "retrieved_fact_ids", "evidence_held", "evidence_ever_held"),
    # update_links.py: counts and outcome labels only; each point is (index, outcome, targets_held, events, verdicts)
    "update_links": (*_WHERE, "points", "non_update_points", "events", "false_alarms", "false_alarm_points", "false_alarm_verdicts",
                     "unmatched_events"),
    "clarifications": (*_WHERE, "rank", "gain", "answer", "committed", "updated"),
    # mechanism.py: gold fact ids, counts and booleans only
    "mechanism": (*_WHERE, "points", "questions", "replaces"),
    # retrieval-only runs (halumem/retrieval.py): gold fact ids and session numbers of what a search returned, no text
    "retrievals": (*_WHERE, "kind", "memory_type", "question_type", "n_evidence", "evidence_fact_ids", "current_fact_id",
                   "replaced_fact_ids", "n_original_memories", "retrieved_fact_ids", "retrieved_sessions", "retrieved_tokens",
                   "returned_tokens"),
}
# Fields computed from a left-out list, under the name they are published as (committed: the memory ids a
# clarification stored, counted; clarify_metrics counts either).
_UPDATE_COUNTS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "n_returned": lambda r: len(r.get("returned") or []), "n_original_memories": lambda r: len(r.get("original_memories") or [])}
DERIVED: dict[str, dict[str, Callable[[dict[str, Any]], Any]]] = {
    "updates": _UPDATE_COUNTS, "updates_noclarify": _UPDATE_COUNTS,
    "clarifications": {"committed": lambda r: len(r.get("committed") or [])},
}
_POINT_FIELDS = ("index", "outcome", "targets_held", "events", "verdicts")  # update_links rows' "points"
# Fields holding the dataset's own text, looked for in every kept file before publishing (never printed).
DATASET_TEXT: dict[str, tuple[str, ...]] = {
    "integrity": ("memory_content",), "integrity_noclarify": ("memory_content",),
    "updates": ("memory_content", "original_memories"), "updates_noclarify": ("memory_content", "original_memories"),
    "qa": ("question", "gold"), "clarifications": ("gold",),
}  # fmt: skip
FAILURE_KINDS = ("schema", "not an object", "bad score", "bad accuracy verdict", "bad label", "bad update verdict", "bad in_gold_fields",
                 "bad original_current")  # judge.py's messages
MAX_KEPT_STRING = 64  # longest string a kept field may hold: a key (uuid:session:index), a label, a type name
TEXT_WINDOW = 20  # dataset texts are looked for by their 20-character pieces


def failure_kind(message: Any) -> str | None:
    """A failure message (judge.py's, or the answerer's LLM error) as its kind: the message may quote the LLM's
    output, and so the dataset; ``failed(row)`` needs only whether there is one."""
    if not message:
        return None
    text = str(message)
    return next((kind for kind in FAILURE_KINDS if text.startswith(kind)), "failed")


def _check_short(value: Any, where: str) -> None:
    if isinstance(value, str) and len(value) > MAX_KEPT_STRING:
        raise SystemExit(f"{where}: a kept field holds a {len(value)}-character string, text rather than a label; "
                         f"not published (eval/benchmarks/halumem/public.py PUBLIC_FIELDS)")  # fmt: skip
    if isinstance(value, dict):
        for key, inner in value.items():
            _check_short(key, where)
            _check_short(inner, where)
    elif isinstance(value, list):
        for inner in value:
            _check_short(inner, where)


def public_row(table: str, row: dict[str, Any]) -> dict[str, Any]:
    """``row`` of ``halumem_<table>.jsonl`` with only its published fields (module docstring)."""
    if table not in PUBLIC_FIELDS:
        raise SystemExit(f"halumem_{table}.jsonl: no list of publishable fields in eval/benchmarks/halumem/public.py "
                         f"(PUBLIC_FIELDS); add one (fields without text only) before publishing a HaluMem run")  # fmt: skip
    derived = DERIVED.get(table, {})
    out: dict[str, Any] = {}
    for name in (*PUBLIC_FIELDS[table], *_ROW_STAMPS):
        if name in derived:
            out[name] = derived[name](row)
        elif name in row:
            out[name] = row[name]
    for name in ("failure", "answer_failure", "gold_fields_failure"):
        if name in out:
            out[name] = failure_kind(out[name])
    if table == "update_links":
        out["points"] = [{k: p[k] for k in _POINT_FIELDS if k in p} for p in out.get("points", [])]
    _check_short(out, f"halumem_{table}.jsonl row {row.get('key')!r}")
    return out


def run_rows(run: Path, input_hash: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Each row table of a run folder as the run's aggregation read it (eval/rows.py JsonlRows): damaged lines
    skipped, rows of other input files dropped when ``input_hash`` is given, one row per key (the last written),
    keys in the order they first appeared."""
    tables = {}
    for path in sorted(run.glob(f"{ROW_PREFIX}*.jsonl")):
        rows: dict[str, dict[str, Any]] = {}
        for row in read_rows(path, key_field=None):
            if "key" not in row or (input_hash is not None and row.get(INPUT_HASH_FIELD) != input_hash):
                continue
            rows[str(row["key"])] = row
        tables[path.stem.removeprefix(ROW_PREFIX)] = list(rows.values())
    return tables


def reaggregate(folder: Path) -> dict[str, Any]:
    """The metrics of a (published) HaluMem run folder computed again from its rows, with the benchmark settings
    of its config.yaml and what its metrics.json says of the system (extraction source, update links)."""
    from eval.benchmarks.halumem.benchmark import HaluMemBenchmark
    from eval.benchmarks.halumem.retrieval import RETRIEVAL_STAGES, aggregate_retrieval

    metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
    settings = (yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8")) or {}).get("benchmark", {})
    names = {f.name for f in dataclasses.fields(HaluMemBenchmark) if f.init and not f.name.startswith("_")}
    bench = HaluMemBenchmark(**{k: v for k, v in settings.items() if k in names})
    tables = run_rows(folder)
    if tuple(metrics.get("stages") or ()) == RETRIEVAL_STAGES:
        return aggregate_retrieval(bench, tables.get("retrievals", []), len(tables.get("users", [])), metrics["system"])
    rows = {name: tables.get(name, []) for name in ("sessions", "integrity", "accuracy", "updates", "qa", "users", "update_links")}
    rows.update({name: tables[name] for name in tables if name not in rows})
    return bench.aggregate(rows, extraction_mode=metrics["extraction_source"], system_name=metrics["system"],
                           links=metrics.get("update_links") is not None)  # fmt: skip


# metrics.json sections computed from the rows (HaluMemBenchmark.aggregate): what the check compares. Labels and
# notes beside them (variant, extraction_skipped, bootstrap settings) are the code's wording, not the rows'.
METRIC_SECTIONS = ("main_metric", "extraction", "updating", "qa", "by_question_type", "by_memory_type", "counts", "update_links",
                   "failures", "clarify", "mechanism", "retrieval")
_CI_KEYS = ("ci_low", "ci_high")


def _without(value: Any, keys: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return {k: _without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_without(v, keys) for v in value]
    return value


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)  # as metrics.json holds it; NaN equals NaN here


def compare_metrics(published: dict[str, Any], again: dict[str, Any]) -> str:
    """"identical", or "CI bounds differ" (means and counts identical: the rows of a multi-user run written by
    run.workers > 1 threads are in the order users finished, while the run bootstrapped them in the data file's
    order); raises when any mean or count differs (the published rows lost something the metrics need). Compared:
    the METRIC_SECTIONS metrics.json has."""
    kept = {k: published[k] for k in METRIC_SECTIONS if k in published}
    again = {k: again.get(k) for k in kept}
    if _canonical(again) == _canonical(kept):
        return "identical"
    if _canonical(_without(again, _CI_KEYS)) == _canonical(_without(kept, _CI_KEYS)):
        return "CI bounds differ"
    differing = sorted(k for k in kept if _canonical(kept.get(k)) != _canonical(again.get(k)))
    raise SystemExit(f"the published rows do not give the run's metrics back (differing: {', '.join(differing)}); "
                     f"not published (eval/benchmarks/halumem/public.py)")  # fmt: skip


def _strings(value: Any) -> list[str]:
    """Every string in a kept value, dict keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [t for v in value for t in _strings(v)]
    return []


def dataset_texts(tables: dict[str, list[dict[str, Any]]]) -> set[str]:
    """The dataset's texts the rows held (DATASET_TEXT), TEXT_WINDOW characters or longer."""
    return {t for table, rows in tables.items() for row in rows for name in DATASET_TEXT.get(table, ())
            for t in _strings(row.get(name)) if len(t) >= TEXT_WINDOW}  # fmt: skip


def leaked(texts: set[str], blob: str) -> bool:
    """Whether ``blob`` holds one of ``texts`` whole, or any 2 x TEXT_WINDOW - 1 characters of one (each text is
    cut into TEXT_WINDOW-character pieces at every TEXT_WINDOW-th character, and any such run holds a piece)."""
    w = TEXT_WINDOW
    windows = {blob[i : i + w] for i in range(len(blob) - w + 1)}
    return any(t[i : i + w] in windows for t in texts for i in [*range(0, len(t) - w + 1, w), len(t) - w])


PUBLISHED_NOTE = "PUBLISHED.md"


def note(run: Path, tables: dict[str, list[dict[str, Any]]], left_out: list[str], check: str | None) -> str:
    """PUBLISHED.md: what this published folder leaves out of the run folder, and why."""
    shown = run.relative_to(REPO) if run.is_relative_to(REPO) else run
    dropped = {}
    for table, rows in tables.items():
        fields = sorted({k for r in rows for k in r} - set(PUBLIC_FIELDS[table]) - set(_ROW_STAMPS))
        if fields:
            dropped[table] = fields
    lines = [
        "# Published without HaluMem text",
        "",
        "HaluMem's data is licensed CC BY-NC-ND 4.0 (no derivatives) and is never committed to this repository;",
        "a HaluMem run folder holds much of it verbatim (questions, gold answers, memory points, dialogue text",
        "retrieved by the memory system, answers and judge reasons quoting them, the system's saved memory). So this",
        "copy keeps no text: the rows keep keys, labels, scores, types, importance, counts, token counts, latencies",
        "and failure kinds (eval/benchmarks/halumem/public.py, PUBLIC_FIELDS), which is all the metrics need. Keeping",
        "evaluation text out of the repository also keeps it from the developers who read it later.",
        "",
        f"The full run folder stays where it ran: `{shown}` on the machine that ran it.",
        "",
        "Left out of the rows (field names):",
        "",
        *[f"- `halumem_{table}.jsonl`: {', '.join(f'`{f}`' for f in fields)}" for table, fields in sorted(dropped.items())],
        *(["- none"] if not dropped else []),
        "",
        "Derived in their place: `n_returned`, `n_original_memories` (updates: lengths of the left-out lists),",
        "`committed` (clarifications: how many memories a clarification stored), failure messages as their kind",
        f"({', '.join(FAILURE_KINDS)}, or `failed`). One row per key: the last written, as the run read them.",
        "",
        "Files and folders left out: " + (", ".join(f"`{name}`" for name in left_out) if left_out else "none") + ".",
        "",
    ]
    if check is not None:
        lines += [f"Re-aggregation check (eval.benchmarks.halumem.public.reaggregate on these rows): {check}.", ""]
    return "\n".join(lines)


def publish_copy(run: Path, target: Path, metrics: dict[str, Any] | None) -> None:
    """Write the publishable part of HaluMem run folder ``run`` to ``target`` (the module docstring), with
    PUBLISHED.md; with ``metrics`` (a finished run), only when the kept rows give them back. Checks first,
    writes after: a refused folder leaves nothing behind."""
    input_hash = (metrics or {}).get("metadata", {}).get("input_hash")
    tables = run_rows(run, input_hash)
    public = {table: [public_row(table, row) for row in rows] for table, rows in tables.items()}
    kept_files = [name for name in PUBLIC_FILES if (run / name).is_file()]
    left_out = sorted(p.name + ("/" if p.is_dir() else "") for p in run.iterdir()
                      if p.name not in kept_files and not (p.name.startswith(ROW_PREFIX) and p.suffix == ".jsonl")
                      and p.name not in (".lock", ".lock.json") and not p.name.endswith(".tmp"))  # fmt: skip
    rows_text = {table: "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows) for table, rows in public.items()}
    labels = {t for rows in public.values() for r in rows for k, v in r.items() if k not in ("key", "uuid", *_ROW_STAMPS) for t in _strings(v)}
    blob = "\n".join([*((run / name).read_text(encoding="utf-8", errors="replace") for name in kept_files), *sorted(labels)])
    if leaked(dataset_texts(tables), blob):
        raise SystemExit(f"{run}: a file to be published holds HaluMem text (a question, gold answer or memory point); "
                         f"not published. Files looked at: {', '.join(kept_files)} and the kept rows' labels")  # fmt: skip
    check = None
    staging = target.with_name(target.name + ".publishing.tmp")
    if staging.exists():  # left by a publish that was killed
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    try:
        for name in kept_files:
            (staging / name).write_bytes((run / name).read_bytes())
        for table, text in rows_text.items():
            (staging / f"{ROW_PREFIX}{table}.jsonl").write_text(text, encoding="utf-8")
        if metrics is not None:
            check = compare_metrics(metrics, reaggregate(staging))
            if check != "identical":
                check += (" (means and counts identical; the run bootstrapped users in the data file's order, these rows "
                          "are in the order users finished: run.workers > 1)")  # fmt: skip
        (staging / PUBLISHED_NOTE).write_text(note(run, tables, left_out, check), encoding="utf-8")
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
