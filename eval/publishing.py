"""Publishing a run folder: copy a finished run (or a stopped one with its measured ingest cost) under
results/published/, where scripts/make_tables.py and the notebook read.

Why a module of its own: publishing is one checked step (clean provenance, no overwrite of other metrics)
instead of a hand-typed ``cp -r``, and the tables and the ``scripts.publish`` command share its
provenance check. The command is ``python -m scripts.publish <run folder> [--unfinished]``.

A benchmark whose data may not be redistributed declares what of its run folder is published instead
(core.api.PublishesOwnCopy: rows without dataset text, the saved memory left behind, a note of what was left
out); publishing asks the run's benchmark class for it and never decides by a benchmark's name.
"""

from __future__ import annotations

import filecmp
import json
import shutil
from pathlib import Path
from typing import Any

from core.api import PublishesOwnCopy
from eval.ingest_cost import ingest_cost
from eval.provenance import same_code
from eval.record import RecordedMetrics, conf_target, config_target, load_provenance, recorded_class
from eval.run_lock import RunLock
from eval.runner import FOLDER_NAME, failed_rows, read_metrics

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED_RUNS = ROOT / "results" / "published" / "runs"
UNFINISHED_RUNS = ROOT / "results" / "published" / "unfinished"  # stopped runs: no metrics, so no table reads them
# results/runs/<benchmark>/<system>/<ablation>/<config hash>/: the part of a run folder's path kept when published
RUN_PATH_PARTS = 4
RUN_FOLDER_SCRATCH = shutil.ignore_patterns(".lock", ".lock.json", "*.tmp")  # a run's lock and half-written files: never published


def provenance_flags(metrics: dict[str, Any] | RecordedMetrics) -> list[str]:
    """Why a run is not a clean published result: dirty tree, code changed between start and end, or unknown."""
    meta = RecordedMetrics.of(metrics).metadata
    end, start = meta.git_sha, meta.git_sha_start
    flags = []
    if start is None:
        flags.append("start code not recorded (run predates provenance)")
    elif str(start).endswith("-dirty"):
        flags.append(f"started from a dirty tree ({start})")
    if end.endswith("-dirty"):
        flags.append(f"ended on a dirty tree ({end})")
    # one definition of "code changed" with the runner's resume check (eval.provenance.same_code: the code hash,
    # so a docs-only commit between start and end is no change); runs from before it compare commits
    changed = meta.code_changed_during_run if meta.code_changed_during_run is not None else str(start) != end
    if start is not None and changed:
        flags.append(f"code changed during the run ({start} -> {end})")
    if end == "unknown":
        flags.append("no git sha")
    return flags


def nothing_scored(metrics: dict[str, Any]) -> bool:
    """Whether every row of a finished run failed: its main metric is null (a benchmark with one main metric),
    or as many rows failed as it has cases (one that reports ``n_cases``). Such a run would be a table row of blank scores. A run where only
    some rows failed keeps its failure count in metrics.json and may be published (a deterministic fault fails
    the same row on every rerun)."""
    record = RecordedMetrics.of(metrics)
    if not record.failed_rows:
        return False
    if record.has_main_metric:
        return record.main_metric is None
    cases = getattr(record, "n_cases", None)  # a benchmark's own block, passed through as an extra field
    return isinstance(cases, int) and record.failed_rows >= cases


def own_copy(run: Path, metrics: dict[str, Any] | None = None) -> PublishesOwnCopy | None:
    """The benchmark class that publishes ``run`` its own way (core.api.PublishesOwnCopy), else None. Every record
    of the run's benchmark is asked (metrics.json's class and name, config.yaml's class, the benchmark folder of its
    path, results/runs/<benchmark>/...) and any one of them is enough, so such a run is never copied whole."""
    meta = (metrics or {}).get("metadata") or {}
    names = ((metrics or {}).get("benchmark"), meta.get("benchmark"), run.parts[-RUN_PATH_PARTS] if len(run.parts) >= RUN_PATH_PARTS else None)
    targets = [meta.get("benchmark_target"), config_target(run, "benchmark"), *(conf_target("benchmark", n) for n in names)]
    for target in targets:
        cls = recorded_class([target])
        if isinstance(cls, PublishesOwnCopy):
            return cls
    return None


def _copy_run(run: Path, target: Path, metrics: dict[str, Any] | None) -> None:
    """The run folder's publishable content to ``target``: all of it (lock and half-written files aside), or what
    its benchmark declares publishable (``own_copy``)."""
    publisher = own_copy(run, metrics)
    if publisher is not None:
        publisher.publish_copy(run, target, metrics)
    elif tuple((metrics or {}).get("stages") or ()) == ("ingest", "retrieve"):
        # a retrieval-only run: its rows are the record; the saved memory (system/, megabytes per row of a system
        # that keeps a graph) is rebuilt with no LLM call by rerunning its command
        shutil.copytree(run, target, ignore=shutil.ignore_patterns(".lock", ".lock.json", "*.tmp", "system"))
    else:
        shutil.copytree(run, target, ignore=RUN_FOLDER_SCRATCH)


