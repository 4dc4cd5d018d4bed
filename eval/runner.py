"""Run one table cell: build the objects a config names, run the benchmark, write the record.

The run folder is ``results/runs/<benchmark>/<system>/<ablation>/<config-hash>/``; the same
command reuses it, so a killed run resumes (benchmarks append rows as they go). metrics.json
is written atomically at the end with the metadata every table needs.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from core.config_check import check_config
from eval.context import RunContext
from eval.loggers import client_usage, progress_hook
from eval.tables import to_markdown

log = logging.getLogger("mosaic_bench")

SCHEMA_VERSION = 1
# Keys that do not change what a run computes, so they stay out of the config hash.
NON_SEMANTIC_KEYS = ("logger", "results_dir", "cache_dir", "hydra", "overwrite", "run")


class ConfigError(ValueError):
    """A configuration that cannot run; the message says what to fix."""


def semantic_config(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config minus where-things-go keys: what the config hash is taken over."""
    raw = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(raw, dict)
    for key in NON_SEMANTIC_KEYS:
        raw.pop(key, None)
    # cache paths, log levels and the attention kernel are where/how, not what (a kernel can move the last
    # bits of a logit, which the response cache, keyed by the request, does not tell apart either)
    for group in ("llm", "judge", "embedder"):
        for key in ("cache_path", "verbosity", "flash_attn"):
            _drop_key(raw.get(group), key)
    resolved = OmegaConf.to_container(OmegaConf.create(raw), resolve=True, throw_on_missing=False)
    assert isinstance(resolved, dict)
    return resolved


def _drop_key(node: Any, key: str) -> None:
    if isinstance(node, dict):
        node.pop(key, None)
        for value in node.values():
            _drop_key(value, key)


