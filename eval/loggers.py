"""Experiment loggers. Files (metrics.json, tables) are the record; W&B is an optional mirror.

A logger has ``log_run`` (called once at the end with the metrics and the paper-shaped table)
and may have ``progress_hook`` (called before the benchmark starts; returns the
``ctx.progress(stage, done, total)`` callback that eval.workers calls as items finish).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

log = logging.getLogger(__name__)

Usage = Callable[[], dict[str, int]]  # calls and tokens so far, for progress records

# W&B runs opened for progress, by run folder: log_run (a fresh logger object, see eval.runner) finishes the same run
_open_runs: dict[str, Any] = {}
_open_lock = threading.Lock()


@runtime_checkable
class RunLogger(Protocol):
    def log_run(self, run_dir: Path, config: dict[str, Any], metrics: dict[str, Any], table: Any) -> None: ...


class NullLogger:
    """Log nothing beyond the run folder's files."""

    def log_run(self, run_dir: Path, config: dict[str, Any], metrics: dict[str, Any], table: Any) -> None:
        return None


def progress_hook(logger: Any, run_dir: Path, config: dict[str, Any], usage: Usage) -> Callable[[str, int, int], None] | None:
    """The logger's progress callback for a run, or None when it has none (e.g. NullLogger)."""
    make = getattr(logger, "progress_hook", None)
    return make(run_dir, config, usage) if callable(make) else None


def client_usage(*clients: Any) -> Usage:
    """Calls and tokens summed over distinct LLM clients (the systems' and the judge's)."""
    distinct = list({id(c): c for c in clients if c is not None}.values())

    def usage() -> dict[str, int]:
        totals = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cached_calls": 0}
        for client in distinct:
            u = getattr(client, "usage", None)
            for key in totals:
                totals[key] += int(getattr(u, key, 0) or 0)
        return totals

    return usage


def _flatten(prefix: str, value: Any, out: dict[str, float]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f"{prefix}/{key}" if prefix else str(key), inner, out)
    elif isinstance(value, bool):
        out[prefix] = float(value)
    elif isinstance(value, int | float):
        out[prefix] = float(value)


def sweep_group() -> str | None:
    """Under a Hydra multirun, the sweep's name: the experiment file's name (e.g. sweep_write_cost), else
    the job name; None for a single run."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hydra_cfg = HydraConfig.get()
    except Exception:  # no Hydra context (scripts, tests calling the runner directly)
        return None
    if hydra_cfg.mode != RunMode.MULTIRUN:
        return None
    return str(hydra_cfg.runtime.choices.get("experiment") or hydra_cfg.job.name)


class WandbLogger:
    """Resolved config, progress per stage, scalar metrics and tables to W&B (offline unless asked).

    Runs of one Hydra sweep share a ``group`` (the sweep's name, or ``group`` when set) and have
    ``job_type`` = the system's name, so W&B lays a sweep out per system. Progress (items done per
    stage, LLM calls and tokens so far) is logged while the run goes, at most every
    ``progress_every_s`` seconds per stage and always at a stage's last item.
    """

    def __init__(
        self, project: str = "mosaic-bench", mode: str = "offline", entity: str | None = None,
        group: str | None = None, progress_every_s: float = 5.0,
    ) -> None:  # fmt: skip
        self.project = project
        self.mode = mode
        self.entity = entity
        self.group = group
        self.progress_every_s = progress_every_s

    def _start(self, run_dir: Path, config: dict[str, Any]) -> Any:
        """The W&B run of this run folder: the one already open (progress), else a new one."""
        import wandb

        with _open_lock:
            if str(run_dir) in _open_runs:
                return _open_runs[str(run_dir)]
            os.environ.setdefault("WANDB_SILENT", "true")
            run = _open_runs[str(run_dir)] = wandb.init(
                project=self.project,
                entity=self.entity,
                mode=self.mode,
                dir=str(run_dir),
                config=config,
                group=self.group or sweep_group(),
                job_type=str((config.get("system") or {}).get("name", "run")),
                name=run_dir.parent.parent.parent.name + "/" + run_dir.parent.parent.name + "/" + run_dir.name,
                reinit="finish_previous",
            )
        return run

    def progress_hook(self, run_dir: Path, config: dict[str, Any], usage: Usage) -> Callable[[str, int, int], None]:
        lock = threading.Lock()
        last: dict[str, float] = {}

        def progress(stage: str, done: int, total: int) -> None:
            with lock:
                now = time.monotonic()
                if done < total and now - last.get(stage, -1e9) < self.progress_every_s:
                    return
                last[stage] = now
                try:
                    run = self._start(run_dir, config)
                    spent = usage()
                    run.log({
                        f"progress/{stage}/done": done, f"progress/{stage}/total": total,
                        f"progress/{stage}/fraction": done / total if total else 1.0,
                        **{f"progress/llm/{key}": value for key, value in spent.items()},
                    })  # fmt: skip
                except Exception as err:  # progress is a convenience; the run must go on
                    log.warning("W&B progress not logged (%s)", err)

        return progress

    def log_run(self, run_dir: Path, config: dict[str, Any], metrics: dict[str, Any], table: Any) -> None:
        import wandb

        run = self._start(run_dir, config)
        try:
            scalars: dict[str, float] = {}
            _flatten("", {k: v for k, v in metrics.items() if k != "metadata"}, scalars)
            run.summary.update(scalars)
            tables: dict[str, Any] = {"metrics": wandb.Table(columns=["metric", "value"], data=[[k, v] for k, v in sorted(scalars.items())])}
            if table is not None and hasattr(table, "to_dict"):
                frame = table.reset_index()
                frame.columns = [str(c) for c in frame.columns]
                tables["table"] = wandb.Table(dataframe=frame.astype(str))
            run.log(tables)
        finally:
            run.finish()
            with _open_lock:
                _open_runs.pop(str(run_dir), None)
        log.info("W&B run logged (%s mode) under %s", self.mode, run_dir / "wandb")
