"""conf/system/mosaic.yaml is the whole truth: every key reaches its object, and a wrong key or value
fails when the system is built (before any ingest), naming the key."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import InstantiationException

from core.config_check import ConfigKeyError
from eval.runner import build_system
from mosaic.memory import MosaicMemory
from tests.conftest import REPO
from tests.fakes import FakeLLM
from tests.unit.mosaic.test_graph import BowEmbedder

CONF = REPO / "conf"

# one non-default value per key of conf/system/mosaic.yaml (top level, then block.key)
NON_DEFAULT: dict[str, object] = {
    "name": "mosaic_b", "persist": False, "search_weight": 0.35, "search_pool_factor": 3, "search_pool_extra": 2, "importance": 0.5,
    "hand_over_edges": False, "superseded": "mark",
    "extract.max_entities": 4, "extract.max_tokens": 111, "extract.context_chars": 50, "extract.max_fact_chars": 99, "extract.copy_margin": 0.25,
    "extract.held_facts": 2, "extract.turns_per_call": 2, "extract.source": "oracle", "extract.concurrent_calls": 3,
    "extract.output_format": "rows",
    "gate.enabled": False, "gate.rho_min": 0.7, "gate.delta": 0.5, "gate.weights": (0.5, 0.25, 0.25), "gate.rule_weight": 0.6,
    "gate.new_value_prior": 0.3, "gate.likelihood_floor": 0.1, "gate.llm_assessment": False, "gate.max_tokens": 55,
    "gate.exclusivity_check": True,
    "conflict.enabled": True, "conflict.k": 10, "conflict.n_facts": 10, "conflict.mode": "pick", "conflict.threshold": 0.5,
    "conflict.min_similarity": 0.1, "conflict.numeric_similarity": 0.8, "conflict.numeric_tolerance": 0.05,
    "conflict.duplicate_similarity": 0.9, "conflict.reject_margin": 0.3, "conflict.use_numeric_rule": False, "conflict.use_llm": False,
    "conflict.explain": True, "conflict.max_explain_tokens": 20, "conflict.top_logprobs": 5, "conflict.use_belief": False,
    "conflict.judge_min_similarity": 0.4, "conflict.judge": "proposed", "conflict.batch": True, "conflict.revision_similarity": 0.8,
    "conflict.source": "gold",
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
# reads one nli label per check, with no "why?" call; the rows format has no prompt with held facts or several
# messages): checked in a build of their own
ALONE: dict[str, object] = {"extract.turns_per_call": 2, "conflict.batch": True, "extract.source": "oracle", "extract.output_format": "rows",
                            "conflict.source": "gold"}

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
        (["system.retrieval.lsh_tables=abc"], r"system\.retrieval\.lsh_tables='abc': must be int >= 1"),
        (["system.gate.weights=[1,2]"], r"system\.gate\.weights=\[1, 2\]: must be a list of 3 x float >= 0"),
        (["system.conflict.k=-1"], r"system\.conflict\.k=-1: must be int >= 1"),
        (["system.retrieval.mode=ivf"], r"system\.retrieval\.mode='ivf': must be 'dual' or 'exact' or 'hnsw'"),
        (["system.importance=often"], r"system\.importance"),
        (["system.conflict.judge=proposed"], r"system\.conflict\.judge=proposed .* needs system\.extract\.held_facts >= 1"),
        (["ablation=batched_writes", "system.extract.held_facts=2"], r"system\.extract\.turns_per_call=2 with system\.extract\.held_facts=2: cannot be combined"),
        (["system.conflict.batch=true", "system.conflict.mode=pick"], r"system\.conflict\.batch=true needs system\.conflict\.mode=nli"),
        (["system.extract.source=gold"], r"system\.extract\.source='gold': must be 'model' or 'oracle'"),
        (["ablation=oracle_extractor", "system.extract.held_facts=2"], r"system\.extract\.source=oracle with system\.extract\.held_facts=2: cannot be combined"),
        (["system.retry.attempts=0"], r"system\.retry\.attempts=0: Input should be greater than or equal to 1"),
        (["+system.retry.tries=2"], r"system\.retry\.tries=2: Unexpected keyword argument"),
        (["system=rag", "+system.no_such_knob=1"], r"system\.no_such_knob: unknown key for baselines\.rag\.RagMemory"),
        (["system=full_context", "system.chars_per_token=many"], r"system\.chars_per_token='many': must be"),
    ],
)
def test_a_wrong_key_or_value_fails_at_validation_naming_the_key(overrides, message):
    """Checked once, by the runner's validate(), before the run folder exists; build_system does not check again."""
    with pytest.raises(ConfigKeyError, match=message):
        _validate(overrides if any(o.startswith("system=") for o in overrides) else ["system=mosaic", *overrides])


