"""LoCoMo's retrieval-only tables and figures (``benchmark.stages=[ingest, retrieve]``): evidence recall@10 per row and
category with its bootstrap CI, the paired difference to the base row (conf/report.yaml ``retrieval_base_row``) over
the same questions, and what each row cost (LLM calls, tokens, wall time); recall@k curves as a PNG; the README's
one-sentence headline.

Why its own module: a retrieval-only run has no answers and no judge, so it is never a Table 1 row; its numbers
come from its ``metrics.json`` and, for paired differences and the curves, from its ``retrievals.jsonl`` (per
question, ranked source ids), read here with no LLM. ``scripts/make_tables.py`` writes
``results/tables/retrieval.md`` (and .csv/.tex) and ``results/tables/retrieval_recall_at_k.png`` with it; the cells
every benchmark's retrieval table shares are eval/retrieval_table.py's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from eval.benchmarks.locomo.budget_table import tokens_cell
from eval.benchmarks.locomo.retrieval import ADVERSARIAL, LEVELS, is_retrieval_only
from eval.budget import recall_at_budget, row_item_tokens
from eval.compare import paired_difference
from eval.intervals import chosen_interval, interval_note, report_settings
from eval.metrics import bootstrap_ci, format_ci
from eval.retrieval_metrics import question_scores, ranked_units
from eval.retrieval_table import HEADLINE_K, base_row, cost_columns, diff_cell, is_base, mean_cell, run_label, system_settings
from eval.rows import read_rows

LEVEL = "turn"


def _meta(m: dict[str, Any]) -> dict[str, Any]:
    return m.get("metadata", {})


def slice_of(m: dict[str, Any]) -> str:
    chosen = m.get("slice", {})
    return f"{chosen.get('conversations_selected', '?')} conv, {chosen.get('sessions_selected', '?')} sessions, {chosen.get('questions_selected', '?')} q"


def retrieval_rows(m: dict[str, Any]) -> list[dict[str, Any]]:
    """A run's per-question ranked source ids: retrievals.jsonl of a retrieval-only run, else (a full run read as a
    retrieval row) its predictions.jsonl, whose items are the ``top_k`` the answerer got."""
    folder = Path(m.get("_path", "")).parent
    if (folder / "retrievals.jsonl").is_file():
        return read_rows(folder / "retrievals.jsonl")
    if (folder / "predictions.jsonl").is_file():
        return [{"key": p["key"], "sample_id": p["sample_id"], "category": p["category"], "evidence": p["evidence"],
                 "retrieved_ids": [list(item.get("source_turn_ids") or []) for item in p.get("retrieved", [])],
                 "retrieved_tokens": row_item_tokens(p)}
                for p in read_rows(folder / "predictions.jsonl")]  # fmt: skip
    return []


def from_full_run(m: dict[str, Any], n_samples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """A full LoCoMo run (answers and judge) as a retrieval-only row, from the same run's predictions: its retrieval
    metrics at k up to its ``top_k`` (why: MOSAIC's model-extractor runs of whole conversations cost hours of LLM
    time; their retrieval is measured without running them again)."""
    from eval.benchmarks.locomo.retrieval import RETRIEVAL_STAGES, retrieval_metrics

    top_k = int(m.get("top_k") or HEADLINE_K)
    ks = sorted({k for k in (1, 5, 10, 20) if k <= top_k} | {top_k})
    return {**m, "stages": list(RETRIEVAL_STAGES), "retrieval_depth": top_k, "from_full_run": True,
            "retrieval": retrieval_metrics(retrieval_rows(m), ks, min(10, top_k), n_samples, seed, report_settings()["token_budgets"])}  # fmt: skip


def question_recall(m: dict[str, Any], k: int = HEADLINE_K, level: str = LEVEL) -> dict[str, tuple[int, float]]:
    """question key -> (category, recall@k) from the run's ranked rows (``retrieval_rows``)."""
    unit = LEVELS[level]
    out = {}
    for r in retrieval_rows(m):
        gold = {unit(e) if unit else e for e in r["evidence"]}
        s = question_scores(gold, ranked_units(r["retrieved_ids"], unit), [k], k)
        if s is not None:
            out[r["key"]] = (int(r["category"]), s[f"recall@{k}"])
    return out


