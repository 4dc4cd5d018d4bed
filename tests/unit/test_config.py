"""Every config group option composes, and the runner's config hash and validation behave."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_class, instantiate
from omegaconf import OmegaConf, open_dict

from eval.runner import ConfigError, config_hash, run_dir_for, validate

CONF = Path(__file__).resolve().parents[2] / "conf"


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def _compose(overrides: list[str]):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        OmegaConf.set_readonly(cfg.hydra, False)
        with open_dict(cfg):
            cfg.hydra.runtime.cwd = str(CONF.parent)
        return cfg


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
    for name in _options("ablation"):
        cfg = _compose([f"ablation={name}"])
        assert cfg.ablation_name == name
        assert config_hash(cfg) != config_hash(_compose([]))


def test_hash_ignores_where_things_go_but_not_what_runs():
    base = _compose([])
    assert config_hash(base) == config_hash(_compose(["results_dir=/elsewhere", "cache_dir=/tmp/x", "logger=none"]))
    assert config_hash(base) != config_hash(_compose(["seed=1"]))


def test_missing_values_are_reported_with_a_fix():
    cfg = _compose(["llm=openai_compat"])
    with pytest.raises(ConfigError, match="llm.base_url"):
        validate(cfg)


def test_loggers_instantiate():
    for name in _options("logger"):
        cfg = _compose([f"logger={name}"])
        assert hasattr(instantiate(cfg.logger), "log_run")


def test_paper_llm_preset_composes_and_names_the_paper_model():
    """conf/llm/qwen35_plus.yaml: the paper's API model through an OpenAI-compatible endpoint (no call is made)."""
    cfg = _compose(["llm=qwen35_plus", "system=mosaic"])
    validate(cfg)
    assert cfg.llm.model == "qwen3.5-plus" and cfg.llm.api_key_env == "DASHSCOPE_API_KEY"
    assert cfg.llm.base_url.startswith("https://") and "api_key" not in cfg.llm
    client = instantiate(cfg.llm, cache_path=None)
    assert client.api_base.endswith("/compatible-mode/v1") and client.model_id == "qwen3.5-plus"
