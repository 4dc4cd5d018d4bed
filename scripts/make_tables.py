"""Build paper-shaped tables from metrics.json files only (never from numbers typed in).

    python -m scripts.make_tables [--root results/runs] [--out results/tables] [--convention mem0]

Groups runs by benchmark, calls that benchmark class's static ``make_table`` (class path
recorded in metrics.json as ``benchmark_target``), writes <out>/<benchmark>.{md,csv,tex}
and prints the Markdown; a class's optional ``make_extra_tables`` adds more (LoCoMo: the
judge-and-gold view, locomo_judge_gold.*).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from hydra.utils import get_class

from eval.tables import to_markdown, write_tables

REPO = Path(__file__).resolve().parents[1]


def _field(metrics: dict[str, Any], name: str) -> Any:
    return metrics.get("metadata", {}).get(name) or metrics.get(name)


def load_runs(root: Path) -> dict[str, list[dict[str, Any]]]:
    """metrics.json files under ``root`` grouped by benchmark name (sorted by path: stable tables)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path in sorted(root.rglob("metrics.json")):
        try:
            metrics = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise SystemExit(f"{path}: line {err.lineno}: not valid JSON ({err.msg})") from err
        if not _field(metrics, "benchmark_target") or not _field(metrics, "benchmark"):
            raise SystemExit(f"{path}: missing `benchmark` / `benchmark_target` (written by eval.runner)")
        metrics["_path"] = str(path)
        groups[_field(metrics, "benchmark")].append(metrics)
    return groups


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


def provenance_notes(runs: list[dict[str, Any]]) -> str:
    """A footnote under a table listing every run that does not come from one clean commit."""
    lines = [f"- {run['_path']}: {'; '.join(flags)}" for run in runs if (flags := provenance_flags(run))]
    return "\n\n**Provenance: not from one clean commit**\n" + "\n".join(lines) if lines else ""


def build(root: Path, out: Path, convention: str | None = None) -> dict[str, str]:
    """Write one table per benchmark (with a provenance footnote where needed); return benchmark -> Markdown."""
    written = {}
    for benchmark, runs in sorted(load_runs(root).items()):
        cls = get_class(_field(runs[0], "benchmark_target"))
        table = cls.make_table(runs, convention) if convention else cls.make_table(runs)
        write_tables(table, out / benchmark)
        notes = provenance_notes(runs)
        if notes:
            md_path = (out / benchmark).with_suffix(".md")
            if md_path.exists():
                md_path.write_text(md_path.read_text(encoding="utf-8").rstrip("\n") + notes + "\n", encoding="utf-8")
        written[benchmark] = to_markdown(table) + notes
        extra = getattr(cls, "make_extra_tables", None)  # e.g. LoCoMo's judge-and-gold view
        for name, extra_table in (extra(runs) if extra else {}).items():
            write_tables(extra_table, out / name)
            written[name] = to_markdown(extra_table)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=REPO / "results" / "runs")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "tables")
    parser.add_argument("--convention", default=None, help="relabel categories (locomo or mem0); default: the runs' own")
    args = parser.parse_args(argv)
    tables = build(args.root, args.out, args.convention)
    if not tables:
        print(f"no metrics.json under {args.root}", file=sys.stderr)
        return 1
    for benchmark, markdown in tables.items():
        print(f"## {benchmark}  ({args.out / benchmark}.md/.csv/.tex)\n\n{markdown}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
