"""What MOSAIC's write path spent per turn, and what two cheaper write paths could save at most.

    python -m research.write_cost_replay <MOSAIC run folder> [--radii 0.3 0.4 0.5 0.6] [--out FILE]

Reads the persisted memory of a finished MOSAIC run (``system/mosaic/*.json``: the per-turn cost
log and the entity vectors) and makes no LLM call. It reports:

- calls and tokens per ingested turn, by purpose (extraction, conflict, belief), as metered;
- **per-turn batching bound**: the calls per turn if all of a turn's conflict judgements were one
  call (every turn that made at least one conflict call makes exactly one);
- **judge radius bound**: for each radius r, the share of entities whose nearest earlier entity has
  cosine < r, i.e. the conflict judgements ``system.conflict.judge_min_similarity=r`` could skip.
  The replay takes every earlier entity as held (superseded and flagged ones included), so the
  nearest cosine is an upper bound and the skipped share a lower bound of what a run would skip;
- **same-slot share**: entities with an earlier entity of the same subject and attribute
  (``core.quantities.same_slot``): what judging only like-with-like pairs would still send to the LLM
  (logical clashes across slots would then go unjudged).

Both are bounds from a replay, not measurements: a run with the switch set is the measurement.
Writes JSON to --out (default results/bench/write_cost_replay_<run>.json) and prints a summary.
"""

from __future__ import annotations

import argparse
import base64
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from core.quantities import same_slot
from research.error_analysis import load_memory

PURPOSES = ("extraction", "conflict", "belief")


def _vectors(state: dict[str, Any]) -> np.ndarray:
    """Unit vectors of every stored entity, in insertion order."""
    graph = state["graph"]
    ids = [entity["entity_id"] for entity in graph["entities"]]
    matrix = np.stack([np.frombuffer(base64.b64decode(graph["vectors"][i]), dtype=np.float32) for i in ids])
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def nearest_earlier_cosines(matrix: np.ndarray) -> np.ndarray:
    """For each entity after the first, the cosine of the nearest entity stored before it."""
    return np.array([float((matrix[:i] @ matrix[i]).max()) for i in range(1, len(matrix))])


class _Slot:
    """The two fields same_slot reads, from a stored entity."""

    def __init__(self, entity: dict[str, Any]) -> None:
        self.subject = entity.get("subject") or ""
        self.attribute = entity.get("attribute") or ""


def earlier_same_slot(entities: list[dict[str, Any]]) -> int:
    """How many entities have an earlier entity of the same subject and attribute."""
    slots = [_Slot(e) for e in entities]
    return sum(any(same_slot(slot, earlier) for earlier in slots[:i]) for i, slot in enumerate(slots) if i)


def replay(run: Path, radii: list[float]) -> dict[str, Any]:
    files = sorted((run / "system" / "mosaic").glob("*.json"))
    if not files:
        raise SystemExit(f"{run}/system/mosaic/ holds no memory file: pass a finished MOSAIC run folder")
    log: list[dict[str, Any]] = []
    cosines: list[np.ndarray] = []
    with_slot_peer = 0
    for path in files:
        state = load_memory(path)
        log.extend(state.get("cost_log", []))
        with_slot_peer += earlier_same_slot(state["graph"]["entities"])
        if len(state["graph"]["entities"]) > 1:
            cosines.append(nearest_earlier_cosines(_vectors(state)))
    if not log:
        raise SystemExit(f"{run}: the memory files carry no cost_log (written by older code)")
    turns = len(log)

    def per_turn(purpose: str, field: str) -> float:
        return sum(r["usage"]["by_purpose"].get(purpose, {}).get(field, 0) for r in log) / turns

    calls = {p: per_turn(p, "calls") for p in PURPOSES}
    tokens = {p: per_turn(p, "prompt_tokens") + per_turn(p, "completion_tokens") for p in PURPOSES}
    conflict_per_turn = Counter(r["usage"]["by_purpose"].get("conflict", {}).get("calls", 0) for r in log)
    batched_conflict = sum(count for calls_made, count in conflict_per_turn.items() if calls_made > 0) / turns
    near = np.concatenate(cosines) if cosines else np.zeros(0)
    return {
        "run": str(run),
        "turns": turns,
        "calls_per_turn": {**{p: round(v, 3) for p, v in calls.items()}, "total": round(sum(calls.values()), 3)},
        "tokens_per_turn": {**{p: round(v, 1) for p, v in tokens.items()}, "total": round(sum(tokens.values()), 1)},
        "conflict_calls_per_turn_histogram": {str(k): v for k, v in sorted(conflict_per_turn.items())},
        "batched_bound": {
            "conflict_calls_per_turn": round(batched_conflict, 3),
            "total_calls_per_turn": round(calls["extraction"] + batched_conflict + calls["belief"], 3),
        },
        "nearest_earlier_cosine": {
            "n": int(near.size),
            "quantiles": {q: round(float(np.quantile(near, float(q))), 3) for q in ("0.1", "0.25", "0.5", "0.75", "0.9")} if near.size else {},
        },
        "judge_radius_bound": {str(r): round(float((near < r).mean()), 3) if near.size else None for r in radii},
        "same_slot_share": round(with_slot_peer / near.size, 3) if near.size else None,
        "note": "replay of a persisted memory, no LLM call: bounds, not measurements (research/write_cost_replay.py)",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--radii", type=float, nargs="+", default=[0.3, 0.4, 0.5, 0.6])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    report = replay(args.run, args.radii)
    out = args.out or Path("results/bench") / f"write_cost_replay_{args.run.name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: report[k] for k in ("turns", "calls_per_turn", "tokens_per_turn", "batched_bound", "judge_radius_bound", "same_slot_share")}, indent=2))
    print("written to", out)


if __name__ == "__main__":
    main()
