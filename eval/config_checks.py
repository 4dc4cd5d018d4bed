"""Range checks for every numeric run-level, benchmark and judge option, before any work.

``benchmark.max_sessions=0`` used to ingest the whole conversation and ``max_questions=-1`` finished
with no questions and exit 0; each such value now fails at start with the key and the allowed range.
A rule applies only where its key exists in the composed config (benchmarks differ in their keys).
Blocks with a ``_target_`` (system, llm, answerer, embedder, logger) have their own schema: their constructor's
signature, whose parameter types carry the ranges (``timeout_s: Positive``), and the class's ``CONFIG_RULES``
(core.config_check; the runner's validate() checks them once).
"""

from __future__ import annotations

import inspect
from typing import Any

from hydra.utils import get_class
from omegaconf import DictConfig, ListConfig, OmegaConf

from core.config_check import Rule
from eval.benchmarks.locomo.data import CONVENTIONS

COUNT = Rule(low=1)  # a count of things to use: at least one
LIMIT = Rule(low=1, nullable=True)  # a slice limit: null = all, else at least one
SEED = Rule(low=0)

BENCHMARK_RULES = {
    "max_sessions": LIMIT, "max_questions": LIMIT, "top_k": COUNT, "bootstrap_samples": COUNT, "seed": SEED,
    "judge_max_tokens": COUNT, "judge_attempts": COUNT, "radius_k": COUNT, "limit_cases": LIMIT,
    "cases_per_group": LIMIT, "update_k": COUNT, "qa_k": COUNT, "limit_users": LIMIT, "limit_sessions": LIMIT,
}  # fmt: skip
RUN_RULES = {"seed": SEED, "run.workers": COUNT}
JUDGE_RULES = {"max_tokens": COUNT, "attempts": COUNT, "top_logprobs": COUNT}  # conf/judge: the judge every benchmark gets (eval.judge.build_judge)
BOOL_KEYS = ("overwrite", "resume.allow_code_change")
LOCOMO_CATEGORIES = frozenset(CONVENTIONS["locomo"])  # the category numbers LoCoMo's file uses (both conventions)


def _get(cfg: DictConfig, dotted: str) -> tuple[bool, Any]:
    value = OmegaConf.select(cfg, dotted, default="\0missing")
    return (False, None) if value == "\0missing" else (True, value)


def problems(cfg: DictConfig) -> list[str]:
    """Every invalid value, each as ``key=value: must be ...``; empty when the config may run."""
    checks: list[tuple[str, Rule]] = [(key, rule) for key, rule in RUN_RULES.items()]
    checks += [(f"benchmark.{key}", rule) for key, rule in BENCHMARK_RULES.items()]
    checks += [(f"judge.{key}", rule) for key, rule in JUDGE_RULES.items()]
    found = []
    for key, rule in checks:
        present, value = _get(cfg, key)
        if present and not rule.accepts(value):
            found.append(f"{key}={value!r}: must be {rule.describe()}")
    for key in BOOL_KEYS:
        present, value = _get(cfg, key)
        if present and not isinstance(value, bool):
            found.append(f"{key}={value!r}: must be true or false")
    found += _list_problems(cfg)
    found += _oracle_problems(cfg)
    found += _retrieval_only_problems(cfg)
    return found


# Systems whose search does not rank memories (full_context hands the answerer every turn): a retrieval-only run
# of them would measure nothing
UNRANKED_SYSTEMS = ("full_context",)


def _retrieval_only_problems(cfg: DictConfig) -> list[str]:
    """A retrieval-only run (``benchmark.stages=[ingest, retrieve]``) of a system that ranks nothing fails here."""
    present, stages = _get(cfg, "benchmark.stages")
    if not present or stages is None or "answer" in stages:
        return []
    system = OmegaConf.select(cfg, "system.name", default=None)
    if system in UNRANKED_SYSTEMS:
        return [f"benchmark.stages={list(stages)} with system={system}: {system} retrieves every turn, so there is no ranking to score; "
                "run it with the full stages or pick a system that searches (rag, mosaic, mem0, ...)"]
    return []


def _parameters(target: str) -> set[str]:
    """Constructor parameter names of a ``_target_`` class (empty when it cannot be imported: instantiate says why)."""
    try:
        return set(inspect.signature(get_class(target)).parameters)
    except Exception:  # an unimportable target is reported by validate/instantiate with its own message
        return {"oracle_facts"}


def _oracle_problems(cfg: DictConfig) -> list[str]:
    """A system told to read the benchmark's gold facts needs a benchmark that attaches them (else it would
    silently store nothing): ``system.extract.source=oracle`` (MOSAIC) or ``system.source=oracle`` (rag)."""
    found = []
    present, wanted = _get(cfg, "benchmark.oracle_facts")
    target = OmegaConf.select(cfg, "benchmark._target_", default=None)
    if present and target and "oracle_facts" not in _parameters(str(target)):
        found.append(f"benchmark.oracle_facts={wanted!r}: benchmark {OmegaConf.select(cfg, 'benchmark.name')!r} ships no gold facts "
                     "to attach; the oracle rows (ablation=oracle_extractor, oracle_facts, oracle_judge) run on halumem, locomo and conflict")  # fmt: skip
    for key in ("system.extract.source", "system.source"):
        present, value = _get(cfg, key)
        if present and value == "oracle" and _get(cfg, "benchmark.oracle_facts") != (True, True):
            found.append(f"{key}=oracle reads the benchmark's gold facts, but benchmark.oracle_facts is not true: "
                         "use ablation=oracle_extractor (MOSAIC) or ablation=oracle_facts (rag), or set benchmark.oracle_facts=true "
                         "with a benchmark that has gold facts (halumem, locomo)")  # fmt: skip
    return found


def _list_problems(cfg: DictConfig) -> list[str]:
    found = []
    present, conversations = _get(cfg, "benchmark.conversations")
    if present and conversations is not None:
        if not isinstance(conversations, ListConfig | list) or not conversations:
            found.append(f"benchmark.conversations={conversations!r}: must be null (all) or a non-empty list of indices >= 0 / sample ids")
        else:
            bad = [c for c in conversations if isinstance(c, bool) or not (isinstance(c, str) or (isinstance(c, int) and c >= 0))]
            if bad:
                found.append(f"benchmark.conversations has {bad}: each must be an index >= 0 or a sample id such as conv-26")
    present, categories = _get(cfg, "benchmark.exclude_categories")
    if present and categories is not None:
        if not isinstance(categories, ListConfig | list) or any(isinstance(c, bool) or not isinstance(c, int) for c in categories):
            found.append(f"benchmark.exclude_categories={categories!r}: must be a list of category numbers, e.g. [5]")
        elif any(c not in LOCOMO_CATEGORIES for c in categories):
            found.append(f"benchmark.exclude_categories={list(categories)!r}: LoCoMo's categories are {sorted(LOCOMO_CATEGORIES)}, e.g. [5]")
    return found
