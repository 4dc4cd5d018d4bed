"""Fields a finished run's metrics.json lacks because it was made before they existed, recomputed from its stored
rows (no LLM) and added without changing any value it already holds.

Why: intervals, tokens returned and paired differences to a base run all follow from a run's stored rows, so a
published run need not be rerun to show them. Every value the run was published with is recomputed too and must come
out the same; a run where one does not is left untouched (``AddedFields.mismatches`` says where). What a benchmark
recomputes is the benchmark's (``core.api.RetrievalRecomputable`` for retrieval-only runs; a benchmark's own full-run
fields in its package). ``python -m scripts.add_fields`` runs both.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.api import HarnessError, RetrievalRecomputable
from core.atomic import write_json_atomic
from eval.retrieval_paired import SECTION

ADDED_RECORD = "fields_added_from_rows"  # metrics.json: what was added, by which command, at which commit


@dataclass
class AddedFields:
    """What adding fields did to one run: the dotted paths it added, values that would have changed, why skipped."""

    run_dir: Path
    added: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    skipped: str | None = None


def merge_new(existing: dict[str, Any], recomputed: dict[str, Any], path: str, added: list[str], mismatches: list[str]) -> None:
    """Copy into ``existing`` every key of ``recomputed`` it lacks (at any depth); record in ``mismatches`` every
    value both hold that differs (left as it is)."""
    for key, value in recomputed.items():
        where = f"{path}.{key}" if path else str(key)
        if key not in existing:
            existing[key] = value
            added.append(where)
        elif isinstance(existing[key], dict) and isinstance(value, dict):
            merge_new(existing[key], value, where, added, mismatches)
        elif existing[key] != value and not (existing[key] is None and value is None):
            mismatches.append(f"{where}: published {existing[key]!r}, recomputed {value!r}")


def git_sha() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=Path(__file__).resolve().parent).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None


def add_retrieval_fields(run_dir: Path, base_dir: Path | None, write: bool = True) -> AddedFields:
    """Add to a retrieval-only run's metrics.json what it lacks: its retrieval metrics recomputed from its rows with
    today's code and the paired differences to ``base_dir`` (none for the base itself), both from the benchmark its
    metrics.json records. Every value it already holds must come out the same, else nothing is written."""
    from hydra.utils import get_class

    run_dir = Path(run_dir)
    report = AddedFields(run_dir)
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    target = metrics.get("metadata", {}).get("benchmark_target") or metrics.get("benchmark_target")
    if not target:
        raise HarnessError(f"{run_dir / 'metrics.json'} records no benchmark_target: which benchmark's run is it (eval.runner writes it)?")
    cls = get_class(str(target))
    recomputed = cls.recompute_retrieval(run_dir, base_dir) if isinstance(cls, RetrievalRecomputable) else None
    if recomputed is None:
        report.skipped = f"no retrieval rows that {target} recomputes"
        return report
    updated = json.loads(json.dumps(metrics))
    merge_new(updated, json.loads(json.dumps(recomputed)), "", report.added, report.mismatches)
    if report.mismatches or not report.added:
        return report
    updated[ADDED_RECORD] = {"fields": sorted({where.split(".", 1)[0] if where.startswith(SECTION) else where.rsplit(".", 1)[-1] for where in report.added}),
                             "n_values": len(report.added), "command": "python -m scripts.add_fields", "git_sha": git_sha(),
                             "how": "recomputed from the run's ranked rows (and its base run's), no LLM; every value the run "
                                    "already held recomputed identically and left as it was"}  # fmt: skip
    if write:
        write_json_atomic(run_dir / "metrics.json", updated, indent=2, default=str)
    return report
