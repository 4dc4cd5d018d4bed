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

# A value other than conf's for every key of conf/system/mosaic.yaml is generated from the key's constructor
# parameter (its type and range; _non_default below), so a new setting needs no entry in this file.
# conflict.enabled=false removes the object its siblings are read from: test_the_conflict_switch_removes_the_detector.
KEPT = {"conflict.enabled"}

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


def test_a_value_other_than_conf_s_is_generated_for_every_key():
    shipped, generated = _shipped(), _non_default()
    assert set(generated) == _yaml_keys() and len(generated) > 80
    for key, value in generated.items():
        assert value != shipped[key] or key in KEPT, f"{key}: no other value could be generated from its constructor parameter"


def _objects(memory: MosaicMemory) -> dict[str, object]:
    space = memory._space("ns")  # the per-namespace parts, built from the same blocks
    return {"": memory, "extract": memory.extractor, "gate": memory.gate, "conflict": space.detector, "scoring": space.scorer,
            "retrieval": space.retriever, "graph": space.graph, "communities": space.communities, "retry": memory.retry}


def _reached(memory: MosaicMemory, values: dict[str, object]) -> None:
    objects = _objects(memory)
    for key, expected in values.items():
        block, _, inner = key.rpartition(".")
        read = READ.get(key, lambda obj, name=inner: getattr(obj, name))
        got = read(objects[block])
        assert got == pytest.approx(expected) if isinstance(expected, float) else got == expected, f"system.{key}: {got!r} != {expected!r}"


def test_non_default_values_reach_every_object(tmp_path):
    """Every key at a generated value other than conf's: together where the combination rules allow, else alone."""
    from mosaic.settings import combination_problems

    generated, shipped = _non_default(), _shipped()
    interpolated = {key for key, value in shipped.items() if isinstance(value, str) and value.startswith("${")}  # ${seed}
    together: dict[str, object] = {}
    alone: dict[str, object] = {}
    for key, value in generated.items():
        if key in interpolated:
            continue
        trial = {**together, key: value}
        (together if not combination_problems(_nested(trial)) else alone)[key] = value
    for key, value in list(alone.items()):  # a key that needs a partner found later (judge=proposed: held_facts) joins now
        if not combination_problems(_nested({**together, key: value})):
            together[key] = alone.pop(key)
    memory = _build([_override(k, v) for k, v in together.items()] + ["seed=7"], tmp_path)
    assert isinstance(memory, MosaicMemory)
    _reached(memory, {**together, **{key: 7 for key in interpolated}})
    refused_alone = []
    for key, value in alone.items():
        if combination_problems(_nested({key: value})):
            refused_alone.append(key)  # needs a partner: its ablation's build test below covers it
            continue
        _reached(_build([_override(key, value)], tmp_path / key), {key: value})
    assert len(together) > 80 and len(refused_alone) <= 1, refused_alone


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
    assert memory.extractor.turns_per_call == 2
    assert memory._space("ns").detector.batch is True
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


def _shipped() -> dict[str, object]:
    """Each key of conf/system/mosaic.yaml (block.key) -> its value there."""
    raw = yaml.safe_load((CONF / "system" / "mosaic.yaml").read_text())
    out = {}
    for key in _yaml_keys():
        block, _, inner = key.rpartition(".")
        out[key] = raw[block][inner] if block else raw[key]
    return out


def _nested(values: dict[str, object]) -> dict:
    nested: dict = {}
    for key, value in values.items():
        block, _, inner = key.rpartition(".")
        (nested.setdefault(block, {}) if block else nested)[inner] = list(value) if isinstance(value, tuple) else value
    return nested


