"""Update linking: did the save-time conflict check link each real update to what it replaces?

HaluMem's updating task scores what a search returns after an update; this module scores the write
itself, from the conflict events (update, flag or reject) a system reported while adding a session
(``AddReport.conflict_events``). For every gold update point U of the session (``is_update`` with
``original_memories``, HaluMem's searched updates):

* targets(U): the memories held before the session was added that U replaces: held items whose gold
  fact (oracle run: the item's ``fact_id``) or whose own text (model-extracted run) has cosine >=
  ``held_similarity`` with one of U's original memories (the run's embedder);
* events(U): the session's conflict events whose new item is U: by ``new_fact_id`` in an oracle run;
  in a model-extracted run, the event's new text whose nearest gold point of the session (cosine >=
  ``new_similarity``, interference points excluded) is U;
* outcome: ``right`` (an event's held item is a target), ``wrong`` (events, none on a target),
  ``missed`` (no event, though a target was held) or ``no_target`` (no event, and nothing held that U
  replaces: HaluMem's original memories often come from the persona, never said in a dialogue).

False alarms: events whose new item is a non-update gold point (``false_alarms``, events) and the
non-update points with at least one such event (``false_alarm_points``, the rate's numerator: a
model-extracted run can write several items, each with events, for one point, so events can outnumber
the points); events whose new item matches no gold point (model-extracted runs only) are counted apart
as ``unmatched``. Every count is per session row, so a reader can recount them
(``halumem_update_links.jsonl``). Runs made before ``false_alarm_points`` existed have events only.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Sequence

import numpy as np

from core.api import ConflictEvent, StoredItem
from eval.benchmarks.halumem.data import MemoryPoint

OUTCOMES = ("right", "wrong", "missed", "no_target")
Encode = Callable[[list[str]], np.ndarray]  # unit vectors, one row per text (core.embed.Embedder.encode)


def fact_id_of(session_index: int, point: MemoryPoint) -> str:
    """The gold id of a memory point within its user: ``<session>:p<index>`` (also OracleFact.fact_id)."""
    return f"{session_index}:p{point.index}"


def _cosine(encode: Encode, left: Sequence[str], right: Sequence[str]) -> np.ndarray:
    if not left or not right:
        return np.zeros((len(left), len(right)), dtype=np.float32)
    return np.asarray(encode(list(left))) @ np.asarray(encode(list(right))).T


def link_session(
    session_index: int,
    points: Sequence[MemoryPoint],
    held: Sequence[StoredItem],
    events: Sequence[ConflictEvent],
    gold_text: dict[str, str],
    encode: Encode,
    held_similarity: float,
    new_similarity: float,
) -> dict[str, Any]:
    """One session's update-link counts (see the module docstring).

    ``held``: what the system held before the session's add; ``gold_text``: fact id -> text of every gold
    point of the user (an oracle run's held items name theirs); an item with a ``fact_id`` is matched
    through its gold text, one without through its own text.
    """
    gold = [p for p in points if not p.is_interference]
    updates = [p for p in gold if p.is_searched_update]
    ids = {fact_id_of(session_index, p): p for p in gold}
    # targets: held memory ids per update point
    held_texts = [gold_text.get(item.fact_id, item.text) if item.fact_id else item.text for item in held]
    targets: dict[int, set[str]] = {}
    for point in updates:
        sims = _cosine(encode, list(point.original_memories), held_texts)
        hit = (sims >= held_similarity).any(axis=0) if sims.size else np.zeros(len(held), dtype=bool)
        targets[point.index] = {held[i].memory_id for i in np.flatnonzero(hit)}
    # the gold point each event's new item is
    new_point: list[MemoryPoint | None] = []
    model_events = [e for e in events if e.new_fact_id is None]
    sims = _cosine(encode, [e.new_text for e in model_events], [p.content for p in gold])
    nearest = {id(e): (gold[int(row.argmax())] if row.size and row.max() >= new_similarity else None) for e, row in zip(model_events, sims)}
    for event in events:
        new_point.append(ids.get(event.new_fact_id) if event.new_fact_id is not None else nearest[id(event)])
    rows = []
    for point in updates:
        mine = [e for e, p in zip(events, new_point) if p is point]
        on_target = [e for e in mine if e.old_memory_id in targets[point.index]]
        outcome = "right" if on_target else "wrong" if mine else "missed" if targets[point.index] else "no_target"
        rows.append({
            "index": point.index,
            "outcome": outcome,
            "targets_held": len(targets[point.index]),
            "events": len(mine),
            "verdicts": [e.verdict for e in (on_target or mine)],
        })  # fmt: skip
    alarms = [(e, p) for e, p in zip(events, new_point) if p is not None and not p.is_searched_update]
    return {
        "points": rows,
        "non_update_points": len(gold) - len(updates),
        "events": len(events),
        "false_alarms": len(alarms),
        "false_alarm_points": len({id(p) for _, p in alarms}),
        "false_alarm_verdicts": dict(Counter(e.verdict for e, _ in alarms)),
        "unmatched_events": sum(p is None for p in new_point),
    }


def update_link_metrics(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals over session rows: outcome counts of the update points, false alarms and their base."""
    outcomes = Counter(point["outcome"] for row in rows for point in row["points"])
    verdicts = Counter(v for row in rows for point in row["points"] if point["outcome"] == "right" for v in point["verdicts"][:1])
    alarms = Counter()
    for row in rows:
        alarms.update(row["false_alarm_verdicts"])
    return {
        "update_points": sum(len(row["points"]) for row in rows),
        **{outcome: outcomes[outcome] for outcome in OUTCOMES},
        "right_by_verdict": dict(verdicts),
        "non_update_points": sum(row["non_update_points"] for row in rows),
        "false_alarms": sum(row["false_alarms"] for row in rows),
        # None for a run made before the per-point count existed (its rows have events only)
        "false_alarm_points": (sum(row["false_alarm_points"] for row in rows)
                               if all("false_alarm_points" in row for row in rows) else None),
        "false_alarms_by_verdict": dict(alarms),
        "unmatched_events": sum(row["unmatched_events"] for row in rows),
        "events": sum(row["events"] for row in rows),
    }


def false_alarm_text(links: dict[str, Any]) -> str:
    """Update-link totals' false alarms for a table cell: alarmed non-update points 'n of N', or, for a run made before
    points were counted, its events, said to be events (they can outnumber the points)."""
    points = links.get("false_alarm_points")
    base = links.get("non_update_points", 0)
    if points is None:
        return f"{links.get('false_alarms', 0)} events on {base} points (points not counted)"
    return f"{points} of {base}"
