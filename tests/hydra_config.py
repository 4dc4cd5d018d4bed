"""Compose the project's Hydra config in tests, as ``python run.py <overrides>`` would (cwd = repo)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf, open_dict

CONF = Path(__file__).resolve().parents[1] / "conf"


def options(group: str) -> list[str]:
    """The option names of a config group (its yaml files)."""
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def compose_config(overrides: list[str]) -> DictConfig:
    """The composed config with ``hydra:`` resolvers working (runtime cwd = the repository)."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        OmegaConf.set_readonly(cfg.hydra, False)
        with open_dict(cfg):
            cfg.hydra.runtime.cwd = str(CONF.parent)
        return cfg


def conf_judge(llm: Any, overrides: list[str] | None = None) -> Any:
    """The judge a run gets (eval.judge.build_judge over the composed ``judge`` block), asking ``llm``:
    tests judge with the configured prompt, max_tokens and attempts, never with values of their own."""
    from eval.judge import build_judge

    return build_judge(compose_config(overrides or []).judge, llm)
