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

from core.api import ChecksOwnConfig, DeclaresRanking, ReadsOracleFacts
from core.config_check import Rule

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
    found += _benchmark_problems(cfg)
    found += _oracle_problems(cfg)
    found += _retrieval_only_problems(cfg)
    return found


def _class(target: Any) -> type | None:
    """The class of a ``_target_`` (None when it cannot be imported: validate/instantiate report that with its own message)."""
    try:
        return get_class(str(target)) if target else None
    except Exception:
        return None


def _retrieval_only_problems(cfg: DictConfig) -> list[str]:
    """A retrieval-only run (``benchmark.stages=[ingest, retrieve]``) of a system that ranks nothing
    (core.api.DeclaresRanking) fails here: it would measure nothing."""
    present, stages = _get(cfg, "benchmark.stages")
    if not present or stages is None or "answer" in stages:
        return []
    system = _class(OmegaConf.select(cfg, "system._target_", default=None))
    if isinstance(system, DeclaresRanking) and not system.ranks_search:
        name = OmegaConf.select(cfg, "system.name", default=None)
        return [f"benchmark.stages={list(stages)} with system={name}: {name} retrieves everything it holds, so there is no ranking to score; "
                "run it with the full stages or pick a system whose search ranks memories"]
    return []


def _benchmark_problems(cfg: DictConfig) -> list[str]:
    """The benchmark's checks of its own keys (core.api.ChecksOwnConfig), e.g. a category list only its data defines."""
    block = OmegaConf.select(cfg, "benchmark", default=None)
    benchmark = _class(OmegaConf.select(cfg, "benchmark._target_", default=None))
    return list(benchmark.config_problems(block)) if isinstance(benchmark, ChecksOwnConfig) and block is not None else []


def _parameters(target: str) -> set[str]:
    """Constructor parameter names of a ``_target_`` class (any name when it cannot be imported: instantiate says why)."""
    cls = _class(target)
    try:
        return set(inspect.signature(cls).parameters) if cls is not None else {"oracle_facts"}
    except (TypeError, ValueError):
        return {"oracle_facts"}


def _oracle_readers(block: Any, where: str) -> list[tuple[str, Any]]:
    """``(key, value)`` of every setting in ``block`` (a system block and the blocks inside it) that a class declares
    as its switch to the benchmark's gold facts (core.api.ReadsOracleFacts), e.g. ``system.source``."""
    found: list[tuple[str, Any]] = []
    if not isinstance(block, DictConfig):
        return found
    cls = _class(block.get("_target_"))
    if isinstance(cls, ReadsOracleFacts) and cls.oracle_source_parameter in block:
        found.append((f"{where}.{cls.oracle_source_parameter}", block.get(cls.oracle_source_parameter)))
    for key in block:
        found += _oracle_readers(OmegaConf.select(block, str(key), default=None, throw_on_resolution_failure=False), f"{where}.{key}")
    return found


def _oracle_problems(cfg: DictConfig) -> list[str]:
    """A system told to read the benchmark's gold facts needs a benchmark that attaches them (else it would
    silently store nothing), and a benchmark asked to attach them must ship some."""
    found = []
    present, wanted = _get(cfg, "benchmark.oracle_facts")
    target = OmegaConf.select(cfg, "benchmark._target_", default=None)
    if present and target and "oracle_facts" not in _parameters(str(target)):
        found.append(f"benchmark.oracle_facts={wanted!r}: benchmark {OmegaConf.select(cfg, 'benchmark.name')!r} ships no gold facts "
                     "to attach; the oracle rows (ablation=oracle_extractor, oracle_facts, oracle_judge) need a benchmark whose "
                     "config has oracle_facts (conf/benchmark/)")  # fmt: skip
    for key, value in _oracle_readers(OmegaConf.select(cfg, "system", default=None), "system"):
        if value == "oracle" and _get(cfg, "benchmark.oracle_facts") != (True, True):
            found.append(f"{key}=oracle reads the benchmark's gold facts, but benchmark.oracle_facts is not true: "
                         "use an oracle ablation (ablation=oracle_extractor or oracle_facts, conf/ablation/), or set "
                         "benchmark.oracle_facts=true with a benchmark that has gold facts (its config has oracle_facts)")  # fmt: skip
    return found
