"""What a LoCoMo run's ingest cost per turn, from its per-session rows, finished or not.

    python -m research.ingest_cost <run folder> [--out cost.json]

Why: some systems cost minutes per turn here (Zep through graphiti, MemGPT's agent loop), so a run of
theirs can be stopped long before its conversation is ingested. The run folder still holds one row per
session added (``ingest_sessions.jsonl``, written by eval.benchmarks.locomo.stages.ingest), and this turns them
into the measured cost per ingested turn: wall seconds, LLM calls and tokens as the system reported them
and as the harness client metered them (a server that makes its own LLM calls, like Letta, shows up only
in the reported column), split by purpose. Sessions with any call served from the response cache are also
left out in a second, "cold" summary, whose seconds are those of a machine paying for every call. Systems
that take minutes per turn (Zep, MemGPT) also log each turn as it finishes (core/turn_costs.py,
``system/turn_costs.jsonl``), so a run stopped inside a session still has a third, per-turn summary of what
the system accounted to each turn (the first record of a turn is kept: a resumed run's replays come later).
Reads the folder only; no LLM, no model.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from core.atomic import write_json_atomic
from eval.ingest_cost import ingest_cost, markdown

__all__ = ["ingest_cost", "main", "markdown"]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="also write the report as JSON")
    args = parser.parse_args(argv)
    report = ingest_cost(args.run_dir)
    print(markdown(report))
    if args.out is not None:
        write_json_atomic(args.out, report, indent=2)
    return report


if __name__ == "__main__":
    main()
