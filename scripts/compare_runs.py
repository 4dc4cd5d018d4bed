"""Paired comparison of finished runs: each OTHER against BASE over the same questions or cases.

    python -m scripts.compare_runs <BASE run folder> <OTHER run folder> [<OTHER> ...] [--out FILE.json]

LoCoMo runs: judge accuracy and token F1 of both, and OTHER - BASE with a paired bootstrap CI,
overall and per category. Conflict-suite runs: detection and false alarms, the same way. Both:
the write cost per turn (calls, tokens, seconds; share of calls the response cache served). No LLM
call. Prints a markdown table; with --out also writes the JSON (and the table beside it as .md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval.compare import compare_conflict, compare_locomo, run_kind, write_cost  # noqa: E402


def _pct(value: float | None, signed: bool = False) -> str:
    if value is None:
        return ""
    return f"{value * 100:+.1f}" if signed else f"{value * 100:.1f}"


def _diff(stat: dict[str, Any]) -> str:
    if stat.get("mean") is None:
        return ""
    ci = f" [{_pct(stat['ci_low'], True)}, {_pct(stat['ci_high'], True)}]" if stat.get("ci_low") is not None else ""
    return f"{_pct(stat['mean'], True)}{ci}"


def _num(value: float | None, digits: int = 2) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def compare(base: Path, others: list[Path], n_samples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Every OTHER against BASE: the quality comparison for their benchmark and each run's write cost."""
    kind = run_kind(base)
    rows = []
    for other in others:
        if run_kind(other) != kind:
            raise ValueError(f"{other} measured {run_kind(other)}, {base} measured {kind}: compare runs of one benchmark")
        quality = compare_locomo(base, other, n_samples, seed) if kind == "locomo" else compare_conflict(base, other, n_samples, seed)
        rows.append({"run": str(other), "quality": quality, "write_cost": write_cost(other)})
    return {"benchmark": kind, "base": str(base), "base_write_cost": write_cost(base), "comparisons": rows,
            "bootstrap": {"paired": True, "n_samples": n_samples, "seed": seed}}


def markdown(result: dict[str, Any]) -> str:
    """One table: the base row, then each OTHER with its paired difference from the base."""
    locomo = result["benchmark"] == "locomo"
    quality = ("judge", "judge - base", "F1", "F1 - base") if locomo else ("detection", "detection - base", "false alarms", "false alarms - base")
    head = ["run", *quality, "n", "calls/turn", "tokens/turn", "s/turn", "cached calls"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def cost(c: dict[str, Any]) -> list[str]:
        return [_num(c["calls_per_turn"]), _num(c.get("tokens_per_turn"), 0), _num(c.get("seconds_per_turn"), 1), _pct(c.get("cached_call_share"))]

    first = result["comparisons"][0]["quality"] if result["comparisons"] else None
    fields = ("correct", "f1") if locomo else ("detected", "false_alarm")
    if first:
        base_cells = [_pct(first[fields[0]]["base"]), "", _pct(first[fields[1]]["base"]), ""]
        lines.append("| " + " | ".join([f"base: {result['base']}", *base_cells, str(first["n_shared"]), *cost(result["base_write_cost"])]) + " |")
    for row in result["comparisons"]:
        q = row["quality"]
        cells = [_pct(q[fields[0]]["other"]), _diff(q[fields[0]]), _pct(q[fields[1]]["other"]), _diff(q[fields[1]])]
        lines.append("| " + " | ".join([row["run"], *cells, str(q["n_shared"]), *cost(row["write_cost"])]) + " |")
    unit = "ingested turn" if locomo else "probe (tokens are not recorded per probe)"
    lines.append("")
    lines.append(f"Differences are OTHER - base in points, paired bootstrap 95% CI over the shared items; cost per {unit}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=Path)
    parser.add_argument("others", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here (and the table as .md beside it)")
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    result = compare(args.base, args.others, args.samples, args.seed)
    table = markdown(result)
    print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        args.out.with_suffix(".md").write_text(table + "\n")
    return result


if __name__ == "__main__":
    main()