def question_conversations(m: dict[str, Any]) -> dict[str, str]:
    """question key -> its conversation (the cluster the interval resamples); LoCoMo keys are ``<sample_id>:q<i>``."""
    return {r["key"]: str(r.get("sample_id") or str(r["key"]).split(":")[0]) for r in retrieval_rows(m)}


def _recall_stat(m_rec: dict[str, tuple[int, float]], conversations: dict[str, str], category: int | None, n_boot: int, seed: int) -> dict[str, Any]:
    """recall@k with its per-question and conversation intervals over the questions of ``category`` (None: every
    category but 5), from the run's own rows: the cell shows the conversation interval from 5 conversations on."""
    pick = (lambda c: c != ADVERSARIAL) if category is None else (lambda c: c == category)
    keys = sorted(q for q, (c, _) in m_rec.items() if pick(c))
    return bootstrap_ci([m_rec[q][1] for q in keys], n_boot, seed, clusters=[conversations.get(q, q) for q in keys])


def _base_for(m: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The base row of ``m``: rag over oracle facts with no system.* override, of the same slice, else of the widest
    slice (a row run on fewer conversations is then paired with it over the questions both have)."""
    bases = [o for o in runs if is_base(o)]
    same = [o for o in bases if slice_of(o) == slice_of(m)]
    return (same or sorted(bases, key=lambda o: -int(o.get("slice", {}).get("questions_selected") or 0)) or [None])[0]


def _difference(m_rec: dict[str, tuple[int, float]], base_rec: dict[str, tuple[int, float]], category: int | None, n_boot: int, seed: int,
                conversations: dict[str, str] | None = None) -> str:
    pick = (lambda c: c != ADVERSARIAL) if category is None else (lambda c: c == category)
    base = {k: v for k, (c, v) in base_rec.items() if pick(c)}
    other = {k: v for k, (c, v) in m_rec.items() if pick(c)}
    return diff_cell(paired_difference(base, other, n_boot, seed, clusters=conversations))


def budget_recall_by_question(m: dict[str, Any], budget: int) -> dict[str, float]:
    """question key -> turn-level evidence recall of the run's list cut at ``budget`` tokens (categories 1-4, questions
    with evidence); empty for a run whose rows record no tokens."""
    rows = [r for r in retrieval_rows(m) if r["evidence"] and int(r["category"]) != ADVERSARIAL]
    if not rows or any(row_item_tokens(r) is None for r in rows):
        return {}
    return {r["key"]: float(recall_at_budget(r, budget)) for r in rows}


def _category_title(category: str, labels_by: dict[str, dict[str, str]], convention: str) -> str:
    """``cat. 1 multi-hop (mem0: single-hop)``: the run's convention first, the other in brackets."""
    own = labels_by.get(convention, {}).get(category, "?")
    others = [f"{name}: {labels[category]}" for name, labels in labels_by.items() if name != convention and category in labels]
    return f"cat. {category} {own}" + (f" ({', '.join(others)})" if others else "")


