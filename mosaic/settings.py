"""The allowed range of every numeric MOSAIC setting (conf/system/mosaic.yaml), from what the value means.

Types alone let nonsense through: ``extract.max_entities=0`` is an int (it paid every extraction call and
stored nothing) and ``conflict.threshold=-3`` a float (it flagged almost every write). This table is the one
place the ranges live. ``MosaicMemory.CONFIG_RANGES`` points here, so core.config_check checks the whole
``system`` block against it when the runner validates a config (before any run folder exists) and again
when the system is built; a value outside its range fails with one line naming the key and the range.
Keys are dotted paths inside the ``system`` block; a key absent from the block (a variant's file leaves
it out) is not checked. Switches (true/false) are checked by the constructors' types.

``combination_problems`` holds the rules that tie keys together (a mode that needs another setting);
``MosaicMemory.CONFIG_RULES`` points to it, so they too fail before the run folder. The constructors keep
their own checks as a backstop for objects built directly (tests, benchmarks scripts).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from core.config_check import Choice, NumberList, Rule
from mosaic.conflict import SOURCES as CONFLICT_SOURCES, ConflictDetector
from mosaic.extract import EXTRACTION_SOURCES, OUTPUT_FORMATS, EntityExtractor
from mosaic.retrieval import MODES as RETRIEVAL_MODES

COUNT = Rule(low=1)  # how many of something to use: at least one
TOKENS = Rule(low=1, meaning="a token cap")
SIZE = Rule(low=0)  # a size or count where 0 means none / off
PROBABILITY = Rule(low=0, high=1, integer=False)
SHARE = Rule(low=0, high=1, integer=False)
COSINE = Rule(low=-1, high=1, integer=False, meaning="a cosine similarity")
WEIGHT = Rule(low=0, integer=False)  # a non-negative weight of a mixture
POSITIVE = Rule(low=0, integer=False, low_open=True)
SEED = Rule(low=0)

RANGES: dict[str, Rule | NumberList | Choice] = {
    # the memory itself
    "search_weight": Rule(low=0, high=1, integer=False, meaning="share of the node score in the search rank"),
    "search_pool_factor": COUNT,
    "search_pool_extra": SIZE,
    "importance": Rule(low=0, high=1, integer=False, also=("rho",), meaning="a fixed importance, or rho"),
    # output guard (core.llm.RetryPolicy): tries in all, the retries' sampling temperature and their fixed seed
    "retry.attempts": Rule(low=1, meaning="tries of a structured call in all; 1 = no retry"),
    "retry.temperature": Rule(low=0, high=2, integer=False, meaning="temperature of the retries (0 repeats a greedy loop)"),
    "retry.seed": Rule(low=0, meaning="seed of the first retry"),
    # extraction
    "extract.max_entities": Rule(low=1, meaning="entities kept per turn; 0 would pay every call and store nothing"),
    "extract.max_tokens": TOKENS,
    "extract.context_chars": SIZE,
    "extract.max_fact_chars": COUNT,
    "extract.copy_margin": SHARE,
    "extract.held_facts": SIZE,
    "extract.turns_per_call": COUNT,
    "extract.concurrent_calls": COUNT,
    "extract.source": Choice(EXTRACTION_SOURCES),
    "extract.output_format": Choice(OUTPUT_FORMATS),
    # confidence gate
    "gate.rho_min": Rule(low=0, high=1, integer=False, low_open=True, meaning="the confidence a commit needs"),
    "gate.delta": Rule(low=0, integer=False, meaning="belief entropy in bits"),
    "gate.weights": NumberList(3, WEIGHT, meaning="directness, consistency, specificity"),
    "gate.rule_weight": SHARE,
    "gate.new_value_prior": PROBABILITY,
    "gate.likelihood_floor": Rule(low=0, high=0.5, integer=False, meaning="a likelihood is kept within [floor, 1 - floor]"),
    "gate.max_tokens": TOKENS,
    # save-time conflict check
    "conflict.k": Rule(low=1, meaning="nearest held entities checked; conflict.enabled=false turns checks off"),
    "conflict.n_facts": COUNT,
    "conflict.threshold": Rule(low=0, high=1, integer=False, meaning="p(false) at which a check is a conflict"),
    "conflict.min_similarity": COSINE,
    "conflict.numeric_similarity": COSINE,
    "conflict.numeric_tolerance": Rule(low=0, integer=False, meaning="relative difference of two numbers"),
    "conflict.duplicate_similarity": COSINE,
    "conflict.reject_margin": Rule(low=0, high=1, integer=False, meaning="difference of two evidence strengths in [0, 1]"),
    "conflict.max_explain_tokens": TOKENS,
    "conflict.top_logprobs": Rule(low=1, high=20, meaning="alternatives per token an OpenAI-compatible server returns"),
    "conflict.revision_similarity": Rule(low=-1, high=1, integer=False, nullable=True, meaning="a cosine; null: off"),
    "conflict.judge_min_similarity": Rule(low=-1, high=1, integer=False, nullable=True, meaning="a cosine; null: always ask"),
    # node scores
    "scoring.alpha": WEIGHT,
    "scoring.beta": WEIGHT,
    "scoring.gamma": WEIGHT,
    "scoring.damping": Rule(low=0, high=1, integer=False, low_open=True, high_open=True, meaning="PageRank damping"),
    "scoring.prereq_weight": WEIGHT,
    "scoring.power_tol": POSITIVE,
    "scoring.max_power_iterations": COUNT,
    "scoring.refresh_every": COUNT,
    "scoring.refresh_per_node": Rule(low=0, integer=False),
    "scoring.max_interval_scale": Rule(low=1, integer=False),
    "scoring.drift_tolerance": POSITIVE,
    "scoring.push_epsilon": POSITIVE,
    # retrieval
    "retrieval.mode": Choice(RETRIEVAL_MODES),
    "conflict.source": Choice(CONFLICT_SOURCES),
    "retrieval.top_k": COUNT,
    "retrieval.lsh_tables": COUNT,
    "retrieval.lsh_bits": Rule(low=1, high=40, nullable=True, meaning="bits per table; null: chosen from community size"),
    "retrieval.auto_bits_member_cosine": Rule(low=0, high=1, integer=False, low_open=True, high_open=True,
                                             meaning="typical cosine of two community members"),
    "retrieval.auto_bits_per_bucket": POSITIVE,
    "retrieval.confidence_threshold": SHARE,
    "retrieval.vote_ratio": SHARE,
    "retrieval.max_communities": COUNT,
    "retrieval.min_candidates": Rule(low=1, nullable=True, meaning="null: 4 * k"),
    "retrieval.min_similarity": COSINE,
    "retrieval.route_describe": COUNT,
    "retrieval.route_max_tokens": TOKENS,
    "retrieval.hnsw_m": COUNT,
    "retrieval.hnsw_ef_search": COUNT,
    "retrieval.hnsw_ef_construction": COUNT,
    "retrieval.seed": SEED,
    # association graph
    "graph.assoc_threshold": COSINE,
    "graph.assoc_top_n": SIZE,
    # communities
    "communities.resolution": POSITIVE,
    "communities.rerun_fraction": Rule(low=0, high=1, integer=False, low_open=True),
    "communities.rerun_every": Rule(low=0, meaning="0: never by count"),
    "communities.min_nodes_for_rerun": SIZE,
    "communities.n_iterations": Rule(low=1, also=(-1,), meaning="Leiden passes; -1: until stable"),
    "communities.seed": SEED,
    "communities.local_rerun_fraction": Rule(low=0, integer=False, meaning="0 turns local re-runs off"),
    "communities.local_min_size": COUNT,
    "communities.local_from_nodes": SIZE,
    "communities.backstop_rerun_fraction": POSITIVE,
}  # fmt: skip


# the class whose signature gives a block key's default when the config leaves the key out
_DEFAULTS_FROM = {"extract": EntityExtractor, "conflict": ConflictDetector}


def _setting(block: Mapping[str, Any], part: str, key: str) -> Any:
    node = block.get(part) or {}
    if key in node:
        return node[key]
    return inspect.signature(_DEFAULTS_FROM[part]).parameters[key].default


def combination_problems(block: Mapping[str, Any]) -> list[str]:
    """Settings that are each in range but cannot run together, as ``system.key=value ...: fix`` lines."""
    found = []
    held_facts, turns = _setting(block, "extract", "held_facts"), _setting(block, "extract", "turns_per_call")
    enabled, judge = _setting(block, "conflict", "enabled"), _setting(block, "conflict", "judge")
    if enabled and judge == "proposed" and held_facts < 1:
        found.append("system.conflict.judge=proposed confirms clashes the extraction call proposes, so it needs "
                     "system.extract.held_facts >= 1 (ablation=fused_conflict sets both)")  # fmt: skip
    if turns > 1 and held_facts > 0:
        found.append(f"system.extract.turns_per_call={turns} with system.extract.held_facts={held_facts}: cannot be combined "
                     "yet (the group prompt shows no held facts); set one of them back (1 / 0)")  # fmt: skip
    if _setting(block, "extract", "source") == "oracle" and held_facts > 0:
        found.append(f"system.extract.source=oracle with system.extract.held_facts={held_facts}: cannot be combined (the clash "
                     "proposal is part of the LLM call the oracle replaces); set system.extract.held_facts=0")  # fmt: skip
    if _setting(block, "extract", "output_format") == "rows" and (held_facts > 0 or turns > 1):
        found.append(f"system.extract.output_format=rows with system.extract.held_facts={held_facts} / turns_per_call={turns}: "
                     "cannot be combined yet (those prompts name fields); set held_facts=0 and turns_per_call=1")  # fmt: skip
    mode, explain, batch = (_setting(block, "conflict", key) for key in ("mode", "explain", "batch"))
    if batch and (mode != "nli" or explain):
        found.append(f"system.conflict.batch=true needs system.conflict.mode=nli and system.conflict.explain=false (got "
                     f"mode={mode}, explain={explain}): a batched call reads one label per check")  # fmt: skip
    floor, gate = _setting(block, "conflict", "min_similarity"), _setting(block, "conflict", "judge_min_similarity")
    if gate is not None and gate < floor:
        found.append(f"system.conflict.judge_min_similarity={gate} is below system.conflict.min_similarity={floor}: it "
                     "would never skip a call (null switches it off)")  # fmt: skip
    revision, duplicate = _setting(block, "conflict", "revision_similarity"), _setting(block, "conflict", "duplicate_similarity")
    if revision is not None and not floor <= revision < duplicate:
        found.append(f"system.conflict.revision_similarity={revision} must lie in [system.conflict.min_similarity={floor}, "
                     f"system.conflict.duplicate_similarity={duplicate}): below it no candidate reaches it, at or above it "
                     "the fact is a restatement (null switches it off)")  # fmt: skip
    if enabled and _setting(block, "conflict", "source") == "gold" and _setting(block, "extract", "source") != "oracle":
        found.append("system.conflict.source=gold answers from the gold ids of oracle facts, so it needs system.extract.source=oracle "
                     "(ablation=oracle_judge sets both)")  # fmt: skip
    if _setting(block, "conflict", "source") == "gold" and batch:
        found.append("system.conflict.source=gold with system.conflict.batch=true: the gold judge needs no batched call; "
                     "set system.conflict.batch=false")  # fmt: skip
    return found
