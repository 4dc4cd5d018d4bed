"""LoCoMo (Maharana et al. 2024): long conversations, questions per category, evidence dia_ids.

Three resumable stages inside ``run`` (eval/benchmarks/locomo/stages.py): ingest (each session through
``system.add``), predict (``system.search`` + the shared answerer, one row per question) and score (LLM
judge, one row per question). Rows are appended as they are produced; a rerun skips finished work and
never re-ingests a conversation whose questions are all predicted.

Oracle runs (``oracle_facts``): each session's ``observation`` facts ride on the turn they cite
as ``Turn.oracle_facts`` (eval/benchmarks/locomo/data.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from core.api import MemorySystem
from core.config_check import ConfigKeyError
from eval.benchmarks.locomo.audit import GOLD_MODES, audited_keys
from eval.benchmarks.locomo.compare import comparison as paired_comparison
from eval.benchmarks.locomo.data import CONVENTIONS, Episode, Question, SliceSpec, config_problems, load_locomo, slice_episodes
from eval.benchmarks.locomo.metrics import aggregate, gold_slices, ingest_summary, paired_judgements
from eval.benchmarks.locomo.decomposition import decomposition as decomposition_columns
from eval.benchmarks.locomo.retrieval import FULL_STAGES, RETRIEVAL_STAGES, check_stages, is_retrieval_only, run_retrieval
from eval.benchmarks.locomo.retrieval_paired import recompute_retrieval
from eval.benchmarks.locomo.stages import Search, ingest, judged, judgement_row, predict, predicted, search, searches_in_order
from eval.benchmarks.locomo.table import headline_table, judge_gold_table, locomo_table, upgrade_record
from eval.context import JsonlRows, RunContext
from eval.intervals import report_settings
from eval.metrics import percentiles
from eval.workers import Progress, Stage, SystemGuard, run_stage

if TYPE_CHECKING:  # tables are built in eval.benchmarks.locomo.table, which imports pandas when it builds one
    import pandas as pd


@dataclass
class LoCoMoBenchmark:
    """Config: conf/benchmark/locomo.yaml. ``run`` returns the metrics dict (the runner adds metadata)."""

    input_parameters = ("path", "audit_errata")  # the files hashed into a run's identity (core.api.DeclaresInputs)

    path: str = "data/locomo10.json"
    name: str = "locomo"
    convention: str = "locomo"
    conversations: Sequence[int | str] | None = None
    max_sessions: int | None = None
    evidence_in_ingested_only: bool = False
    exclude_categories: Sequence[int] = field(default_factory=lambda: [5])
    max_questions: int | None = None
    top_k: int = 10
    bootstrap_samples: int = 1000
    seed: int = 0
    # Gold answers the headline numbers use: `original`, or `audited_excluded` (the audit's score-changing
    # questions dropped). Both are always reported; errata file from scripts/download_data.py.
    gold: str = "original"
    audit_errata: str = "data/locomo-audit/errors.json"
    oracle_facts: bool = False  # attach each session's observation facts to the turns they cite (oracle-extractor study)
    # Evidence recall with each list cut at these many returned tokens (eval/budget.py). A reporting choice, not
    # part of the run's identity: null reads conf/report.yaml's token_budgets (set +benchmark.token_budgets=[..] to override).
    token_budgets: Sequence[int] | None = None
    oracle_conflicts: bool = False  # gold-judge study: LoCoMo labels no conflicts, so true is refused (conf/ablation/oracle_judge.yaml)
    # [ingest, retrieve, answer, judge] (the full run) or [ingest, retrieve]: a retrieval-only run, no LLM answer or
    # judge, scored against the gold evidence turns at each k of retrieval_ks (eval/benchmarks/locomo/retrieval.py)
    stages: Sequence[str] = FULL_STAGES
    retrieval_ks: Sequence[int] = (1, 5, 10, 20)
    ndcg_k: int = 10

    def __post_init__(self) -> None:
        try:
            check_stages(list(self.stages))
        except ValueError as err:
            raise ConfigKeyError(str(err)) from err
        if not self.retrieval_ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in self.retrieval_ks):
            raise ConfigKeyError(f"benchmark.retrieval_ks={list(self.retrieval_ks)}: must be a non-empty list of ranks >= 1, e.g. [1, 5, 10, 20]")
        if self.convention not in CONVENTIONS:
            raise ConfigKeyError(f"benchmark.convention={self.convention!r}: choose one of {sorted(CONVENTIONS)}")
        if self.gold not in GOLD_MODES:
            raise ConfigKeyError(f"benchmark.gold={self.gold!r}: choose one of {list(GOLD_MODES)}")

    def check_inputs(self) -> None:
        """Parse the file and apply the slice (the runner calls this before the run folder exists)."""
        if self.oracle_conflicts:
            raise ConfigKeyError("benchmark.oracle_conflicts=true: LoCoMo labels no conflicts for a gold judge; run ablation=oracle_judge "
                                 "with experiment=halumem_dev or experiment=conflict")  # fmt: skip
        self.episodes()
        if self.gold == "audited_excluded" and not Path(self.audit_errata).is_file():
            raise ConfigKeyError(f"benchmark.audit_errata={self.audit_errata}: not found, and benchmark.gold=audited_excluded needs it; "
                                 "run `python -m scripts.download_data` (or --mirror DIR)")

    def episodes(self, ctx: RunContext | None = None) -> tuple[list[Episode], dict[str, int]]:
        """The slice; with ``ctx``, parsed from the bytes the run read and checked against its folder's identity."""
        spec = SliceSpec(self.conversations, self.max_sessions, self.evidence_in_ingested_only, self.exclude_categories, self.max_questions)
        content = ctx.read_input(self.path) if ctx is not None and Path(self.path).is_file() else None
        return slice_episodes(load_locomo(self.path, content), spec)

    def run(self, system: MemorySystem, ctx: RunContext) -> dict[str, Any]:
        episodes, counts = self.episodes(ctx)
        if tuple(self.stages) == RETRIEVAL_STAGES:
            ctx.log.info("LoCoMo retrieval only: %d questions from %d conversations searched at depth %d, no answerer, no judge",
                         counts["questions_selected"], counts["conversations_selected"], max(self.retrieval_ks))  # fmt: skip
            metrics = run_retrieval(self, system, episodes, counts, ctx)
            usage = ctx.llm.usage
            if usage.calls:  # allowed (e.g. MOSAIC's model extractor, its conflict check, LSH routing), said in the log
                ctx.log.warning("retrieval-only run: the system made %d LLM calls (%d of them cached) while ingesting and searching",
                                usage.calls, usage.cached_calls)  # fmt: skip
            return metrics
        errata = ctx.read_input(self.audit_errata) if Path(self.audit_errata).is_file() else None  # checked before any row
        labels = CONVENTIONS[self.convention]
        ctx.log.info(
            "LoCoMo slice: %d questions from %d conversations; excluded %d of categories %s (%s), %d with evidence outside the ingested sessions, %d over max_questions",
            counts["questions_selected"], counts["conversations_selected"], counts["excluded_by_category"],
            list(self.exclude_categories), ", ".join(labels[c] for c in self.exclude_categories),
            counts["excluded_evidence_not_ingested"], counts["excluded_by_max_questions"],
        )  # fmt: skip
        ingest_rows = ctx.rows("ingest")
        predictions = ctx.rows("predictions")
        predicted_here = self._ingest_and_predict(system, episodes, ctx, ingest_rows, predictions)
        ctx.system_did_work = predicted_here  # judging only: the runner keeps the counters of the invocation that predicted
        judgements = self._score(episodes, ctx, predictions)
        kept = [p for e in episodes for q in e.questions if (p := predictions.get(q.key))]  # question order, whatever run.workers was
        judged = paired_judgements(kept, judgements.rows(), legacy=False)
        excluded = self._audited_keys(kept, episodes, ctx, errata)
        slices = gold_slices(kept, judged, excluded, self.convention, self.bootstrap_samples, self.seed)
        headline = [p for p in kept if p["key"] not in excluded] if self.gold == "audited_excluded" and excluded else kept
        budgets = self.token_budgets if self.token_budgets is not None else report_settings()["token_budgets"]
        metrics = aggregate(headline, judged, self.convention, self.bootstrap_samples, self.seed, [int(b) for b in budgets])
        ingested = [r for r in ingest_rows.rows() if r["key"] in {e.conversation.sample_id for e in episodes}]
        failures = {"rows": sum(bool(p.get("answer_failure")) for p in kept) + sum(judged.get(p["key"], {}).get("label") is None for p in kept),
                    "ingest_turns": sum(int(r.get("failures") or 0) for r in ingested)}  # fmt: skip
        metrics["latency"]["add_session_s"] = percentiles([s for r in ingested for s in r["add_latency_s"]])
        return {
            "benchmark": self.name,
            # the package name the class is exported under (conf/benchmark/locomo.yaml), as before the split
            "benchmark_target": f"{__package__}.{type(self).__qualname__}",
            "system": getattr(system, "name", type(system).__name__),
            "convention": self.convention,
            "category_labels": {str(k): v for k, v in labels.items()},
            "top_k": self.top_k,
            "oracle_facts": self.oracle_facts,
            "slice": {**counts, "exclude_categories": list(self.exclude_categories), "evidence_fixes": sum(e.conversation.evidence_fixes for e in episodes)},
            "main_metric": metrics["overall"]["judge"]["mean"],
            **metrics,
            "gold": self.gold,
            "gold_slices": slices,
            "audit_errata_sha256": hashlib.sha256(errata).hexdigest() if excluded is not None and errata is not None else None,
            "judge_prompt": ctx.judge.prompt.name,
            "judge_failures": metrics["overall"]["judge_failures"],
            "ingest": ingest_summary(ingested),
            # failed LLM work: rows retried by the next run of the same command; turns the system failed to add
            "failures": failures,
        }

    def _ingest_and_predict(
        self, system: MemorySystem, episodes: list[Episode], ctx: RunContext, ingest_rows: JsonlRows, predictions: JsonlRows
    ) -> bool:
        """Ingest every conversation with questions left and predict them; whether there was any."""
        todo = [e for e in episodes if any(not predicted(predictions, q) for q in e.questions)]
        n_questions = sum(not predicted(predictions, q) for e in todo for q in e.questions)
        ingest_bar = tqdm(total=sum(len(e.sessions) for e in todo), desc="ingest (sessions)", unit="session", position=0)
        predict_bar = tqdm(total=n_questions, desc="predict (questions)", unit="q", position=1)
        workers, guard = ctx.workers, SystemGuard(system)
        sessions = Progress(ctx, "ingest", ingest_bar.total)
        session_rows = ctx.rows("ingest_sessions")

        def answer_one(item: tuple[Episode, Question, Search | None]) -> None:
            episode, question, found = item
            if found is None:
                with guard.searching(episode.namespace):
                    found = search(system, episode, question, ctx, self.top_k)
            predictions.replace(predict(system, episode, question, ctx, self.top_k, found))  # replaces a failed try
            predict_bar.update(1)

        def episode_one(episode: Episode) -> None:
            """Ingest one conversation, then predict its questions on the shared question pool."""
            with guard.writing():
                row = ingest(system, episode, ctx, ingest_bar, sessions, session_rows, self.oracle_facts)
            ingest_rows.append(row)  # first ingest's report is kept; a re-ingest does not duplicate it
            pending = [q for q in episode.questions if not predicted(predictions, q)]
            if guard.parallel_search:
                questions.map(answer_one, [(episode, q, None) for q in pending])
            elif pending:  # a search that changes state (MOSAIC's continuity term) runs in question order, one at a time
                with guard.searching(episode.namespace):
                    found = searches_in_order(system, episode, pending, ctx, self.top_k)
                questions.map(answer_one, [(episode, q, found[q.key]) for q in pending])

        try:
            with Stage(ctx, "predict", n_questions, workers) as questions:
                run_stage(ctx, "conversations", episode_one, todo, guard.namespace_workers(workers))
        finally:
            ingest_bar.close()
            predict_bar.close()
        return bool(todo)

    def _audited_keys(self, kept: list[dict[str, Any]], episodes: list[Episode], ctx: RunContext, errata: bytes | None) -> set[str] | None:
        """Score-changing questions of this slice, or None (logged) when the errata file is absent
        (``errata``: its bytes, read and checked at the start of the run)."""
        if errata is None:
            if self.gold == "audited_excluded":
                raise FileNotFoundError(f"benchmark.audit_errata={self.audit_errata}: not found; run `python -m scripts.download_data` (or --mirror DIR)")
            ctx.log.warning("benchmark.audit_errata=%s not found: only original-gold scores (python -m scripts.download_data)", self.audit_errata)
            return None
        positions = {e.conversation.sample_id: e.conversation.position for e in episodes}
        excluded = audited_keys(kept, positions, self.audit_errata, errata)
        ctx.log.info("audited gold: %d of %d questions in this slice have a score-changing gold error", len(excluded), len(kept))
        return excluded

    def _score(self, episodes: list[Episode], ctx: RunContext, predictions: JsonlRows) -> JsonlRows:
        judgements = ctx.rows("judgements")
        judge = ctx.judge  # built from conf/judge (prompt, max_tokens, attempts) by the runner
        todo = [p for e in episodes for q in e.questions if (p := predictions.get(q.key)) and not judged(judgements, p)]
        bar = tqdm(total=len(todo), desc="score (judge)", unit="q")

        def judge_one(p: dict[str, Any]) -> None:
            judgements.replace(judgement_row(judge, p))
            bar.update(1)

        try:
            run_stage(ctx, "judge", judge_one, todo)
        finally:
            bar.close()
        failures = sum(j["label"] is None for j in judgements.rows())
        if failures:
            ctx.log.warning("judge: %d answers could not be graded (schema failures, counted as judge_failures)", failures)
        return judgements

    # -- tables ----------------------------------------------------------------------------
    config_problems = staticmethod(config_problems)  # its own keys' checks, before anything is built (core.api.ChecksOwnConfig)
    upgrade_record = staticmethod(upgrade_record)  # what a version-1 record lacks, from its rows (core.api.UpgradesRecords)

    @staticmethod
    def make_table(metrics_list: list[dict[str, Any]], convention: str | None = None) -> pd.DataFrame:
        """Table 1: one row per run (system / ablation), categories x judge/F1/BLEU-1 with CIs; retrieval-only runs
        (retrieval_table.py) get their own table, never a Table 1 row."""
        if metrics_list and all(is_retrieval_only(m) for m in metrics_list):
            from eval.benchmarks.locomo.retrieval_table import retrieval_table  # pandas and plots: imported where a table is built

            return retrieval_table(metrics_list)
        return locomo_table([m for m in metrics_list if not is_retrieval_only(m)], convention)

    @staticmethod
    def make_extra_tables(metrics_list: list[dict[str, Any]]) -> dict[str, pd.DataFrame]:
        """``locomo_judge_gold``: the judge-and-gold view of Table 1 (both gold columns, calibration, judge2);
        ``locomo_headline``: the README's few columns; ``locomo_budget``: recall at equal token budgets."""
        from eval.benchmarks.locomo.budget_table import budget_table  # pandas, imported where a table is built

        return {"locomo_judge_gold": judge_gold_table(metrics_list), "locomo_headline": headline_table(metrics_list),
                "locomo_budget": budget_table(metrics_list)}

    @staticmethod
    def make_figures(metrics_list: list[dict[str, Any]], out: Path) -> list[Path]:
        """``locomo_recall_vs_tokens.png``: evidence recall against the token budget, per run with stored lists."""
        from eval.benchmarks.locomo.budget_table import recall_figure

        return recall_figure(metrics_list, out)

    # -- what eval/'s shared reporting asks of this benchmark (core.api's per-benchmark reporting Protocols) --------
    comparison = staticmethod(paired_comparison)  # scripts.compare_runs: eval/benchmarks/locomo/compare.py
    recompute_retrieval = staticmethod(recompute_retrieval)  # scripts.add_fields: retrieval_paired.py
    decomposition = staticmethod(decomposition_columns)  # results/tables/decomposition: decomposition.py
