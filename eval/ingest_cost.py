"""What a run's ingest cost per turn, from its per-session rows, finished or not.

Why: some systems cost minutes per turn here (a graph built by LLM calls, an agent loop per turn), so a run of
theirs can be stopped long before its conversation is ingested. The run folder still holds one row per
session added (``ingest_sessions.jsonl``, written by a benchmark's ingest stage), and this module turns them
into the measured cost per ingested turn: wall seconds, LLM calls and tokens as the system reported them
and as the harness client metered them (a server that makes its own LLM calls shows up only
in the reported column), split by purpose. Sessions with any call served from the response cache are also
left out in a second, "cold" summary, whose seconds are those of a machine paying for every call. Systems
that take minutes per turn also log each turn as it finishes (core/turn_costs.py,
``system/turn_costs.jsonl``), so a run stopped inside a session still has a third, per-turn summary of what
the system accounted to each turn (the first record of a turn is kept: a resumed run's replays come later).
Reads the folder only; no LLM, no model. The command is ``python -m research.ingest_cost``; publishing
an unfinished run (eval/publishing.py) records the same report beside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval.rows import read_rows

SESSION_ROWS = "ingest_sessions.jsonl"
TURN_ROWS = Path("system") / "turn_costs.jsonl"


def read_session_rows(run_dir: Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / SESSION_ROWS
    if not path.is_file():
        if (Path(run_dir) / TURN_ROWS).is_file():
            return []  # stopped inside its first session: only the per-turn log says anything
        raise SystemExit(f"{path} is missing: is {run_dir} the folder of a run whose benchmark writes per-session ingest rows, started after they were added?")
    return read_rows(path)


def read_turn_rows(run_dir: Path) -> list[dict[str, Any]]:
    """The system's per-turn log, the first record of each (namespace, turn) only; [] when the system keeps none."""
    path = Path(run_dir) / TURN_ROWS
    first: dict[tuple[str, str], dict[str, Any]] = {}
    for row in read_rows(path, key_field=None) if path.is_file() else []:  # a log: rows have no `key`
        first.setdefault((str(row["namespace"]), str(row["turn_id"])), row)
    return list(first.values())


def _usage_per_turn(usage: list[dict[str, Any]], turns: int) -> dict[str, float]:
    """Calls and tokens per turn, and the share of calls the response cache served, over usage records."""
    calls = sum(u["calls"] for u in usage)
    return {"calls_per_turn": calls / turns,
            "prompt_tokens_per_turn": sum(u["prompt_tokens"] for u in usage) / turns,
            "completion_tokens_per_turn": sum(u["completion_tokens"] for u in usage) / turns,
            "cached_share": sum(u.get("cached_calls", 0) for u in usage) / max(calls, 1)}  # fmt: skip


def summarise_turns(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not rows:
        return None
    n = len(rows)
    return {"turns": n, "seconds_per_turn": sum(row["seconds"] for row in rows) / n, **_usage_per_turn([row["usage"] for row in rows], n),
            "failures": sum(int(row.get("failures", 0)) for row in rows)}  # fmt: skip


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Per-turn cost over ``rows`` (None when there are none)."""
    turns = sum(int(row["n_turns"]) for row in rows)
    if not rows or not turns:
        return None
    out: dict[str, Any] = {"sessions": len(rows), "turns": turns, "seconds_per_turn": sum(row["seconds"] for row in rows) / turns,
                           "failures": sum(int(row.get("failures", 0)) for row in rows)}  # fmt: skip
    for source in ("usage_reported", "usage_metered"):
        usage = [row[source] for row in rows]
        purposes: dict[str, dict[str, float]] = {}
        for one in usage:
            for purpose, counts in one.get("by_purpose", {}).items():
                into = purposes.setdefault(purpose, {})
                for key, value in counts.items():
                    into[key] = into.get(key, 0) + value / turns
        out[source] = {**_usage_per_turn(usage, turns), "by_purpose_per_turn": purposes}
    return out


def ingest_cost(run_dir: Path) -> dict[str, Any]:
    rows = read_session_rows(run_dir)
    cold = [row for row in rows if not row["usage_metered"].get("cached_calls") and not row["usage_reported"].get("cached_calls")]
    return {"run": str(run_dir), "finished": (Path(run_dir) / "metrics.json").is_file(), "all": summarise(rows), "cold": summarise(cold),
            "by_turn": summarise_turns(read_turn_rows(run_dir))}


def markdown(report: dict[str, Any]) -> str:
    lines = [f"{report['run']} ({'finished' if report['finished'] else 'not finished'})", "",
             "| subset | sessions | turns | s / turn | calls / turn (reported, metered) | tokens / turn (reported) | cached share (metered) | failures |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name in ("all", "cold"):
        cell = report[name]
        if cell is None:
            lines.append(f"| {name} | 0 | 0 | | | | | |")
            continue
        reported, metered = cell["usage_reported"], cell["usage_metered"]
        tokens = reported["prompt_tokens_per_turn"] + reported["completion_tokens_per_turn"]
        lines.append(f"| {name} | {cell['sessions']} | {cell['turns']} | {cell['seconds_per_turn']:.1f} | "
                     f"{reported['calls_per_turn']:.2f}, {metered['calls_per_turn']:.2f} | {tokens:,.0f} | {metered['cached_share']:.2f} | {cell['failures']} |")  # fmt: skip
    turn = report["by_turn"]
    if turn is not None:
        tokens = turn["prompt_tokens_per_turn"] + turn["completion_tokens_per_turn"]
        lines.append(f"| turns logged by the system | | {turn['turns']} | {turn['seconds_per_turn']:.1f} | {turn['calls_per_turn']:.2f}, | "
                     f"{tokens:,.0f} | {turn['cached_share']:.2f} | {turn['failures']} |")  # fmt: skip
    return "\n".join(lines)