def config_hash(cfg: DictConfig) -> str:
    canonical = json.dumps(semantic_config(cfg), sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def git_sha() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout
        return sha + ("-dirty" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def validate(cfg: DictConfig) -> None:
    """Fail early with messages that say what to fix."""
    for group in ("system", "benchmark", "llm"):
        if group not in cfg or cfg[group] is None:
            raise ConfigError(f"no `{group}` chosen: add e.g. `{group}=...` (see conf/{group}/)")
        if "_target_" not in cfg[group]:
            raise ConfigError(f"conf/{group}: missing `_target_` (the class to build)")
    missing = {f"{key}.{inner}" for key in cfg if key != "hydra" and isinstance(cfg[key], DictConfig) for inner in OmegaConf.missing_keys(cfg[key])}
    if missing:
        raise ConfigError(f"these config values must be set (they are ???): {sorted(missing)}; e.g. `llm.base_url=http://host:port`")
    for name in ("name",):
        if name not in cfg.system or name not in cfg.benchmark:
            raise ConfigError(f"conf/system and conf/benchmark files need a `{name}` key (used in the results path)")


def atomic_write_json(path: Path, payload: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        json.dump(payload, handle, indent=2, default=str)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def run_dir_for(cfg: DictConfig) -> Path:
    return (
        Path(cfg.results_dir)
        / "runs"
        / str(cfg.benchmark.name)
        / str(cfg.system.name)
        / str(cfg.ablation_name)
        / config_hash(cfg)
    )


def latency_summary(latencies_s: list[float]) -> dict[str, float | int]:
    if not latencies_s:
        return {"n": 0}
    values = np.asarray(latencies_s)
    return {"n": int(values.size), "p50_s": float(np.percentile(values, 50)), "p95_s": float(np.percentile(values, 95)), "mean_s": float(values.mean())}


def build_system(cfg: DictConfig, llm: Any, embedder: Any, run_dir: Path) -> Any:
    workdir = run_dir / "system"
    workdir.mkdir(parents=True, exist_ok=True)
    system_cfg = OmegaConf.to_container(cfg.system, resolve=True)
    assert isinstance(system_cfg, dict)
    check_config(system_cfg, "system")  # unknown or ill-typed keys fail here, naming the key, before any work
    return instantiate(system_cfg, llm=llm, embedder=embedder, workdir=str(workdir), _convert_="all")


def run(cfg: DictConfig, overrides: list[str] | None = None) -> dict[str, Any]:
    """Run the configured benchmark on the configured system and return metrics (also on disk)."""
    validate(cfg)
    run_dir = run_dir_for(cfg)
    metrics_path = run_dir / "metrics.json"
    if metrics_path.exists() and not cfg.overwrite:
        log.info("this configuration already finished; reading %s (overwrite=true to redo)", metrics_path)
        metrics = json.loads(metrics_path.read_text())
        _finish(cfg, run_dir, metrics, log_external=False)
        return metrics
    if cfg.overwrite and run_dir.exists():
        log.info("overwrite=true: clearing %s (the LLM cache still makes the redo cheap)", run_dir)
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    (run_dir / "overrides.json").write_text(json.dumps(overrides or [], indent=2))
    log.info("run folder: %s", run_dir)

    started = time.time()
    llm = instantiate(cfg.llm)
    judge_llm = instantiate(cfg.judge.llm) if cfg.judge.get("llm") else llm
    embedder = instantiate(cfg.embedder)
    answerer = instantiate(cfg.answerer, llm=llm)
    try:
        system = build_system(cfg, llm, embedder, run_dir)
        benchmark = instantiate(cfg.benchmark, _convert_="all")
        ctx = RunContext(run_dir=run_dir, cfg=cfg, llm=llm, judge_llm=judge_llm, embedder=embedder, answerer=answerer, log=log)
        ctx.progress = progress_hook(instantiate(cfg.logger), run_dir, semantic_config(cfg), client_usage(llm, judge_llm))  # W&B while it runs
        if hasattr(system, "run_metadata"):  # e.g. Mem0's "semantic search only (no spaCy model)"
            ctx.extra_metadata["system_metadata"] = system.run_metadata()
        metrics = benchmark.run(system, ctx)
        system_metrics = getattr(system, "metrics", None)
        if callable(system_metrics) and "system_metrics" not in metrics:  # e.g. MOSAIC's LSH fallback rate, NCS drift
            metrics["system_metrics"] = system_metrics()
        metrics["metadata"] = {
            "schema_version": SCHEMA_VERSION,
            "git_sha": git_sha(),
            "benchmark": str(cfg.benchmark.name),
            "benchmark_target": str(cfg.benchmark._target_),
            "system": str(cfg.system.name),
            "ablation": str(cfg.ablation_name),
            "config_hash": run_dir.name,
            "llm_model_id": llm.model_id,
            "judge_model_id": judge_llm.model_id,
            "embedder_model_id": getattr(embedder, "model_id", "unknown"),
            "llm_usage": llm.usage.__dict__,
            "llm_call_latency": latency_summary(getattr(getattr(llm, "meter", None), "latencies_s", [])),
            "judge_usage": judge_llm.usage.__dict__ if judge_llm is not llm else "same client as llm",
            "overrides": overrides or [],
            "finished_at": datetime.now(timezone.utc).isoformat(),
            "wall_s_this_invocation": round(time.time() - started, 2),
            **ctx.extra_metadata,
        }
        atomic_write_json(metrics_path, metrics)
    finally:
        for client in {id(llm): llm, id(judge_llm): judge_llm}.values():
            close = getattr(client, "close", None)
            if close:
                close()
    _finish(cfg, run_dir, metrics, log_external=True)
    return metrics


def _finish(cfg: DictConfig, run_dir: Path, metrics: dict[str, Any], log_external: bool) -> None:
    benchmark_cls = get_class(metrics["metadata"]["benchmark_target"])
    table = benchmark_cls.make_table([metrics])
    markdown = to_markdown(table)
    (run_dir / "table.md").write_text(markdown + "\n")
    print(markdown)
    if log_external:
        try:
            instantiate(cfg.logger).log_run(run_dir, semantic_config(cfg), metrics, table)
        except Exception as err:  # the files are the record; a logger failure must not lose the run
            log.warning("logger %s failed (%s); files are intact in %s", cfg.logger.get("_target_"), err, run_dir)
    print(run_dir / "metrics.json")
