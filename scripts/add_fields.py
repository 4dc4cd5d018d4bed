"""Add the fields a finished run lacks to its metrics.json, recomputed from its stored rows: no LLM, no existing
value changed. A LoCoMo run: cluster intervals, conversations, tokens returned, evidence recall at token budgets. A
retrieval-only run (LoCoMo or HaluMem): its retrieval metrics with today's code (cluster intervals; tokens and budgets
where its rows record tokens) and the paired differences to its base row, rag over oracle facts on the same slice
(``retrieval_paired_to_base``, eval/retrieval_paired.py, eval/added_fields.py).

    python -m scripts.add_fields [RUN_FOLDER ...] [--dry-run]

Without folders: every published LoCoMo run and every published HaluMem retrieval-only run. A run whose recomputed
values differ from those it holds is left untouched and listed (eval/benchmarks/locomo/added_fields.py). Then
`python -m scripts.make_tables` shows the new fields.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from eval.added_fields import add_retrieval_fields
from eval.benchmarks.locomo.added_fields import add_fields
from eval.retrieval_table import base_row

PUBLISHED = Path(__file__).resolve().parents[1] / "results" / "published" / "runs"
PUBLISHED_LOCOMO = PUBLISHED / "locomo"


def _metrics(run: Path) -> dict[str, Any]:
    return json.loads((run / "metrics.json").read_text(encoding="utf-8"))


def _same_slice(m: dict[str, Any]) -> tuple[Any, ...]:
    """What a retrieval run and its base must share: the LoCoMo slice, or the HaluMem user file."""
    return (m.get("benchmark"), json.dumps(m.get("slice"), sort_keys=True), m.get("user_file"))


def retrieval_base(run: Path) -> Path | None:
    """The published base row of a retrieval-only run: rag over oracle facts, no system.* override, same slice."""
    mine = _same_slice(_metrics(run))
    system, ablation = base_row()  # conf/report.yaml retrieval_base_row
    for candidate in sorted(PUBLISHED.glob(f"*/{system}/{ablation}/*/metrics.json")):
        m = _metrics(candidate.parent)
        meta = m.get("metadata", {})
        if (tuple(m.get("stages") or ()) == ("ingest", "retrieve") and _same_slice(m) == mine
                and not any(str(o).startswith("system.") for o in meta.get("overrides", []))):  # fmt: skip
            return candidate.parent
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, nargs="*", help="LoCoMo run folders (default: every published one)")
    parser.add_argument("--dry-run", action="store_true", help="say what would be added, write nothing")
    args = parser.parse_args(argv)
    runs = args.runs or sorted(p.parent for p in [*PUBLISHED_LOCOMO.glob("*/*/*/metrics.json"), *(PUBLISHED / "halumem").glob("*/*/*/metrics.json")]
                               if tuple(_metrics(p.parent).get("stages") or ()) == ("ingest", "retrieve") or p.is_relative_to(PUBLISHED_LOCOMO))  # fmt: skip
    failed = 0
    for run in runs:
        if tuple(_metrics(run).get("stages") or ()) == ("ingest", "retrieve"):
            report = add_retrieval_fields(run, retrieval_base(run), write=not args.dry_run)
        else:
            report = add_fields(run, write=not args.dry_run)
        if report.skipped:
            print(f"{run}: skipped ({report.skipped})")
        elif report.mismatches:
            failed += 1
            print(f"{run}: left untouched, {len(report.mismatches)} recomputed values differ, e.g. {report.mismatches[0]}")
        else:
            print(f"{run}: {'would add' if args.dry_run else 'added'} {len(report.added)} fields" if report.added else f"{run}: nothing to add")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