def test_the_retriever_is_built_at_start(tmp_path):
    """A retrieval mistake that only the constructor sees fails before any ingest, not at the first search."""
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


# -- ranges: every numeric value's range is its constructor parameter's type, checked at validation ---------------
def _numeric(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) or isinstance(value, tuple)


def _bounds(hint: object) -> list[tuple[str, float]]:
    """(kind, bound) of every ge/gt/le/lt in a parameter's annotation (inside unions, tuples and Annotated)."""
    import typing

    found = []
    if typing.get_origin(hint) is typing.Annotated:
        for meta in typing.get_args(hint)[1:]:
            for item in [meta, *getattr(meta, "metadata", [])]:
                found += [(kind, getattr(item, kind)) for kind in ("ge", "gt", "le", "lt") if isinstance(getattr(item, kind, None), int | float)]
    for arg in typing.get_args(hint):
        found += _bounds(arg) if arg is not hint else []
    return list(dict.fromkeys(found))


def _parameter_types() -> dict[str, tuple[object, object]]:
    """Each key of conf/system/mosaic.yaml -> (its constructor parameter's type, the parameter's default)."""
    import inspect

    from hydra.utils import get_object

    from core.config_check import _annotations
    from core.llm import RetryPolicy

    shipped = yaml.safe_load((CONF / "system" / "mosaic.yaml").read_text())
    out = {}
    for key in _yaml_keys():
        block, _, inner = key.rpartition(".")
        target = RetryPolicy if block == "retry" else get_object(shipped[block]["_target_"] if block else shipped["_target_"])
        params = inspect.signature(target).parameters
        out[key] = (_annotations(target, params).get(inner), params[inner].default)
    return out


def test_every_numeric_mosaic_key_has_a_range_in_its_constructor():
    types = _parameter_types()
    numeric = {key for key, value in NON_DEFAULT.items() if _numeric(value)}
    assert len(numeric) > 60  # not vacuous
    unbounded = {key for key in numeric if not _bounds(types[key][0])}
    assert unbounded == set(), "numeric keys of conf/system/mosaic.yaml whose constructor parameter declares no range"


def test_shipped_and_test_values_are_in_range():
    from core.config_check import check_config

    shipped = yaml.safe_load((CONF / "system" / "mosaic.yaml").read_text())
    shipped["retrieval"]["seed"] = shipped["communities"]["seed"] = 0  # ${seed}
    check_config(shipped, "system")
    nested = copy.deepcopy(shipped)
    for key, value in NON_DEFAULT.items():
        block, _, inner = key.rpartition(".")
        if key not in ALONE:
            (nested[block] if block else nested)[inner] = list(value) if isinstance(value, tuple) else value
    check_config(nested, "system")


def _validate(overrides: list[str]):
    from eval.runner import validate
    from tests.hydra_config import compose_config

    validate(compose_config(["benchmark=conflict", "llm=openai_compat", "llm.base_url=http://127.0.0.1:9", "llm.model=m", *overrides]))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("system.extract.max_entities=0", r"system\.extract\.max_entities=0: must be int >= 1"),
        ("system.conflict.threshold=-3", r"system\.conflict\.threshold=-3: must be float >= 0 and <= 1"),
        ("system.conflict.threshold=1.5", r"system\.conflict\.threshold=1\.5: must be float >= 0 and <= 1"),
        ("system.gate.new_value_prior=2", r"system\.gate\.new_value_prior=2: must be float >= 0 and <= 1"),
        ("system.scoring.alpha=-0.1", r"system\.scoring\.alpha=-0\.1: must be float >= 0"),
        ("system.gate.weights=[-1,1,1]", r"system\.gate\.weights=\[-1, 1, 1\]: must be a list of 3 x float >= 0"),
        ("system.gate.weights=[0,0,0]", r"not all 0"),
        ("system.scoring.damping=1", r"system\.scoring\.damping=1: must be float > 0 and < 1"),
        ("system.retrieval.top_k=0", r"system\.retrieval\.top_k=0: must be int >= 1"),
        ("system.communities.n_iterations=0", r"system\.communities\.n_iterations=0: must be int >= 1 or -1"),
        ("system.importance=1.5", r"system\.importance=1\.5: must be 'rho' or float >= 0 and <= 1"),
    ],
)
def test_out_of_range_values_fail_at_validation_naming_key_and_range(override, message):
    """validate() runs before the run folder exists (eval.runner.run), so these cost nothing and leave nothing."""
    with pytest.raises(ConfigKeyError, match=message):
        _validate(["system=mosaic", override])