def run_folder(run: Path) -> Path:
    """``run`` as an absolute path without ``..`` (relative paths are taken from the checkout)."""
    return (ROOT / run if not run.is_absolute() else run).resolve()


def target_for(run: Path, root: Path) -> Path:
    """Where ``run`` (resolved) is published under ``root``: its last four folder names, each a plain name, so
    the copy always lands inside ``root``."""
    parts = run.parts[-RUN_PATH_PARTS:]
    if len(parts) < RUN_PATH_PARTS or not all(FOLDER_NAME.fullmatch(part) for part in parts):
        raise SystemExit(f"{run}: not a run folder (<results_dir>/runs/<benchmark>/<system>/<ablation>/<config hash>); pass the folder run.py printed")
    return root.joinpath(*parts)


def publish(run: Path, published_runs: Path | None = None) -> Path:
    """Copy a finished run folder to ``<published_runs>/<benchmark>/<system>/<ablation>/<hash>``; its new path.

    Refuses a folder without metrics.json (unfinished) and one whose metrics.json records a dirty tree or a
    code change during the run (published rows come from one committed sha). A folder published already is
    left as it is when its metrics.json is the same file, and refused when it differs. A benchmark that publishes its
    own copy (module docstring) may refuse it too (e.g. when the rows it keeps do not give its metrics back)."""
    run = run_folder(run)
    metrics_file = run / "metrics.json"
    if not metrics_file.is_file():
        raise SystemExit(f"{run}: no metrics.json; finish the run (rerun its command) before publishing it")
    with RunLock(run):  # a resumed run or a rejudge writing the folder meanwhile fails here, naming its process
        return _publish_locked(run, metrics_file, published_runs)


def _publish_locked(run: Path, metrics_file: Path, published_runs: Path | None) -> Path:
    metrics = read_metrics(metrics_file)
    flags = provenance_flags(metrics)
    if nothing_scored(metrics):
        flags.append(f"every row failed ({failed_rows(metrics)} rows, metrics.json `failures`), so it has no score; rerun its command to retry them")
    if flags:
        raise SystemExit(f"{run}: not publishable: {'; '.join(flags)}; rerun it from a clean tree at one commit")
    target = target_for(run, published_runs or PUBLISHED_RUNS)
    if target.exists():
        if filecmp.cmp(target / "metrics.json", metrics_file, shallow=False):
            return target
        raise SystemExit(f"{target} exists with other metrics; remove it first if {run} is to replace it")
    _copy_run(run, target, metrics)
    return target


def publish_unfinished(run: Path, unfinished_runs: Path | None = None) -> Path:
    """Copy a run stopped before its end to ``<unfinished_runs>/<benchmark>/<system>/<ablation>/<hash>``, with
    ``ingest_cost.json`` (eval/ingest_cost.py) beside its rows; its new path.

    Why: a slice can cost more than the machine's time here (some systems take minutes per turn), and what
    finished, with its measured cost per turn, is then the result. Refused for a finished run (publish() it),
    for a run started from a dirty tree and for one resumed on other code (provenance.json). A folder
    published unfinished before is replaced: the newer copy holds everything the older one did, and more."""
    run = run_folder(run)
    if (run / "metrics.json").is_file():
        raise SystemExit(f"{run} is finished: publish it as a run (python -m scripts.publish {run})")
    record_file = run / "provenance.json"
    if not record_file.is_file():
        raise SystemExit(f"{run}: no provenance.json, so no record of the code it ran; not a run folder of run.py?")
    with RunLock(run):  # a run still going would add rows while they are copied
        return _publish_unfinished_locked(run, record_file, unfinished_runs)


def _publish_unfinished_locked(run: Path, record_file: Path, unfinished_runs: Path | None) -> Path:
    record = load_provenance(record_file)
    start = record.code_at_start
    if start.get("dirty") or not start.get("git_sha") or start.get("git_sha") == "unknown":
        raise SystemExit(f"{run}: started from a dirty tree or unknown code ({start}); rerun it from a clean tree at one commit")
    if any(not same_code(call.code, start) for call in record.invocations):
        raise SystemExit(f"{run}: resumed on other code than it started with; rerun it from one commit")
    cost = {"code": start["git_sha"], **ingest_cost(run)}
    target = target_for(run, unfinished_runs or UNFINISHED_RUNS)
    if target.exists():
        shutil.rmtree(target)
    _copy_run(run, target, None)
    (target / "ingest_cost.json").write_text(json.dumps(cost, indent=2, default=str) + "\n", encoding="utf-8")
    return target