def retrieval_table(metrics_list: list[dict[str, Any]], level: str = LEVEL, k: int = HEADLINE_K) -> pd.DataFrame:
    """Rows x categories: recall@k x100 [95% CI], and below it (its own column) the paired difference to the base
    row over the same questions; then any-hit@k and NDCG@10 overall and the row's costs."""
    runs = [m for m in metrics_list if is_retrieval_only(m)]
    if not runs:
        return pd.DataFrame()
    labels_by = runs[0].get("category_labels_by_convention") or {runs[0].get("convention", "locomo"): runs[0].get("category_labels", {})}
    categories = sorted({c for m in runs for c in m["retrieval"][level]["per_category"]}, key=int)
    recalls = {id(m): question_recall(m, k, level) for m in runs}
    conversations = {id(m): question_conversations(m) for m in runs}
    rows = []
    for m in runs:
        stats = m["retrieval"][level]
        base = _base_for(m, runs)
        row: dict[str, Any] = {"row": run_label(m), "slice": slice_of(m)}
        for name, cell in [("overall (no cat. 5)", stats["overall"]), *[(c, stats["per_category"].get(c, {})) for c in categories]]:
            title = name if name.startswith("overall") else _category_title(name, labels_by, m.get("convention", "locomo"))
            category = None if name.startswith("overall") else int(name)
            # from the rows, so that the cell can carry the conversation interval (metrics.json holds the per-question one)
            row[f"{title} recall@{k}"] = format_ci(_recall_stat(recalls[id(m)], conversations[id(m)], category, 1000, 0) if recalls[id(m)]
                                                   else cell.get(f"recall@{k}"))  # fmt: skip
            if base is not None and base is not m:
                row[f"{title} diff to base"] = _difference(recalls[id(m)], recalls[id(base)], category, 1000, 0, conversations[id(m)])
            else:
                row[f"{title} diff to base"] = "base" if base is m else ""
        row[f"any-hit@{k}"] = format_ci(stats["overall"].get(f"any_hit@{k}"))
        ndcg_k = m["retrieval"].get("ndcg_k", 10)
        row[f"NDCG@{ndcg_k}"] = format_ci(stats["overall"].get(f"ndcg@{ndcg_k}"))
        budget = int(report_settings()["table_token_budget"])
        at_budget = (m["retrieval"].get("evidence_recall_at_budget") or {}).get("overall", {}).get(str(budget))
        row[f"recall @{budget} tokens"] = format_ci(at_budget)
        base_budget = budget_recall_by_question(base, budget) if base is not None and base is not m else {}
        mine_budget = budget_recall_by_question(m, budget) if base_budget else {}
        row[f"diff to base @{budget} tokens"] = ("base" if base is m else diff_cell(paired_difference(base_budget, mine_budget, 1000, 0, clusters=conversations[id(m)]))
                                                 if base_budget and mine_budget else "")  # fmt: skip
        row["tokens returned p50 / p95"] = tokens_cell({"returned_tokens": m["retrieval"].get("returned_tokens")})
        overall = _recall_stat(recalls[id(m)], conversations[id(m)], None, 1000, 0) if recalls[id(m)] else None
        row["interval shown"] = interval_note(overall, int(report_settings()["min_clusters_for_cluster_interval"]))
        rows.append({**row, **cost_columns(m)})
    table = pd.DataFrame(rows)
    table.attrs["caption"] = (
        f"Retrieval only (benchmark.stages=[ingest, retrieve]; no answerer, no judge): evidence recall@{k} at {level} level "
        f"x100 [95% bootstrap CI] over the questions with evidence; category 5 (adversarial) apart and out of 'overall'. "
        f"'diff to base': paired difference (points) to rag over oracle facts ({' / '.join(base_row())}) of the same slice, paired "
        f"bootstrap over the same questions. Every interval resamples conversations, then questions within them, where a row "
        f"spans 5 conversations or more (conf/report.yaml), else questions ('interval shown' says which); any-hit and NDCG "
        f"show metrics.json's intervals, chosen the same way. 'recall @N tokens': turn-level evidence recall with each row's "
        f"ranked list cut where its returned text reaches N tokens (eval/budget.py; tokenizer named in metrics.json), categories "
        f"1-4, with its paired difference to the base; 'tokens returned': median / p95 over questions of the whole list's tokens "
        f"(a row whose list stays under N tokens is not cut). Categories by both LoCoMo conventions. Costs: every invocation "
        f"of the run folder."
    )
    return table


