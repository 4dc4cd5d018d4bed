"""Paired differences of a retrieval-only run to its base row, for its metrics.json: every retrieval metric (recall@k,
any-hit@k, NDCG) overall and per category (LoCoMo) or question type (HaluMem), at each level, and LoCoMo's evidence
recall at each token budget, each with the per-question interval and the one over clusters (conversations, users)
then questions within them, paired within the resampled clusters (``eval.compare.paired_difference``).

Why: a run cannot know its base while it runs (the base is another run: rag over the same oracle facts, the
decomposition), so the differences are computed afterwards from both runs' stored ranked ids, with no LLM, and
written beside the run's own metrics (``scripts.add_fields``); the tables compute the same cells from the same rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from eval.budget import recall_at_budget, row_item_tokens
from eval.compare import paired_difference
from eval.retrieval_metrics import metric_names, question_scores, ranked_units

SECTION = "retrieval_paired_to_base"  # metrics.json key
Scored = dict[str, tuple[Any, dict[str, float]]]  # question key -> (group, metric -> value)


def _differences(base: Scored, other: Scored, groups: Sequence[Any], names: Sequence[str], clusters: dict[str, str],
                 n_samples: int, seed: int, overall: Callable[[Any], bool]) -> dict[str, Any]:
    """``overall`` (questions whose group ``overall`` keeps) and per group: metric -> paired difference (other - base)."""

    def cell(pick: Callable[[Any], bool]) -> dict[str, Any]:
        keys = set(base) & set(other)
        chosen = [k for k in keys if pick(base[k][0])]
        return {name: paired_difference({k: base[k][1][name] for k in chosen}, {k: other[k][1][name] for k in chosen}, n_samples, seed, clusters)
                for name in names}  # fmt: skip

    return {"overall": cell(overall), "per_group": {str(g): cell(lambda c, g=g: c == g) for g in groups}}


def _locomo_scores(rows: list[dict[str, Any]], unit: Any, ks: Sequence[int], ndcg_k: int) -> Scored:
    out = {}
    for r in rows:
        s = question_scores({unit(e) if unit else e for e in r["evidence"]}, ranked_units(r["retrieved_ids"], unit), ks, ndcg_k)
        if s is not None:
            out[r["key"]] = (int(r["category"]), s)
    return out


def locomo_paired(rows: list[dict[str, Any]], base_rows: list[dict[str, Any]], ks: Sequence[int], ndcg_k: int, budgets: Sequence[int],
                  n_samples: int, seed: int) -> dict[str, Any]:
    """LoCoMo: per level (turn, session) the differences of every metric, overall (category 5 out, as the run's own
    ``overall``) and per category; at turn level also evidence recall at each budget, where both runs record tokens."""
    from eval.benchmarks.locomo.retrieval import ADVERSARIAL, LEVELS

    clusters = {r["key"]: str(r["sample_id"]) for r in (*base_rows, *rows)}
    names = metric_names(ks, ndcg_k)
    categories = sorted({int(r["category"]) for r in rows})
    out: dict[str, Any] = {"clusters": "conversation", "overall_excludes_categories": [ADVERSARIAL]}
    for level, unit in LEVELS.items():
        out[level] = _differences(_locomo_scores(base_rows, unit, ks, ndcg_k), _locomo_scores(rows, unit, ks, ndcg_k), categories, names,
                                  clusters, n_samples, seed, lambda c: c != ADVERSARIAL)  # fmt: skip
    both = rows + base_rows
    if budgets and all(row_item_tokens(r) is not None for r in both):

        def at_budgets(run_rows: list[dict[str, Any]]) -> Scored:
            return {r["key"]: (int(r["category"]), {str(b): recall_at_budget(r, int(b)) for b in budgets}) for r in run_rows if r["evidence"]}

        out["evidence_recall_at_budget"] = {"level": "turn", **_differences(at_budgets(base_rows), at_budgets(rows), categories,
                                                                             [str(b) for b in budgets], clusters, n_samples, seed,
                                                                             lambda c: c != ADVERSARIAL)}  # fmt: skip
    return out


def halumem_paired(rows: list[dict[str, Any]], base_rows: list[dict[str, Any]], ks: Sequence[int], n_samples: int, seed: int) -> dict[str, Any]:
    """HaluMem: per level both runs can be scored at (session always; fact where both carry gold fact ids) the
    question evidence differences of every metric, overall and per question type (clusters: users)."""
    from eval.benchmarks.halumem.retrieval import session_of_id

    qa, base_qa = [r for r in rows if r["kind"] == "qa"], [r for r in base_rows if r["kind"] == "qa"]
    clusters = {r["key"]: str(r["uuid"]) for r in (*base_qa, *qa)}
    names = metric_names(ks, 10)
    levels: dict[str, tuple[Callable[..., set[str]], Callable[[dict[str, Any]], list[set[str]]]]] = {
        "session": (lambda ids: {session_of_id(i) for i in ids}, lambda r: [set(s) for s in r["retrieved_sessions"]])}
    if all(any(f is not None for r in run for f in r["retrieved_fact_ids"]) for run in (rows, base_rows)):
        levels["fact"] = (set, lambda r: [{f} if f else set() for f in r["retrieved_fact_ids"]])

    def scored(run: list[dict[str, Any]], gold_of: Callable[..., set[str]], items_of: Callable[[dict[str, Any]], list[set[str]]]) -> Scored:
        return {r["key"]: (r["question_type"], s) for r in run if (s := question_scores(gold_of(r["evidence_fact_ids"]), items_of(r), ks, 10)) is not None}

    types = sorted({r["question_type"] for r in qa}, key=str)
    return {"clusters": "user", **{level: _differences(scored(base_qa, *fns), scored(qa, *fns), types, names, clusters, n_samples, seed, lambda _: True)
                                   for level, fns in levels.items()}}  # fmt: skip


def base_record(base_dir: Path) -> str:
    """How the base run is named in the section: its path under results/published/runs when it lies there."""
    parts = Path(base_dir).resolve().parts
    return "/".join(parts[-4:])


def add_retrieval_fields(run_dir: Path, base_dir: Path | None, write: bool = True) -> Any:
    """Add to a retrieval-only run's metrics.json what it lacks: its retrieval metrics recomputed from its rows with
    today's code (the cluster intervals; tokens and budgets where its rows record tokens) and the paired differences
    to ``base_dir`` (none for the base itself). Every value it already holds must come out the same, else nothing
    is written (``AddedFields.conflicts``)."""
    import json

    import yaml

    from core.atomic import write_json_atomic
    from eval.benchmarks.locomo.added_fields import ADDED_RECORD, AddedFields, _git_sha, merge_new
    from eval.intervals import report_settings
    from eval.rows import read_rows

    run_dir = Path(run_dir)
    report = AddedFields(run_dir)
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    config = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    bench = config["benchmark"]
    seed, samples = bench.get("seed", config.get("seed", 0)), int(bench["bootstrap_samples"])
    ks = list(metrics["retrieval"]["ks"])
    recomputed: dict[str, Any]
    if (run_dir / "retrievals.jsonl").is_file():  # LoCoMo
        from eval.benchmarks.locomo.retrieval import retrieval_metrics

        def ordered(folder: Path) -> list[dict[str, Any]]:
            return sorted(read_rows(folder / "retrievals.jsonl"), key=lambda r: (r["sample_id"], r["qa_index"]))

        rows = ordered(run_dir)
        budgets = [int(b) for b in (bench.get("token_budgets") or report_settings()["token_budgets"])]
        recomputed = {"retrieval": retrieval_metrics(rows, ks, int(bench["ndcg_k"]), samples, seed, budgets)}
        if base_dir is not None and Path(base_dir).resolve() != run_dir.resolve():
            recomputed[SECTION] = {"base_run": base_record(base_dir),
                                   **locomo_paired(rows, ordered(Path(base_dir)), ks, int(bench["ndcg_k"]), budgets, samples, seed)}  # fmt: skip
    elif (run_dir / "halumem_retrievals.jsonl").is_file():
        from eval.benchmarks.halumem.retrieval import retrieval_metrics as halumem_metrics

        rows = read_rows(run_dir / "halumem_retrievals.jsonl")
        recomputed = {"retrieval": halumem_metrics(rows, ks, samples, seed)}
        if base_dir is not None and Path(base_dir).resolve() != run_dir.resolve():
            recomputed[SECTION] = {"base_run": base_record(base_dir),
                                   **halumem_paired(rows, read_rows(Path(base_dir) / "halumem_retrievals.jsonl"), ks, samples, seed)}  # fmt: skip
    else:
        report.skipped = "no retrievals.jsonl / halumem_retrievals.jsonl"
        return report
    updated = json.loads(json.dumps(metrics))
    merge_new(updated, json.loads(json.dumps(recomputed)), "", report.added, report.conflicts)
    if report.conflicts or not report.added:
        return report
    updated[ADDED_RECORD] = {"fields": sorted({where.split(".", 1)[0] if where.startswith(SECTION) else where.rsplit(".", 1)[-1] for where in report.added}),
                             "n_values": len(report.added), "command": "python -m scripts.add_fields", "git_sha": _git_sha(),
                             "how": "recomputed from the run's ranked rows (and its base run's), no LLM; every value the run "
                                    "already held recomputed identically and left as it was"}  # fmt: skip
    if write:
        write_json_atomic(run_dir / "metrics.json", updated, indent=2, default=str)
    return report
