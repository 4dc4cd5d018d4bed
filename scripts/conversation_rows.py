"""Issue 18's whole-conversation rows as one resumable command, with each MOSAIC row's paired difference from rag.

    python -m scripts.conversation_rows --experiment locomo_conv26 [--rows rag mosaic with_source_turns turn_matching]
        [--archive results/caches/locomo_conv26.jsonl.gz] [--out results/bench/locomo_conv26_rows.json]
        [--publish] [--allow-dirty] [-- extra run.py overrides]

Why: a whole conversation is hours of LLM time here, more than one working session, and a fresh machine
starts with an empty response cache. Each row is one ``run.py experiment=<experiment> ...`` (resumable;
a finished one is only read back). With ``--archive``, the archive is imported into the cache first and
the cache is exported to it after every row (scripts/cache_archive), so committing that file after a
killed session keeps every call paid for; while a row runs the cache is also exported every
``--export-every-min`` minutes (10), so a session that ends inside a two-hour row loses at most that much.
Then it writes, from the run folders alone, each MOSAIC row minus rag over the same questions (paired
bootstrap, overall and per category; also drawn, <out>.png), the cost per ingested turn of every row, and the
mechanism counts of each MOSAIC row. Rows that replay another row's ingest
from the cache (the provenance rows share MOSAIC's ingest) show cached calls and almost no seconds: the
cold cost is the ``mosaic`` row's.

With ``--publish``, once every row has finished, each run folder is copied under results/published/runs/
(scripts/run_rows.publish: refused for a run with a dirty tree or code changed during it) and the report
names the published folders, so one command takes a conversation from nothing to its published rows.

Refuses a dirty tree unless --allow-dirty: published rows come from one committed sha.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from eval.provenance import code_version
from eval.runner import read_metrics
from scripts.cache_archive import CACHE_FILE, export_cache, import_cache
from scripts.compare_runs import compare, markdown, plot
from scripts import run_rows
from scripts.run_rows import ROOT, relative_to_checkout, run_folder

ROWS: dict[str, list[str]] = {
    "rag": ["system=rag"],
    "mosaic": ["system=mosaic"],
    "with_source_turns": ["ablation=with_source_turns"],
    "turn_matching": ["ablation=turn_matching"],
    "full_context": ["system=full_context"],
}
BASE_ROW = "rag"


@contextmanager
def periodic_export(cache_dir: Path, archive: Path | None, every_min: float) -> Iterator[None]:
    """Export the cache to ``archive`` every ``every_min`` minutes in a background thread while the rows run.

    Why: one row of a whole conversation is up to two hours here, and a working session can end inside it;
    the export after each row would then never come. The export is atomic (scripts/cache_archive), and the
    cache's WAL journal lets it read while run.py writes."""
    if archive is None or every_min <= 0:
        yield
        return
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every_min * 60):
            if (cache_dir / CACHE_FILE).is_file():
                print(f"cache archive {archive}: {export_cache(cache_dir, archive)} responses (periodic)", flush=True)

    thread = threading.Thread(target=loop, name="cache-archive-export", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def mechanisms(run: Path) -> dict[str, Any] | None:
    """The mechanism counts a MOSAIC run recorded (``system_metrics.mechanisms``), flattened for one table row."""
    found = read_metrics(run / "metrics.json").get("system_metrics", {}).get("mechanisms")
    if not found:
        return None
    retrieval, ncs = found["retrieval"], found["ncs"]
    return {**{f"entities_{k}": v for k, v in found["entities"].items()},
            **{f"events_{k}": v for k, v in found["conflict_events"].items()},
            "scanned_per_query": retrieval["candidates_scanned"]["mean"], "lsh_confident_hits": retrieval["lsh_confident_hits"],
            "llm_routing_fallbacks": retrieval["llm_routing_fallbacks"], "turn_matches": retrieval.get("turn_matches", 0),
            "ncs_full_refreshes": ncs["full_refreshes"], "ncs_drift_measurements": ncs["drift_measurements"],
            "ncs_max_drift": ncs["max_abs_score_drift"], "leiden_reruns": found["leiden_reruns"]}


def mechanism_markdown(rows: dict[str, dict[str, Any]]) -> str:
    if not rows:
        return ""
    keys = list(next(iter(rows.values())))
    lines = ["| row | " + " | ".join(keys) + " |", "|" + "---|" * (len(keys) + 1)]
    for name, counts in rows.items():
        lines.append(f"| {name} | " + " | ".join("" if counts.get(k) is None else f"{counts[k]:.4g}" if isinstance(counts[k], float) else str(counts[k]) for k in keys) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", required=True, help="conf/experiment/<name>.yaml, e.g. locomo_conv26")
    parser.add_argument("--rows", nargs="+", default=["rag", "mosaic", "with_source_turns", "turn_matching"], choices=sorted(ROWS))
    parser.add_argument("--archive", type=Path, default=None, help="cache archive to import first and export after each row")
    parser.add_argument("--export-every-min", type=float, default=10.0,
                        help="with --archive, also export the cache every this many minutes while a row runs (0: only after each row)")
    parser.add_argument("--out", type=Path, default=None, help="default: results/bench/<experiment>_rows.json (and .md)")
    parser.add_argument("--publish", action="store_true", help="copy every finished row under results/published/runs/ and report those folders")
    parser.add_argument("--allow-dirty", action="store_true", help="run from uncommitted code (never for published rows)")
    parser.add_argument("extra", nargs="*", help="overrides for every run (after --), e.g. llm=vllm run.workers=16")
    args = parser.parse_args(argv)
    if BASE_ROW not in args.rows:
        raise SystemExit(f"--rows must include {BASE_ROW!r}: every MOSAIC row is compared with it")
    version = code_version()
    if args.publish and args.allow_dirty:
        raise SystemExit("--publish and --allow-dirty exclude each other: published rows come from one committed sha")
    if version["dirty"] and not args.allow_dirty:
        raise SystemExit("the tree has uncommitted changes: commit them (published rows come from one sha) or pass --allow-dirty")
    cache_dir = Path(os.environ.get("MOSAIC_CACHE_DIR") or ROOT / ".cache")
    if args.archive is not None and args.archive.is_file():
        added, held = import_cache(args.archive, cache_dir)
        print(f"cache archive {args.archive}: {added} responses added to {cache_dir}, {held} already held", flush=True)
    folders: dict[str, Path] = {}
    with periodic_export(cache_dir, args.archive, args.export_every_min):
        for row in args.rows:
            folders[row] = relative_to_checkout(run_folder([f"experiment={args.experiment}", *ROWS[row], *args.extra]))
            if args.archive is not None:
                print(f"cache archive {args.archive}: {export_cache(cache_dir, args.archive)} responses", flush=True)
    if args.publish:
        folders = {row: relative_to_checkout(run_rows.publish(folder)) for row, folder in folders.items()}
        print("published: " + ", ".join(f"{row} {folder}" for row, folder in folders.items()), flush=True)
    others = [row for row in args.rows if row != BASE_ROW]
    result = compare(folders[BASE_ROW], [folders[row] for row in others]) if others else {}
    counts = {row: found for row in args.rows if (found := mechanisms(ROOT / folders[row])) is not None}
    report = {"experiment": args.experiment, "code": version, "extra_overrides": args.extra,
              "runs": {row: str(path) for row, path in folders.items()}, "comparison": result, "mechanisms": counts}
    text = "\n\n".join(part for part in (markdown(result) if result else "", mechanism_markdown(counts)) if part)
    out = args.out or ROOT / "results" / "bench" / f"{args.experiment}_rows.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    out.with_suffix(".md").write_text(f"# {args.experiment}: {', '.join(args.rows)}\n\n{text}\n")
    if result:
        plot(result, out.with_suffix(".png"), names=others)
    print(text)
    return report


if __name__ == "__main__":
    main()
