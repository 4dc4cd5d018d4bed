"""Add the fields a finished LoCoMo run lacks (cluster intervals, conversations, tokens returned, evidence recall at
token budgets) to its metrics.json, recomputed from its stored rows: no LLM, no existing value changed.

    python -m scripts.add_fields [RUN_FOLDER ...] [--dry-run]

Without folders: every published LoCoMo run (results/published/runs/locomo). A run whose recomputed values differ
from those it holds is left untouched and listed (eval/benchmarks/locomo/added_fields.py). Then
`python -m scripts.make_tables` shows the new fields.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from eval.benchmarks.locomo.added_fields import add_fields

PUBLISHED_LOCOMO = Path(__file__).resolve().parents[1] / "results" / "published" / "runs" / "locomo"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, nargs="*", help="LoCoMo run folders (default: every published one)")
    parser.add_argument("--dry-run", action="store_true", help="say what would be added, write nothing")
    args = parser.parse_args(argv)
    runs = args.runs or sorted(p.parent for p in PUBLISHED_LOCOMO.glob("*/*/*/metrics.json"))
    failed = 0
    for run in runs:
        report = add_fields(run, write=not args.dry_run)
        if report.skipped:
            print(f"{run}: skipped ({report.skipped})")
        elif report.conflicts:
            failed += 1
            print(f"{run}: left untouched, {len(report.conflicts)} recomputed values differ, e.g. {report.conflicts[0]}")
        else:
            print(f"{run}: {'would add' if args.dry_run else 'added'} {len(report.added)} fields" if report.added else f"{run}: nothing to add")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