def test_each_bound_of_a_constructor_parameter_is_enforced_just_outside_it():
    """Generated from the signatures: one value just below each lower bound and just above each upper bound fails."""
    from omegaconf import OmegaConf

    from eval.runner import validate
    from tests.hydra_config import compose_config

    base = compose_config(["system=mosaic", "benchmark=conflict", "llm=openai_compat", "llm.base_url=http://127.0.0.1:9", "llm.model=m"])
    validate(base)  # the shipped values pass
    tried = 0
    for key, (hint, _default) in _parameter_types().items():
        step = 0.5 if isinstance(NON_DEFAULT[key], float) else 1
        outside = [bound - step if kind in ("ge", "gt") else bound + step for kind, bound in _bounds(hint)]
        for value in outside:
            if key == "communities.n_iterations" and value == -1:  # -1: until stable
                continue
            cfg = copy.deepcopy(base)
            OmegaConf.update(cfg, f"system.{key}", [value] * 3 if isinstance(NON_DEFAULT[key], tuple) else value)
            with pytest.raises(ConfigKeyError, match=rf"system\.{key}"):
                validate(cfg)
            tried += 1
    assert tried > 60


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["system.conflict.judge=proposed"], r"system\.conflict\.judge=proposed .* needs system\.extract\.held_facts >= 1"),
        (["ablation=batched_writes", "system.extract.held_facts=2"], r"system\.extract\.turns_per_call=2 with system\.extract\.held_facts=2"),
        (["system.conflict.batch=true", "system.conflict.explain=true"], r"system\.conflict\.batch=true needs .*explain=True"),
        (["system.conflict.judge_min_similarity=0.1"], r"judge_min_similarity=0\.1 is below system\.conflict\.min_similarity=0\.2"),
        (["ablation=extract_rows", "system.extract.held_facts=2"], r"system\.extract\.output_format=rows with system\.extract\.held_facts=2"),
        (["system.conflict.revision_similarity=0.97"], r"revision_similarity=0\.97 must lie in \[system\.conflict\.min_similarity=0\.2, system\.conflict\.duplicate_similarity=0\.95\)"),
    ],
)
def test_settings_that_cannot_run_together_fail_at_validation(overrides, message):
    with pytest.raises(ConfigKeyError, match=message):
        _validate(overrides if any(o.startswith("system=") for o in overrides) else ["system=mosaic", *overrides])
    _validate(["system=mosaic", "ablation=fused_conflict"])  # the variant that sets both keys passes
def test_the_oracle_extractor_variant_sets_its_source_and_builds(tmp_path):
    memory = _build(["ablation=oracle_extractor"], tmp_path)
    assert memory.extractor.source == ALONE["extract.source"]
    assert _build([], tmp_path / "default").extractor.source == "model"  # the paper's extraction


def test_the_oracle_judge_variant_sets_both_sources_and_builds(tmp_path):
    memory = _build(["ablation=oracle_judge"], tmp_path)
    assert memory.extractor.source == "oracle" and memory._space("ns").detector.source == ALONE["conflict.source"]
    assert _build([], tmp_path / "default")._space("ns").detector.source == "model"  # the paper's judge
    with pytest.raises(ConfigKeyError, match="extract.source=oracle"):
        _validate(["system=mosaic", "system.conflict.source=gold"])  # gold ids come with oracle facts only


def test_the_rows_extraction_variant_switches_only_the_output_format(tmp_path):
    memory = _build(["ablation=extract_rows"], tmp_path)
    assert memory.extractor.output_format == ALONE["extract.output_format"] and memory.extractor.schema["properties"]["facts"]["items"]["type"] == "array"
    assert _build([], tmp_path / "default").extractor.output_format == "objects"  # the paper's extraction
