"""What the row scripts share (compare_write_cost, conversation_rows): run one configuration through
run.py, name its folder briefly, and publish a finished one, or an unfinished one with its measured cost.

    python -m scripts.run_rows <run folder>               # publish a finished run
    python -m scripts.run_rows <run folder> --unfinished  # publish a stopped run and what its ingest cost

Why a module of its own: both scripts drive run.py the same way; one copy of that code keeps their rows
comparable, and publishing (copying a finished run folder under results/published/runs/, where
scripts/make_tables.py and the notebook read) is one checked step instead of a hand-typed ``cp -r``.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED_RUNS = ROOT / "results" / "published" / "runs"
UNFINISHED_RUNS = ROOT / "results" / "published" / "unfinished"  # stopped runs: no metrics, so no table reads them
# results/runs/<benchmark>/<system>/<ablation>/<config hash>/: the part of a run folder's path kept when published
RUN_PATH_PARTS = 4
RUN_FOLDER_SCRATCH = shutil.ignore_patterns(".lock", ".lock.json", "*.tmp")  # a run's lock and half-written files: never published


def run_folder(overrides: list[str]) -> Path:
    """Run (or read back) one configuration with run.py; its run folder (the last line run.py prints)."""
    from eval.runner import FAILURES_EXIT

    command = [sys.executable, str(ROOT / "run.py"), *overrides]
    print("$ " + " ".join(command[1:]), flush=True)
    done = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    # FAILURES_EXIT: finished, with failed rows or ingest writes that metrics.json counts and tables show
    if done.returncode not in (0, FAILURES_EXIT) or not lines or not lines[-1].endswith("metrics.json"):
        raise SystemExit(f"run.py {' '.join(overrides)} failed (exit {done.returncode}); rerun it alone to see why")
    return (ROOT / lines[-1]).parent


def relative_to_checkout(path: Path) -> Path:
    """The run folder relative to the checkout when it lies inside it (shorter table rows)."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def publish(run: Path, published_runs: Path | None = None) -> Path:
    """Copy a finished run folder to ``<published_runs>/<benchmark>/<system>/<ablation>/<hash>``; its new path.

    Refuses a folder without metrics.json (unfinished) and one whose metrics.json records a dirty tree or a
    code change during the run (published rows come from one committed sha). A folder published already is
    left as it is when its metrics.json is the same file, and refused when it differs."""
    from eval.runner import read_metrics
    from scripts.make_tables import provenance_flags

    run = ROOT / run if not run.is_absolute() else run
    metrics_file = run / "metrics.json"
    if not metrics_file.is_file():
        raise SystemExit(f"{run}: no metrics.json; finish the run (rerun its command) before publishing it")
    flags = provenance_flags(read_metrics(metrics_file))
    if flags:
        raise SystemExit(f"{run}: not publishable: {'; '.join(flags)}; rerun it from a clean tree at one commit")
    target = (published_runs or PUBLISHED_RUNS).joinpath(*run.parts[-RUN_PATH_PARTS:])
    if target.exists():
        if filecmp.cmp(target / "metrics.json", metrics_file, shallow=False):
            return target
        raise SystemExit(f"{target} exists with other metrics; remove it first if {run} is to replace it")
    shutil.copytree(run, target, ignore=RUN_FOLDER_SCRATCH)
    return target


def publish_unfinished(run: Path, unfinished_runs: Path | None = None) -> Path:
    """Copy a run stopped before its end to ``<unfinished_runs>/<benchmark>/<system>/<ablation>/<hash>``, with
    ``ingest_cost.json`` (scripts/ingest_cost) beside its rows; its new path.

    Why: a slice can cost more than the machine's time here (Zep, MemGPT take minutes per turn), and what
    finished, with its measured cost per turn, is then the result. Refused for a finished run (publish() it),
    for a run started from a dirty tree and for one resumed on other code (provenance.json). A folder
    published unfinished before is replaced: the newer copy holds everything the older one did, and more."""
    from eval.provenance import same_code
    from scripts.ingest_cost import ingest_cost

    run = ROOT / run if not run.is_absolute() else run
    if (run / "metrics.json").is_file():
        raise SystemExit(f"{run} is finished: publish it as a run (python -m scripts.run_rows {run})")
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
    shutil.copytree(run, target, ignore=RUN_FOLDER_SCRATCH)
    (target / "ingest_cost.json").write_text(json.dumps(cost, indent=2, default=str) + "\n", encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description="publish a run folder under results/published/")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--unfinished", action="store_true", help="a run stopped before its end: publish what finished and its measured ingest cost")
    args = parser.parse_args(argv)
    target = publish_unfinished(args.run_dir) if args.unfinished else publish(args.run_dir)
    print(relative_to_checkout(target))
    return target


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
