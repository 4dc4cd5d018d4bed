"""conf/system/mosaic.yaml is the whole truth: every key reaches its object, and a wrong key or value
fails when the system is built (before any ingest), naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import InstantiationException

from core.config_check import ConfigKeyError
from eval.runner import build_system
from mosaic.memory import MosaicMemory
from tests.fakes import FakeLLM
from tests.unit.test_graph import BowEmbedder

CONF = Path(__file__).resolve().parents[2] / "conf"

# one non-default value per key of conf/system/mosaic.yaml (top level, then block.key)
NON_DEFAULT: dict[str, object] = {
    "name": "mosaic_b", "persist": False, "search_weight": 0.35, "search_pool_factor": 3, "search_pool_extra": 2, "importance": 0.5,
    "extract.max_entities": 4, "extract.max_tokens": 111, "extract.context_chars": 50, "extract.max_fact_chars": 99, "extract.copy_margin": 0.25,
    "extract.held_facts": 2, "extract.turns_per_call": 2,
    "gate.enabled": False, "gate.rho_min": 0.7, "gate.delta": 0.5, "gate.weights": (0.5, 0.25, 0.25), "gate.rule_weight": 0.6,
    "gate.new_value_prior": 0.3, "gate.likelihood_floor": 0.1, "gate.llm_assessment": False, "gate.max_tokens": 55,
    "gate.exclusivity_check": True,
    "conflict.enabled": True, "conflict.k": 10, "conflict.n_facts": 10, "conflict.mode": "pick", "conflict.threshold": 0.5,
    "conflict.min_similarity": 0.1, "conflict.numeric_similarity": 0.8, "conflict.numeric_tolerance": 0.05,
    "conflict.duplicate_similarity": 0.9, "conflict.reject_margin": 0.3, "conflict.use_numeric_rule": False, "conflict.use_llm": False,
    "conflict.explain": True, "conflict.max_explain_tokens": 20, "conflict.top_logprobs": 5, "conflict.use_belief": False,
    "conflict.judge_min_similarity": 0.4, "conflict.judge": "proposed", "conflict.batch": True,
    "scoring.alpha": 0.4, "scoring.beta": 0.4, "scoring.gamma": 0.1, "scoring.damping": 0.9, "scoring.prereq_weight": 0.5,
    "scoring.power_tol": 1e-6, "scoring.max_power_iterations": 50, "scoring.ncs": False, "scoring.refresh_every": 100,
    "scoring.drift_tolerance": 0.05, "scoring.push_epsilon": 0.001, "scoring.refresh_per_node": 0.1, "scoring.max_interval_scale": 4.0,
    "retrieval.mode": "hnsw", "retrieval.top_k": 7, "retrieval.lsh_tables": 12, "retrieval.lsh_bits": 8,
    "retrieval.auto_bits_member_cosine": 0.6, "retrieval.auto_bits_per_bucket": 8.0, "retrieval.confidence_threshold": 0.4,
    "retrieval.vote_ratio": 0.6, "retrieval.max_communities": 3, "retrieval.min_candidates": 10, "retrieval.min_similarity": 0.3,
    "retrieval.route_describe": 5, "retrieval.route_max_tokens": 32, "retrieval.hnsw_m": 16, "retrieval.hnsw_ef_search": 32,
    "retrieval.hnsw_ef_construction": 40, "retrieval.seed": 7, "retrieval.with_source_turns": True, "retrieval.match_source_turns": True,
    "graph.assoc_threshold": 0.6, "graph.assoc_top_n": 3,
    "communities.resolution": 0.5, "communities.rerun_fraction": 0.1, "communities.rerun_every": 3, "communities.min_nodes_for_rerun": 2,
    "communities.n_iterations": 3, "communities.seed": 7, "communities.local_rerun_fraction": 0.25, "communities.local_min_size": 4,
    "communities.local_from_nodes": 50, "communities.backstop_rerun_fraction": 0.5,
    "retry.attempts": 3, "retry.temperature": 0.5, "retry.seed": 4,
}  # fmt: skip

# keys whose non-default value refuses another's (a group extraction shows no held facts; a batched judgement
# reads one nli label per check, with no "why?" call): checked in a build of their own
ALONE: dict[str, object] = {"extract.turns_per_call": 2, "conflict.batch": True}

# a key the runner's check refuses raises ConfigKeyError; a value a constructor refuses comes through Hydra's
# instantiate, which wraps it (the message still names the key)
REFUSED = (ConfigKeyError, InstantiationException)

# where a key lands when the object keeps it under another name or form
READ = {"scoring.damping": lambda scorer: 1.0 - scorer.teleport}


def _yaml_keys() -> set[str]:
    raw = yaml.safe_load((CONF / "system" / "mosaic.yaml").read_text())
    keys: set[str] = set()
    for key, value in raw.items():
        if isinstance(value, dict):
            keys |= {f"{key}.{inner}" for inner in value if not inner.startswith("_")}
        elif not key.startswith("_"):
            keys.add(key)
    return keys


def _compose(overrides: list[str]):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        chosen = [] if any(o.startswith("system=") for o in overrides) else ["system=mosaic"]
        return compose("config", overrides=[*chosen, "benchmark=conflict", "llm=local_small", *overrides])


def _override(key: str, value: object) -> str:
    if isinstance(value, tuple):
        value = "[" + ",".join(str(v) for v in value) + "]"
    elif isinstance(value, bool):
        value = str(value).lower()
    return f"system.{key}={value}"


def _build(overrides: list[str], tmp_path: Path):
    return build_system(_compose(overrides), FakeLLM(lambda m, s: {"facts": []}), BowEmbedder(), tmp_path)


def test_every_key_of_the_mosaic_config_is_covered_here():
    assert _yaml_keys() == set(NON_DEFAULT)
    defaults = yaml.safe_load((CONF / "system" / "mosaic.yaml").read_text())
    for key, value in NON_DEFAULT.items():
        block, _, inner = key.rpartition(".")
        default = defaults[block][inner] if block else defaults[key]
        assert default != value or key == "conflict.enabled", f"{key}: the test value must differ from the default"


def test_non_default_values_reach_every_object(tmp_path):
    overrides = [_override(k, v) for k, v in NON_DEFAULT.items() if k not in ("retrieval.seed", "communities.seed", *ALONE)] + ["seed=7"]
    memory = _build(overrides, tmp_path)
    assert isinstance(memory, MosaicMemory)
    space = memory._space("ns")  # the per-namespace parts, built from the same blocks
    objects = {"": memory, "extract": memory.extractor, "gate": memory.gate, "conflict": space.detector, "scoring": space.scorer,
               "retrieval": space.retriever, "graph": space.graph, "communities": space.communities, "retry": memory.retry}
    for key, expected in NON_DEFAULT.items():
        if key in ALONE:
            continue
        block, _, inner = key.rpartition(".")
        read = READ.get(key, lambda obj, name=inner: getattr(obj, name))
        got = read(objects[block])
        assert got == pytest.approx(expected) if isinstance(expected, float) else got == expected, f"system.{key}: {got!r} != {expected!r}"


def test_the_conflict_switch_removes_the_detector(tmp_path):
    memory = _build(["system.conflict.enabled=false"], tmp_path)
    assert memory._space("ns").detector is None


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["+system.retrieval.no_such_knob=1"], r"system\.retrieval\.no_such_knob: unknown key for mosaic\.retrieval\.Retriever"),
        (["+system.no_such_knob=1"], r"system\.no_such_knob: unknown key for mosaic\.memory\.MosaicMemory"),
        (["system.retrieval.lsh_tables=abc"], r"system\.retrieval\.lsh_tables='abc' does not fit"),
        (["system.gate.weights=[1,2]"], r"system\.gate: gate\.weights needs 3 numbers"),
        (["system.conflict.k=-1"], r"system\.conflict: conflict\.k=-1 must be >= 1"),
        (["system.retrieval.mode=ivf"], r"system\.retrieval: retrieval\.mode must be one of"),
        (["system.importance=often"], r"system\.importance"),
        (["system.conflict.judge=proposed"], r"system\.conflict\.judge=proposed .* needs system\.extract\.held_facts >= 1"),
        (["ablation=batched_writes", "system.extract.held_facts=2"], r"system\.extract: extract\.turns_per_call > 1 and extract\.held_facts > 0 cannot be combined"),
        (["system.conflict.batch=true", "system.conflict.mode=pick"], r"system\.conflict: conflict\.batch=true needs conflict\.mode=nli"),
        (["system.retry.attempts=0"], r"system\.retry: attempts=0 must be >= 1"),
        (["+system.retry.tries=2"], r"system\.retry: .*tries"),
        (["system=rag", "+system.no_such_knob=1"], r"system\.no_such_knob: unknown key for baselines\.rag\.RagMemory"),
        (["system=full_context", "system.chars_per_token=many"], r"system\.chars_per_token='many' does not fit"),
    ],
)
def test_a_wrong_key_or_value_fails_at_build_naming_the_key(tmp_path, overrides, message):
    with pytest.raises(REFUSED, match=message):
        _build(overrides, tmp_path)


def test_the_retriever_is_built_at_start(tmp_path):
    """A retrieval mistake that only the constructor sees fails before any ingest, not at the first search."""
    with pytest.raises(REFUSED, match="system.retrieval: retrieval.hnsw_m=0 must be >= 1"):
        _build(["system.retrieval.hnsw_m=0"], tmp_path)
    with pytest.raises(REFUSED, match=r"system.retrieval: retrieval: lsh_tables\*lsh_bits = 24\*17 exceeds the vector size 384"):
        _build(["system.retrieval.lsh_bits=17"], tmp_path)


def test_the_fused_conflict_variant_sets_both_of_its_keys_and_builds(tmp_path):
    memory = _build(["ablation=fused_conflict"], tmp_path)
    assert memory.extractor.held_facts >= 1 and memory._space("ns").detector.judge == "proposed"
    default = _build([], tmp_path / "default")
    assert default.extractor.held_facts == 0 and default._space("ns").detector.judge == "always"  # the paper's write path


def test_the_exclusive_slots_variant_switches_only_the_gate_check(tmp_path):
    memory = _build(["ablation=exclusive_slots"], tmp_path)
    default = _build([], tmp_path / "default")
    assert memory.gate.exclusivity_check and not default.gate.exclusivity_check  # the paper's belief: every slot single-valued


def test_the_batched_writes_variant_sets_both_of_its_keys_and_builds(tmp_path):
    memory = _build(["ablation=batched_writes"], tmp_path)
    assert memory.extractor.turns_per_call == ALONE["extract.turns_per_call"]
    assert memory._space("ns").detector.batch is ALONE["conflict.batch"]
    default = _build([], tmp_path / "default")
    assert default.extractor.turns_per_call == 1 and default._space("ns").detector.batch is False  # the paper's write path


def test_the_paired_extraction_variant_pairs_turns_but_judges_each_check_alone(tmp_path):
    memory = _build(["ablation=paired_extraction"], tmp_path)
    detector = memory._space("ns").detector
    assert memory.extractor.turns_per_call == 2 and detector.batch is False  # single, calibrated judgements
    assert detector.judge_min_similarity == 0.75
    default = _build([], tmp_path / "default")
    assert default._space("ns").detector.judge_min_similarity is None  # the paper's write path asks every check
