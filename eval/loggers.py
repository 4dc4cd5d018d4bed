"""Experiment loggers. Files (metrics.json, tables) are the record; W&B is an optional mirror."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

log = logging.getLogger(__name__)


@runtime_checkable
class RunLogger(Protocol):
    def log_run(self, run_dir: Path, config: dict[str, Any], metrics: dict[str, Any], table: Any) -> None: ...


class NullLogger:
    """Log nothing beyond the run folder's files."""

    def log_run(self, run_dir: Path, config: dict[str, Any], metrics: dict[str, Any], table: Any) -> None:
        return None


def _flatten(prefix: str, value: Any, out: dict[str, float]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f"{prefix}/{key}" if prefix else str(key), inner, out)
    elif isinstance(value, bool):
        out[prefix] = float(value)
    elif isinstance(value, int | float):
        out[prefix] = float(value)


class WandbLogger:
    """Resolved config, scalar metrics and the paper-shaped table to W&B (offline unless asked)."""

    def __init__(self, project: str = "mosaic-bench", mode: str = "offline", entity: str | None = None) -> None:
        self.project = project
        self.mode = mode
        self.entity = entity

    def log_run(self, run_dir: Path, config: dict[str, Any], metrics: dict[str, Any], table: Any) -> None:
        import wandb

        os.environ.setdefault("WANDB_SILENT", "true")
        run = wandb.init(
            project=self.project,
            entity=self.entity,
            mode=self.mode,
            dir=str(run_dir),
            config=config,
            name=run_dir.parent.parent.parent.name + "/" + run_dir.parent.parent.name + "/" + run_dir.name,
            reinit="finish_previous",
        )
        try:
            scalars: dict[str, float] = {}
            _flatten("", {k: v for k, v in metrics.items() if k != "metadata"}, scalars)
            run.summary.update(scalars)
            if table is not None and hasattr(table, "to_dict"):
                frame = table.reset_index()
                frame.columns = [str(c) for c in frame.columns]
                run.log({"table": wandb.Table(dataframe=frame.astype(str))})
        finally:
            run.finish()
        log.info("W&B run logged (%s mode) under %s", self.mode, run_dir / "wandb")