def recall_curves(runs: list[dict[str, Any]], path: Path, level: str = LEVEL) -> Path | None:
    """recall@k for k = 1..depth, one line per row (overall, category 5 out), at ``level``; the PNG's path."""
    runs = [m for m in runs if is_retrieval_only(m)]
    if not runs:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5 + 0.16 * len(runs)), sharey=True)
    colours = plt.get_cmap("tab20").colors
    for ax, lvl in zip(axes, ("turn", "session")):
        for i, m in enumerate(runs):
            depth = int(m.get("retrieval_depth") or max(m["retrieval"]["ks"]))
            ks = list(range(1, depth + 1))
            means = []
            for k in ks:
                values = [v for c, v in question_recall(m, k, lvl).values() if c != ADVERSARIAL]
                means.append(100 * (bootstrap_ci(values, 1, 0)["mean"] or 0.0))
            ax.plot(ks, means, marker=".", color=colours[i % len(colours)], label=f"{run_label(m)} ({slice_of(m)})")
        ax.set_xlabel("k (retrieved items)")
        ax.set_title(f"{lvl} level")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("evidence recall@k x100 (categories 1-4)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=1, frameon=False)
    fig.tight_layout(rect=(0, 0.16 * len(runs) / (4.5 + 0.16 * len(runs)) + 0.02, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# The headline's row: MOSAIC's organisation over the gold facts, no conflict check (flat retrieval's counterpart).
HEADLINE_ROW = ("mosaic", "oracle_extractor_no_conflict")
# the MOSAIC settings the headline may quote, best first: as configured, else with exact search (no LSH routing,
# so no LLM call at all), the only other setting that does not change what is ranked
HEADLINE_SETTINGS = ((), ("system.retrieval.mode=exact",))


def retrieval_headline(metrics_list: list[dict[str, Any]], k: int = HEADLINE_K) -> str:
    """The README's one sentence on the widest LoCoMo retrieval-only slice: MOSAIC's organisation over the gold facts
    (oracle extractor, no conflict check; ``HEADLINE_SETTINGS``) against rag over the same facts, recall@k with the
    paired difference; empty when either row is missing."""
    runs = [m for m in metrics_list if is_retrieval_only(m) and not m.get("from_full_run")]
    widest = max((m.get("slice", {}).get("questions_selected", 0) for m in runs), default=0)
    runs = [m for m in runs if m.get("slice", {}).get("questions_selected") == widest]
    base = next((m for m in runs if is_base(m)), None)
    mosaic = next((m for settings in HEADLINE_SETTINGS for m in runs
                   if (_meta(m).get("system"), _meta(m).get("ablation")) == HEADLINE_ROW and system_settings(m) == settings), None)  # fmt: skip
    if mosaic is None or base is None:
        return ""
    conversations = question_conversations(mosaic)
    base_rec, mosaic_rec = question_recall(base, k), question_recall(mosaic, k)
    diff = paired_difference({q: v for q, (c, v) in base_rec.items() if c != ADVERSARIAL},
                             {q: v for q, (c, v) in mosaic_rec.items() if c != ADVERSARIAL}, 1000, 0, clusters=conversations)  # fmt: skip
    min_clusters = int(report_settings()["min_clusters_for_cluster_interval"])
    prefix = "cluster_" if chosen_interval(diff, min_clusters) == "cluster" else ""
    mosaic_stat = _recall_stat(mosaic_rec, conversations, None, 1000, 0)
    base_stat = _recall_stat(base_rec, question_conversations(base), None, 1000, 0)
    chosen = mosaic.get("slice", {})
    verdict = ("no different from" if diff[prefix + "ci_low"] <= 0 <= diff[prefix + "ci_high"] else "better than" if diff["mean"] > 0 else "worse than")
    setting = f" with {', '.join(o.removeprefix('system.') for o in system_settings(mosaic))}" if system_settings(mosaic) else ""
    return (f"Retrieval only, on all {chosen.get('conversations_selected')} LoCoMo conversations ({diff['n']} questions with evidence, "
            f"categories 1-4; no LLM): MOSAIC's organisation of the gold facts (oracle extractor, conflict check off{setting}) reaches "
            f"evidence recall@{k} {format_ci(mosaic_stat)} (x100, 95% CI, {interval_note(diff, min_clusters)}), against "
            f"{format_ci(base_stat)} for rag over the same facts: {verdict} flat "
            f"retrieval (paired difference {diff_cell(diff)} points; results/tables/retrieval.md).")


def recall_vs_tokens_panels(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The recall-vs-tokens figure's LoCoMo panels (eval/retrieval_table.py draws them): turn level, categories 1-4, one
    panel per slice; a row whose rows record no tokens is left out."""
    budgets = [int(b) for b in report_settings()["figure_token_budgets"]]
    panels: dict[str, dict[str, Any]] = {}
    for m in runs:
        rows = [r for r in retrieval_rows(m) if r["evidence"] and int(r["category"]) != ADVERSARIAL]
        if not rows or any(row_item_tokens(r) is None for r in rows):
            continue
        uncut = [v for c, v in question_recall(m, int(m.get("retrieval_depth") or HEADLINE_K)).values() if c != ADVERSARIAL]
        panel = f"LoCoMo, turn level, categories 1-4: {slice_of(m)}"
        panels.setdefault(panel, {})[run_label(m)] = {
            "budgets": {b: mean_cell([float(recall_at_budget(r, b)) for r in rows]) for b in budgets},
            "median_tokens": (m["retrieval"].get("returned_tokens") or {}).get("median"), "uncut": mean_cell(uncut)}  # fmt: skip
    return panels
