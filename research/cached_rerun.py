"""Do published runs still come out the same? Rerun them from their LLM cache archive and compare.

    python -m research.cached_rerun results/published/runs/locomo/rag/none/b3b9f7514c93 \
        --archive results/caches/locomo_conv26.jsonl.gz [--out results/bench/cached_rerun_conv26]
    python -m research.cached_rerun results/published/runs/locomo/rag/none/26cb1a02f252 --out results/bench/cold_rerun_quickstart

Why: a refactor that must leave behaviour unchanged (config only from conf/, packages moved) is checked by
replaying real runs, not by reading diffs. Each published folder's own overrides (``overrides.json``) are run
again with today's code into a temporary results folder, with a fresh response cache filled from the archive, so
every LLM call that is asked exactly as before is answered exactly as before. A call that misses the cache means a
prompt changed: it is asked live and counted. Reported per folder: whether the config hash is the published one,
the live (uncached) calls, and every overall / per-category metric that differs. Writes ``<out>.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


RUN_PLACEMENT = ("results_dir=", "logger=")


def git_state() -> dict[str, object]:
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True).stdout.strip())
    return {"git_sha": sha, "git_dirty": dirty}


def flatten(prefix: str, value: object) -> dict[str, object]:
    """Nested metrics as {dotted.key: leaf}, so two runs are compared leaf by leaf."""
    if isinstance(value, dict):
        out: dict[str, object] = {}
        for key, inner in value.items():
            out.update(flatten(f"{prefix}.{key}" if prefix else str(key), inner))
        return out
    return {prefix: value}


def differences(published: dict, rerun: dict, sections: tuple[str, ...]) -> list[dict[str, object]]:
    """Leaves of ``sections`` whose values differ (floats compared exactly: a replay is bit for bit)."""
    old = {k: v for s in sections for k, v in flatten(s, published.get(s)).items()}
    new = {k: v for s in sections for k, v in flatten(s, rerun.get(s)).items()}
    return [{"key": k, "published": old.get(k), "rerun": new.get(k)} for k in sorted(old.keys() | new.keys()) if old.get(k) != new.get(k)]


def rerun(folder: Path, archive: Path | None, python: str, sections: tuple[str, ...]) -> dict[str, object]:
    folder = folder.resolve()
    published = json.loads((folder / "metrics.json").read_text())
    # where results and logs went decides nothing; the rerun puts its own (and a reference run made with
    # results_dir=... would otherwise carry another machine's path)
    overrides = [o for o in json.loads((folder / "overrides.json").read_text()) if not o.startswith(RUN_PLACEMENT)]
    shown = str(folder.relative_to(ROOT)) if folder.is_relative_to(ROOT) else str(folder)
    with tempfile.TemporaryDirectory(prefix="cached_rerun_") as tmp:
        cache_dir, results_dir = Path(tmp) / "cache", Path(tmp) / "results"
        if archive is not None:  # without one the rerun is cold: every call is asked live
            subprocess.run([python, "-m", "scripts.cache_archive", "import", str(archive.resolve()), str(cache_dir)], cwd=ROOT, check=True)
        env = dict(os.environ, MOSAIC_CACHE_DIR=str(cache_dir), WANDB_MODE="disabled", HF_HUB_OFFLINE="1")
        started = time.perf_counter()
        command = [python, "run.py", *overrides, f"results_dir={results_dir}", "logger=none"]
        done = subprocess.run(command, cwd=ROOT, env=env)
        wall = time.perf_counter() - started
        found = sorted(results_dir.glob("runs/**/metrics.json"))
        if done.returncode != 0 or len(found) != 1:
            return {"folder": shown, "command": command, "returncode": done.returncode, "error": f"{len(found)} metrics.json written"}
        again = json.loads(found[0].read_text())
    return compare(shown, published, again, sections, wall)


def compare(shown: str, published: dict, again: dict, sections: tuple[str, ...], wall: float | None = None) -> dict[str, object]:
    """One report row: a published run's metrics against a rerun's."""
    usage = again["metadata"]["llm_usage_this_invocation"]
    found = differences(published, again, sections)
    return {
        "folder": shown,
        "overrides": published["metadata"].get("overrides"),
        "published_sha": published["metadata"]["git_sha"],
        "rerun_sha": again["metadata"]["git_sha"],
        "config_hash_published": published["metadata"]["config_hash"],
        "config_hash_rerun": again["metadata"]["config_hash"],
        "llm_calls": usage["calls"],
        "live_calls": usage["calls"] - usage.get("cached_calls", 0),
        "wall_s": None if wall is None else round(wall, 1),
        "compared": list(sections),
        "differences": found,
        "identical": not found,
    }


def markdown(report: dict) -> str:
    source = f"archive `{report['archive']}`" if report["archive"] else "no archive: cold, every call live"
    lines = [f"# Reruns of published runs ({source})", "",
             "| run folder | published at | rerun at | config hash same | LLM calls | of them live | metrics compared | differing |",
             "|---|---|---|---|---|---|---|---|"]
    for row in report["runs"]:
        if "error" in row:
            lines.append(f"| {row['folder']} | | | | | | | error: {row['error']} |")
            continue
        lines.append(f"| {row['folder']} | {row['published_sha'][:12]} | {row['rerun_sha'][:12]} | {row['config_hash_published'] == row['config_hash_rerun']} | "
                     f"{row['llm_calls']} | {row['live_calls']} | {', '.join(row['compared'])} | {len(row['differences'])} |")
    lines += ["", "A config hash differs when keys were added since publication (with the old behaviour as their value) or a "
              "`_target_` moved to another module; what must not move is the metrics.", "", f"Command: `{report['command']}`"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path, help="published run folders (with metrics.json and overrides.json)")
    parser.add_argument("--archive", type=Path, default=None,
                        help="cache archive (results/caches/*.jsonl.gz) holding their LLM calls; without it the reruns are cold")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "bench" / "cached_rerun", help="writes <out>.json and <out>.md")
    parser.add_argument("--rerun-folder", type=Path, default=None,
                        help="compare with this finished run folder instead of running (one published folder; e.g. the quickstart CI ran)")
    parser.add_argument("--sections", default="overall,per_category", help="metrics.json sections compared leaf by leaf")
    args = parser.parse_args(argv)
    for folder in args.folders:
        for name in ("metrics.json", "overrides.json"):
            if not (folder / name).is_file():
                parser.error(f"{folder / name}: not found; give a published run folder (results/published/runs/...)")
    if args.archive is not None and not args.archive.is_file():
        parser.error(f"{args.archive}: not found; archives are in results/caches/")
    sections = tuple(s for s in args.sections.split(",") if s)
    if args.rerun_folder is not None and len(args.folders) != 1:
        parser.error("--rerun-folder compares one published folder with one finished rerun")
    command = ["python -m research.cached_rerun", *map(str, args.folders), *(["--archive", str(args.archive)] if args.archive else []),
               *(["--rerun-folder", str(args.rerun_folder)] if args.rerun_folder else [])]
    if args.rerun_folder is not None:
        published, again = (json.loads((f / "metrics.json").read_text()) for f in (args.folders[0], args.rerun_folder))
        runs = [compare(str(args.folders[0]), published, again, sections)]
    else:
        runs = [rerun(folder, args.archive, sys.executable, sections) for folder in args.folders]
    report = {**git_state(), "archive": str(args.archive) if args.archive else None, "command": " ".join(command), "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))
    return 0 if all(row.get("identical") for row in report["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
