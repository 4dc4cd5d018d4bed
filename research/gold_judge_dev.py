"""Paired comparisons of HaluMem mechanism runs (rows of eval/benchmarks/halumem/mechanism.py), for two choices of
the gold-judge study: does an update move recall on questions no update touched (association edges handed over or
dropped; dual or exact retrieval), and should search hide or mark a superseded memory (system.superseded).

    python -m research.gold_judge_dev <run folder A> <run folder B> [...]

Each later folder is compared with the first, over the questions (points) both have: mean of B - A with a
bootstrap CI. "Untouched" questions cite no fact that an update replaced or that replaces another (the gold chain
in the rows). Reads ids and booleans only.
"""

from __future__ import annotations

import sys
from pathlib import Path

from eval.benchmarks.halumem.mechanism import evidence_recall, successors
from eval.metrics import bootstrap_ci, format_ci
from eval.rows import read_rows


def per_item(folder: Path) -> tuple[dict[str, tuple[float, float]], dict[str, tuple[bool, bool]], set[str]]:
    rows = read_rows(folder / "halumem_mechanism.jsonl", key_field=None)
    replaces = {new: tuple(olds) for row in rows for new, olds in row.get("replaces", {}).items()}
    chain = successors(replaces)
    touched = set(chain) | {new for new, olds in replaces.items() if olds}
    questions, untouched = {}, set()
    for row in rows:
        for q in row.get("questions", []):
            key = f"{row['session']}:q{q['q']}"
            questions[key] = evidence_recall(q["evidence_fact_ids"], q["retrieved_fact_ids"], chain, int(row["session"]))
            if not set(q["evidence_fact_ids"]) & touched:
                untouched.add(key)
    points = {f"{row['session']}:p{p['index']}": (p["stale_leak"], p["current_first"]) for row in rows for p in row.get("points", [])}
    return questions, points, untouched


def paired(a: dict, b: dict, pick: int, keys: set[str] | None = None) -> str:
    shared = sorted((set(a) & set(b)) if keys is None else (set(a) & set(b) & keys))
    diffs = [float(b[k][pick]) - float(a[k][pick]) for k in shared]
    moved = sum(d != 0 for d in diffs)
    return f"{format_ci(bootstrap_ci(diffs, 1000, 0))} (n={len(shared)}, {moved} moved)"


def main(folders: list[str]) -> None:
    base_q, base_p, untouched = per_item(Path(folders[0]))
    print(f"A = {folders[0]}: {len(base_q)} questions ({len(untouched)} untouched), {len(base_p)} linked points")
    for folder in folders[1:]:
        q, p, _ = per_item(Path(folder))
        print(f"B = {folder}")
        print(f"  strict recall B-A: {paired(base_q, q, 0)}; chain-aware: {paired(base_q, q, 1)}")
        print(f"  untouched questions, strict recall B-A: {paired(base_q, q, 0, untouched)}")
        print(f"  stale leak B-A: {paired(base_p, p, 0)}; current-first B-A: {paired(base_p, p, 1)}")


if __name__ == "__main__":
    main(sys.argv[1:])
