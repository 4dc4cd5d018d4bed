"""Publishing a run folder: copy a finished run (or a stopped one with its measured ingest cost) under
results/published/, where scripts/make_tables.py and the notebook read.

Why a module of its own: publishing is one checked step (clean provenance, no overwrite of other metrics)
instead of a hand-typed ``cp -r``, and the tables and the ``scripts.publish`` command share its
provenance check. The command is ``python -m scripts.publish <run folder> [--unfinished]``.

A HaluMem run is published without dataset or model text (its data is CC BY-NC-ND 4.0 and never committed):
rows keep only their non-text fields, ``system/`` and ``wandb/`` stay behind, and PUBLISHED.md in the published
folder says what was left out (eval/benchmarks/halumem/public.py, docs/halumem.md "Publishing a run").
"""

from __future__ import annotations

import filecmp
import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from eval.benchmarks.halumem import public as halumem_public
from eval.ingest_cost import ingest_cost
from eval.provenance import same_code
from eval.runner import read_metrics

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED_RUNS = ROOT / "results" / "published" / "runs"
UNFINISHED_RUNS = ROOT / "results" / "published" / "unfinished"  # stopped runs: no metrics, so no table reads them
# results/runs/<benchmark>/<system>/<ablation>/<config hash>/: the part of a run folder's path kept when published
RUN_PATH_PARTS = 4
RUN_FOLDER_SCRATCH = shutil.ignore_patterns(".lock", ".lock.json", "*.tmp")  # a run's lock and half-written files: never published


def provenance_flags(metrics: dict[str, Any]) -> list[str]:
    """Why a run is not a clean published result: dirty tree, code changed between start and end, or unknown."""
    meta = metrics.get("metadata", {})
    end, start = str(meta.get("git_sha", "unknown")), meta.get("git_sha_start")
    flags = []
    if start is None:
        flags.append("start code not recorded (run predates provenance)")
    elif str(start).endswith("-dirty"):
        flags.append(f"started from a dirty tree ({start})")
    if end.endswith("-dirty"):
        flags.append(f"ended on a dirty tree ({end})")
    if start is not None and (meta.get("code_changed_during_run") or str(start) != end):
        flags.append(f"code changed during the run ({start} -> {end})")
    if end == "unknown":
        flags.append("no git sha")
    return flags


def is_halumem(run: Path, metrics: dict[str, Any] | None = None) -> bool:
    """Whether ``run`` is a HaluMem run folder: by its metrics.json, its config.yaml or its path
    (results/runs/halumem/...); any one of them is enough, so a HaluMem run is never copied whole."""
    metrics = metrics or {}
    meta = metrics.get("metadata", {})
    config: dict[str, Any] = {}
    if (run / "config.yaml").is_file():
        try:
            config = (yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8")) or {}).get("benchmark") or {}
        except yaml.YAMLError:
            config = {}
    names = (metrics.get("benchmark"), meta.get("benchmark"), config.get("name"), run.parts[-RUN_PATH_PARTS] if len(run.parts) >= RUN_PATH_PARTS else None)
    targets = (meta.get("benchmark_target"), config.get("_target_"))
    return "halumem" in names or any(str(t or "").startswith("eval.benchmarks.halumem") for t in targets)


def _copy_run(run: Path, target: Path, metrics: dict[str, Any] | None) -> None:
    """The run folder's publishable content to ``target``: all of it (lock and half-written files aside), or for
    a HaluMem run the part without dataset text (eval/benchmarks/halumem/public.py)."""
    if is_halumem(run, metrics):
        halumem_public.publish_copy(run, target, metrics)
    elif tuple((metrics or {}).get("stages") or ()) == ("ingest", "retrieve"):
        # a retrieval-only run: its rows are the record; the saved memory (system/, megabytes per MOSAIC row) is
        # rebuilt with no LLM call by rerunning its command
        shutil.copytree(run, target, ignore=shutil.ignore_patterns(".lock", ".lock.json", "*.tmp", "system"))
    else:
        shutil.copytree(run, target, ignore=RUN_FOLDER_SCRATCH)


def publish(run: Path, published_runs: Path | None = None) -> Path:
    """Copy a finished run folder to ``<published_runs>/<benchmark>/<system>/<ablation>/<hash>``; its new path.

    Refuses a folder without metrics.json (unfinished) and one whose metrics.json records a dirty tree or a
    code change during the run (published rows come from one committed sha). A folder published already is
    left as it is when its metrics.json is the same file, and refused when it differs. A HaluMem run is copied
    without text (module docstring) and refused when its kept rows do not give its metrics back."""
    run = ROOT / run if not run.is_absolute() else run
    metrics_file = run / "metrics.json"
    if not metrics_file.is_file():
        raise SystemExit(f"{run}: no metrics.json; finish the run (rerun its command) before publishing it")
    metrics = read_metrics(metrics_file)
    flags = provenance_flags(metrics)
    if flags:
        raise SystemExit(f"{run}: not publishable: {'; '.join(flags)}; rerun it from a clean tree at one commit")
    target = (published_runs or PUBLISHED_RUNS).joinpath(*run.parts[-RUN_PATH_PARTS:])
    if target.exists():
        if filecmp.cmp(target / "metrics.json", metrics_file, shallow=False):
            return target
        raise SystemExit(f"{target} exists with other metrics; remove it first if {run} is to replace it")
    _copy_run(run, target, metrics)
    return target


def publish_unfinished(run: Path, unfinished_runs: Path | None = None) -> Path:
    """Copy a run stopped before its end to ``<unfinished_runs>/<benchmark>/<system>/<ablation>/<hash>``, with
    ``ingest_cost.json`` (eval/ingest_cost.py) beside its rows; its new path.

    Why: a slice can cost more than the machine's time here (Zep, MemGPT take minutes per turn), and what
    finished, with its measured cost per turn, is then the result. Refused for a finished run (publish() it),
    for a run started from a dirty tree and for one resumed on other code (provenance.json). A folder
    published unfinished before is replaced: the newer copy holds everything the older one did, and more."""
    run = ROOT / run if not run.is_absolute() else run
    if (run / "metrics.json").is_file():
        raise SystemExit(f"{run} is finished: publish it as a run (python -m scripts.publish {run})")
    record_file = run / "provenance.json"
    if not record_file.is_file():
        raise SystemExit(f"{run}: no provenance.json, so no record of the code it ran; not a run folder of run.py?")
    record = json.loads(record_file.read_text(encoding="utf-8"))
    start = record.get("code_at_start") or {}
    if start.get("dirty") or not start.get("git_sha") or start.get("git_sha") == "unknown":
        raise SystemExit(f"{run}: started from a dirty tree or unknown code ({start}); rerun it from a clean tree at one commit")
    if any(not same_code(call.get("code", {}), start) for call in record.get("invocations", [])):
        raise SystemExit(f"{run}: resumed on other code than it started with; rerun it from one commit")
    cost = {"code": start["git_sha"], **ingest_cost(run)}
    target = (unfinished_runs or UNFINISHED_RUNS).joinpath(*run.parts[-RUN_PATH_PARTS:])
    if target.exists():
        shutil.rmtree(target)
    _copy_run(run, target, None)
    (target / "ingest_cost.json").write_text(json.dumps(cost, indent=2, default=str) + "\n", encoding="utf-8")
    return target
