"""Build paper-shaped tables from metrics.json files only (never from numbers typed in).

    python scripts/make_tables.py [--root results/runs] [--out results/tables] [--convention mem0]

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

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from hydra.utils import get_class  # noqa: E402

from eval.tables import to_markdown, write_tables  # noqa: E402


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


def build(root: Path, out: Path, convention: str | None = None) -> dict[str, str]:
    """Write one table per benchmark; return benchmark -> Markdown."""
    written = {}
    for benchmark, runs in sorted(load_runs(root).items()):
        cls = get_class(_field(runs[0], "benchmark_target"))
        table = cls.make_table(runs, convention) if convention else cls.make_table(runs)
        write_tables(table, out / benchmark)
        written[benchmark] = to_markdown(table)
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
