"""Every config group option composes and is instantiated (values checked on the built object), and
the runner's config hash and validation behave."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from core.api import MemorySystem
from core.embed import Embedder
from eval.loggers import RunLogger
from eval.runner import ConfigError, build_system, config_hash, run_dir_for, validate
from tests.fakes import HashEmbedder, SchemaFakeLLM
from tests.hydra_config import compose_config as _compose
from tests.hydra_config import options as _options


@pytest.mark.parametrize(
    "override",
    [f"experiment={name}" for name in _options("experiment")]
    + [f"ablation={name}" for name in _options("ablation")]
    + [f"system={name}" for name in _options("system")]
    + [f"benchmark={name}" for name in _options("benchmark")]
    + [f"llm={name}" for name in _options("llm") if name != "openai_compat"]
    + [f"judge={name}" for name in _options("judge") if name != "openai_compat"]
    + [f"logger={name}" for name in _options("logger")],
)
def test_every_option_composes_and_targets_exist(override):
    cfg = _compose([override])
    validate(cfg)
    for group in ("system", "benchmark", "llm", "embedder", "answerer", "logger"):
        target = cfg[group]["_target_"]
        assert get_class(target), target
    assert run_dir_for(cfg).parts[-4:-1] == (cfg.benchmark.name, cfg.system.name, cfg.ablation_name)


def test_ablations_flip_their_switch_and_name_the_run():
    # an ablation that composes two others names its runs for both (its published runs carry that folder name)
    named_otherwise = {"oracle_no_conflict": "oracle_extractor_no_conflict"}
    for name in _options("ablation"):
        cfg = _compose([f"ablation={name}"])
        assert cfg.ablation_name == named_otherwise.get(name, name)
        if name == "none":  # the full system, listed by name so a sweep can put it beside its ablations
            assert config_hash(cfg) == config_hash(_compose([]))
        else:
            assert config_hash(cfg) != config_hash(_compose([]))


def test_hash_ignores_where_things_go_but_not_what_runs():
    base = _compose([])
    assert config_hash(base) == config_hash(_compose(["results_dir=/elsewhere", "cache_dir=/tmp/x", "logger=none"]))
    assert config_hash(base) != config_hash(_compose(["seed=1"]))


def test_missing_values_are_reported_with_a_fix():
    cfg = _compose(["llm=openai_compat"])
    with pytest.raises(ConfigError, match="llm.base_url"):
        validate(cfg)


# -- every option of every group is built, not only composed ----------------------------------
OPENAI_COMPAT = ["llm.base_url=http://127.0.0.1:9", "llm.model=m"]
JUDGE_COMPAT = ["judge.llm.base_url=http://127.0.0.1:9", "judge.llm.model=m"]


def _scalar_values_arrived(node: Any, built: Any) -> list[str]:
    """Each scalar config key that the built object keeps under the same name holds the config value.

    Returns the keys compared (the caller checks that there were some, so the check is not vacuous).
    """
    config = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)
    compared = []
    for key, value in config.items():
        # None means "choose for me" (threads: the CPU count), so the object may hold its choice
        if key.startswith("_") or value is None or isinstance(value, (dict, list)) or not hasattr(built, key):
            continue
        kept = getattr(built, key)
        if isinstance(kept, (str, int, float, bool)) or kept is None:
            assert kept == value, f"{type(built).__name__}.{key} = {kept!r}, config says {value!r}"
            compared.append(key)
    return compared


def _build_group(cfg: DictConfig, group: str, tmp_path: Path) -> tuple[Any, Any]:
    """(config node, object) of one group, built the way eval.runner builds it, on fakes where a
    constructor needs an LLM or an embedder."""
    llm, embedder = SchemaFakeLLM(), HashEmbedder()
    if group == "system":
        return cfg.system, build_system(cfg, llm, embedder, tmp_path / "run")
    if group == "benchmark":
        return cfg.benchmark, instantiate(cfg.benchmark, _convert_="all")
    if group == "answerer":
        return cfg.answerer, instantiate(cfg.answerer, llm=llm)
    if group == "judge":
        return cfg.judge.llm, instantiate(cfg.judge.llm)
    return cfg[group], instantiate(cfg[group])


# isinstance against a runtime Protocol reads every member, and an LLM client's ``model_id`` may ask
# the server (vllm: model null); LLM clients are checked on their class instead.
PROTOCOL = {"embedder": Embedder, "logger": RunLogger, "system": MemorySystem}


@pytest.mark.parametrize(
    ("group", "option"),
    [(group, option) for group in ("system", "benchmark", "llm", "judge", "embedder", "answerer", "logger") for option in _options(group)],
)
def test_every_group_option_instantiates_with_its_values(group, option, tmp_path):
    overrides = [f"{group}={option}"] + {("llm", "openai_compat"): OPENAI_COMPAT, ("judge", "openai_compat"): JUDGE_COMPAT}.get((group, option), [])
    cfg = _compose(overrides)
    validate(cfg)
    if group == "judge":  # the judge itself, built by the one judge builder: every setting arrives
        from eval.judge import build_judge, judge_settings

        judge = build_judge(cfg.judge, SchemaFakeLLM())
        assert all(getattr(judge, key) == value for key, value in judge_settings(cfg.judge).items())
    if group == "judge" and cfg.judge.llm is None:
        assert option in ("same", "calibrated")  # the options that reuse the systems' client; the runner then passes llm itself
        return
    node, built = _build_group(cfg, group, tmp_path)
    assert type(built) is get_class(node._target_)
    if group in PROTOCOL:
        assert isinstance(built, PROTOCOL[group]), f"{node._target_} does not satisfy {PROTOCOL[group].__name__}"
    if group in ("llm", "judge"):
        assert all(callable(getattr(type(built), name, None)) for name in ("chat", "chat_json")) and isinstance(type(built).model_id, property)
    if group == "benchmark":
        assert callable(built.run) and callable(type(built).make_table)
    compared = _scalar_values_arrived(node, built)
    settings = [key for key in node if not str(key).startswith("_")]
    assert compared or not settings, f"{node._target_}: none of {settings} could be checked on the built object"


@pytest.mark.parametrize("override", [f"experiment={n}" for n in _options("experiment")] + [f"ablation={n}" for n in _options("ablation")])
def test_every_experiment_and_ablation_builds_its_system_and_benchmark(override, tmp_path):
    cfg = _compose([override])
    for group in ("system", "benchmark"):
        node, built = _build_group(cfg, group, tmp_path)
        assert type(built) is get_class(node._target_)


@pytest.mark.parametrize("launcher", ["joblib", "submitit_local", "submitit_slurm"])
def test_hydra_launchers_compose(launcher):
    cfg = _compose([f"hydra/launcher={launcher}", "experiment=sweep_mosaic_ablations"])
    assert launcher.split("_")[0] in cfg.hydra.launcher._target_.lower()


def test_paper_llm_preset_composes_and_names_the_paper_model():
    """conf/llm/qwen35_plus.yaml: the paper's API model through an OpenAI-compatible endpoint (no call is made)."""
    cfg = _compose(["llm=qwen35_plus", "system=mosaic"])
    validate(cfg)
    assert cfg.llm.model == "qwen3.5-plus" and cfg.llm.api_key_env == "DASHSCOPE_API_KEY"
    assert cfg.llm.base_url.startswith("https://") and "api_key" not in cfg.llm
    client = instantiate(cfg.llm, cache_path=None)
    assert client.api_base.endswith("/compatible-mode/v1") and client.model_id == "qwen3.5-plus"


def test_systems_get_an_absolute_workdir_from_a_relative_results_dir(tmp_path, monkeypatch):
    """results_dir is relative (Hydra multirun needs that); a server started elsewhere (Letta's cwd and
    HOME are its own folder) must still find the run folder, so build_system hands systems an absolute path."""
    monkeypatch.chdir(tmp_path)
    cfg = _compose(["system=rag", "results_dir=results"])
    system = build_system(cfg, SchemaFakeLLM(), HashEmbedder(), run_dir_for(cfg))
    workdir = Path(system.workdir)  # rag keeps the folder it was given
    assert workdir.is_absolute() and workdir == tmp_path / run_dir_for(cfg) / "system"