def _other_value(hint: object, value: object) -> object:
    """A value of ``hint`` (a constructor parameter's type) other than ``value``, inside its range."""
    import typing

    args = typing.get_args(hint)
    literals = [a for a in (args if typing.get_origin(hint) is typing.Literal else ()) if a != value]
    literals += [x for a in args if typing.get_origin(a) is typing.Literal for x in typing.get_args(a) if x != value]
    if isinstance(value, bool):
        return not value
    if isinstance(value, str) and literals and isinstance(literals[0], str):
        return literals[0]
    if isinstance(value, list | tuple):
        return tuple(_other_value(typing.get_args(hint)[0] if typing.get_origin(hint) is typing.Annotated else float, v) for v in value)
    bounds = dict(_bounds(hint))
    low, high = bounds.get("ge", bounds.get("gt")), bounds.get("le", bounds.get("lt"))
    if isinstance(value, str) and not _bounds(hint):
        return value + "_b"  # a name
    integer = "int" in str(hint) and "float" not in str(hint)
    if not isinstance(value, int | float):  # null or a word ('rho'): a number inside the range
        if integer:
            return int(low or 0) + 1
        return (low if low is not None else 0) + 0.75 * ((high if high is not None else 1) - (low if low is not None else 0))
    if integer:
        return value + 1 if high is None or value + 1 <= high else value - 1
    bigger = value * 1.1 if value else 0.1
    return bigger if high is None or bigger < high else value * 0.9


def _non_default() -> dict[str, object]:
    """Each key of conf/system/mosaic.yaml -> a value other than conf's, from its constructor parameter (KEPT: conf's)."""
    shipped, types = _shipped(), _parameter_types()
    return {key: shipped[key] if key in KEPT else _other_value(types[key][0], shipped[key]) for key in sorted(shipped)}


def test_every_numeric_mosaic_key_has_a_range_in_its_constructor():
    types = _parameter_types()
    numeric = {key for key, value in _non_default().items() if _numeric(value)}
    assert len(numeric) > 60  # not vacuous
    unbounded = {key for key in numeric if not _bounds(types[key][0])}
    assert unbounded == set(), "numeric keys of conf/system/mosaic.yaml whose constructor parameter declares no range"


def test_shipped_and_generated_values_are_in_range():
    from hydra.utils import get_object

    from core.config_check import check_config, check_kwargs
    from core.llm import RetryPolicy

    shipped = yaml.safe_load((CONF / "system" / "mosaic.yaml").read_text())
    shipped["retrieval"]["seed"] = shipped["communities"]["seed"] = 0  # ${seed}
    check_config(shipped, "system")
    for key, value in _non_default().items():  # each generated value fits its parameter's type and range
        block, _, inner = key.rpartition(".")
        target = RetryPolicy if block == "retry" else get_object(shipped[block]["_target_"] if block else shipped["_target_"])
        check_kwargs(target, {inner: list(value) if isinstance(value, tuple) else value}, f"system.{key}")


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
        step = 1 if "int" in str(hint) and "float" not in str(hint) else 0.5
        outside = [bound - step if kind in ("ge", "gt") else bound + step for kind, bound in _bounds(hint)]
        for value in outside:
            if key == "communities.n_iterations" and value == -1:  # -1: until stable
                continue
            cfg = copy.deepcopy(base)
            OmegaConf.update(cfg, f"system.{key}", [value] * 3 if "tuple" in str(hint) else value)
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
    assert memory.extractor.source == "oracle"
    assert _build([], tmp_path / "default").extractor.source == "model"  # the paper's extraction


def test_the_oracle_judge_variant_sets_both_sources_and_builds(tmp_path):
    memory = _build(["ablation=oracle_judge"], tmp_path)
    assert memory.extractor.source == "oracle" and memory._space("ns").detector.source == "gold"
    assert _build([], tmp_path / "default")._space("ns").detector.source == "model"  # the paper's judge
    with pytest.raises(ConfigKeyError, match="extract.source=oracle"):
        _validate(["system=mosaic", "system.conflict.source=gold"])  # gold ids come with oracle facts only


def test_the_rows_extraction_variant_switches_only_the_output_format(tmp_path):
    memory = _build(["ablation=extract_rows"], tmp_path)
    assert memory.extractor.output_format == "rows" and memory.extractor.schema["properties"]["facts"]["items"]["type"] == "array"
    assert _build([], tmp_path / "default").extractor.output_format == "objects"  # the paper's extraction
