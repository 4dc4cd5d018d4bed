"""conf/ is the only source of a result-deciding constant: no constructor default disagrees with it.

Every option of every object group (system, llm, embedder, answerer, benchmark, judge, logger) is composed
with Hydra as ``python run.py`` would; every ``_target_`` node is imported and each key it sets is compared
with the default of the same parameter in the constructor's signature (or the dataclass field). A default
that differs is a second, silent source of truth: a direct construction (a script, a test, a notebook) runs
another configuration than the published rows. Either the default goes (the caller must say) or it equals conf.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from hydra.utils import get_object
from omegaconf import DictConfig, OmegaConf

from tests.hydra_config import compose_config, options

GROUPS = ("system", "llm", "embedder", "answerer", "benchmark", "judge", "logger")

# Parameters that say how or where a run is carried out, never what it computes: their code default may differ
# from an option's value. Each entry says why; anything not listed here is treated as result-deciding.
NOT_RESULT_DECIDING: dict[str, str] = {
    "cache_path": "where the response/embedding cache lives (a replay of the same requests)",
    "api_key_env": "which environment variable holds the key",
    "patience_s": "how long a client waits for a busy server",
    "health_timeout_s": "how long a client waits for a server to come up",
    "request_timeout_s": "per-request timeout (a timed-out request fails the turn; it never changes a reply)",
    "core.llm.LocalLLM.parallel": "llama.cpp server slots (prefix-cache reuse, throughput)",
    "core.llm.LocalLLM.context_tokens": "server context capacity: a prompt that fits gets the same reply",
    "core.llm.OpenAICompatClient.context_tokens": "the served model's context capacity (a check, not a setting)",
    "core.llm.OpenAICompatClient.model": "which served model: each llm option names it (openai_compat requires it, ???)",
    "core.llm.OpenAICompatClient.extra_body": "None and {} send the same request (the client stores dict(extra_body or {}))",
    "eval.benchmarks.halumem.benchmark.HaluMemBenchmark.path": "the data file's location (None: the user must give it)",
    "eval.benchmarks.halumem.benchmark.HaluMemBenchmark.judge_prompts": "None reads the very file conf composes there "
    "(conf/halumem_judge/default.yaml; test_halumem checks they are equal)",
    "eval.loggers.WandbLogger.mode": "where the run's log goes (offline folder or wandb.ai)",
}


def _target_nodes(node: Any, path: str) -> Iterator[tuple[str, DictConfig]]:
    """Every node with a ``_target_`` under ``node`` (itself included), with its dotted path."""
    if isinstance(node, DictConfig):
        if "_target_" in node:
            yield path, node
        for key in node:
            yield from _target_nodes(node._get_node(key), f"{path}.{key}")


def code_defaults(target: str) -> dict[str, Any]:
    """The defaults the object named ``target`` would use for parameters a caller leaves out."""
    obj = get_object(target)
    if dataclasses.is_dataclass(obj):
        found: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            if f.default is not dataclasses.MISSING:
                found[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                found[f.name] = f.default_factory()
        return found
    return {name: p.default for name, p in inspect.signature(obj).parameters.items() if p.default is not inspect.Parameter.empty}


def _plain(value: Any) -> Any:
    """A value in comparable form: sequences as tuples, mappings as dicts, dataclasses as their fields."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return tuple(_plain(v) for v in value)
    return value


def disagreements(group: str, option: str) -> list[str]:
    """``module.Class.param: code X != conf Y (conf/<group>/<option>.yaml key a.b)`` for every result-deciding
    default of an object this option configures that differs from the configured value."""
    cfg = compose_config([f"{group}={option}"])
    found = []
    for path, node in _target_nodes(cfg[group], group):
        target = str(node._target_)
        defaults = code_defaults(target)
        values = OmegaConf.to_container(node, resolve=True)
        for key, value in values.items():
            if key.startswith("_") or key not in defaults:
                continue
            if isinstance(value, Mapping) and "_target_" in value:
                continue  # a part of its own: compared as its own node
            qualified = f"{target}.{key}"
            if key in NOT_RESULT_DECIDING or qualified in NOT_RESULT_DECIDING:
                continue
            if _plain(defaults[key]) != _plain(value):
                found.append(f"{qualified}: code {defaults[key]!r} != conf {value!r} (conf/{group}/{option}.yaml key {path}.{key})")
    return found


@pytest.mark.parametrize("group_option", [(group, option) for group in GROUPS for option in options(group)], ids=lambda g: "=".join(g))
def test_no_constructor_default_differs_from_conf(group_option):
    problems = disagreements(*group_option)
    assert not problems, "code defaults that disagree with conf (drop the default or set it to conf's value):\n" + "\n".join(problems)


def test_the_check_sees_a_disagreement(monkeypatch):
    """The comparison itself: a default changed away from conf is reported, naming class, key and file."""
    from mosaic import gate

    original = gate.ConfidenceGate.__init__
    signature = inspect.signature(original)
    changed = signature.replace(parameters=[p.replace(default=0.61) if p.name == "rho_min" else p for p in signature.parameters.values()])
    monkeypatch.setattr(gate.ConfidenceGate, "__signature__", changed, raising=False)
    expected = "mosaic.gate.ConfidenceGate.rho_min: code 0.61 != conf 0.6 (conf/system/mosaic.yaml key system.gate.rho_min)"
    assert expected in disagreements("system", "mosaic")
