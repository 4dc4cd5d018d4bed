"""Clarification targeting (MOSAIC mechanism 3, paper: coverage-greedy frontier selection).

The confidence gate holds back entities it cannot commit (belief entropy H > delta, or
confidence rho < rho_min) in a clarification queue: that queue is the *frontier*. This module
decides which queued entities to ask about under a budget of b questions, and turns an answer
into evidence for the gate.

Coverage, and what picking v does to it
---------------------------------------
The paper's coverage is f = sum_v w(v) * 1[H(v) <= delta]. Picking v for clarification does not
change H by itself; an *answered* clarification does: the answer is direct evidence about v's
slot (subject + attribute), so the belief over that slot collapses onto one value and H drops to
about 0 <= delta (``resolve_clarification`` runs that update for real). One answer settles every
queued entity of the same slot, since they are beliefs over the same candidate values. So for a
set S of entities asked about (each assumed answered),

    f(S) = sum over queued u of w(u) * 1[u in C(S)],   C(S) = union over v in S of C(v),
    C(v) = {v} + {queued u : same_slot(u, v)}.

Entities already settled (committed, H <= delta) add the same constant to every f(S) and are
left out. An entity queued for low rho has H <= delta over its candidates but the gate still
would not commit it; it counts as unsettled here, because coverage should count what the gate
would commit, and an answer (directness 1) is what lifts its rho.

f is a weighted set-coverage function, hence monotone (adding v can only grow C(S)) and
submodular (the gain of v, w(C(v) minus C(S)), can only shrink as S grows). By Nemhauser, Wolsey
and Fisher (1978) the greedy choice (repeatedly take the largest gain) reaches at least
(1 - 1/e) of the best f over sets of size b. ``research/bench_theory.py`` checks that bound
against exhaustive search. The weight w(v) is the importance the entity would enter memory with
(on commit importance = rho), so a clarification that settles a well-supported value counts for
more than one that settles a vague one.

If answers could be "unknown", f is the coverage *if answered*; the benchmark's oracle mode
(eval/benchmarks/halumem/clarify.py) reports how many questions were asked and answered.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from mosaic.entity import Entity
from mosaic.gate import ClarificationItem
from core.quantities import same_slot, values_match

UNKNOWN_ANSWERS = frozenset({"", "unknown", "i don't know", "i do not know", "not sure", "no answer"})
YES_ANSWERS = frozenset({"yes", "y", "true", "correct", "right", "confirmed"})
NO_ANSWERS = frozenset({"no", "n", "false", "wrong", "incorrect", "denied"})


@dataclass
class ClarificationTarget:
    """One greedy pick: which entity, why it is uncertain, the question, and what answering it covers."""

    entity_id: str
    text: str
    reason: str  # why the gate held it back (entropy above delta, or rho below rho_min)
    question: str  # the question that would settle it
    entropy: float
    rho: float
    gain: float  # coverage added by this pick, given the picks before it
    coverage: float  # f(S) after this pick
    covers: list[str] = field(default_factory=list)  # queued ids this answer settles (itself included)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def entity_weight(item: ClarificationItem) -> float:
    """w(v): the importance the entity would be committed with (the memory sets importance = rho)."""
    return float(item.rho)


def settled_by(item: ClarificationItem, queue: Sequence[ClarificationItem]) -> list[str]:
    """C(v): the queued entities an answer about ``item`` settles: itself and every queued entity of its slot."""
    return [other.entity.entity_id for other in queue if other is item or same_slot(other.entity, item.entity)]


Cover = Callable[[ClarificationItem, Sequence[ClarificationItem]], list[str]]


def coverage(
    chosen: Sequence[str], queue: Sequence[ClarificationItem], weight: Callable[[ClarificationItem], float] = entity_weight,
    cover: Cover = settled_by,
) -> float:
    """f(S) for the set of queued entity ids ``chosen`` (each assumed answered)."""
    by_id = {item.entity.entity_id: item for item in queue}
    covered: set[str] = set()
    for entity_id in chosen:
        covered.update(cover(by_id[entity_id], queue))
    return sum(weight(by_id[i]) for i in covered)


def greedy_targets(
    queue: Sequence[ClarificationItem], budget: int, weight: Callable[[ClarificationItem], float] = entity_weight,
    cover: Cover = settled_by,
) -> list[ClarificationTarget]:
    """Greedy maximisation of f under |S| <= ``budget``.

    Ties in gain go to the higher entropy (the more uncertain belief), then to the earlier queue
    position, so the choice is deterministic. Stops early when no pick adds coverage. ``cover``
    is C(v) (the benchmark passes other coverage families through it).
    """
    if budget < 0:
        raise ValueError(f"clarification budget must be >= 0, got {budget}")
    covers = {item.entity.entity_id: cover(item, queue) for item in queue}
    weights = {item.entity.entity_id: weight(item) for item in queue}
    covered: set[str] = set()
    picks: list[ClarificationTarget] = []
    total = 0.0
    remaining = list(enumerate(queue))
    while remaining and len(picks) < budget:
        def gain_of(entry: tuple[int, ClarificationItem]) -> float:
            return sum(weights[i] for i in covers[entry[1].entity.entity_id] if i not in covered)

        position, best = max(remaining, key=lambda entry: (gain_of(entry), entry[1].entropy, -entry[0]))
        gain = gain_of((position, best))
        if gain <= 0:
            break
        covered.update(covers[best.entity.entity_id])
        total += gain
        picks.append(ClarificationTarget(
            entity_id=best.entity.entity_id, text=best.entity.text, reason=best.reason, question=best.question,
            entropy=best.entropy, rho=best.rho, gain=gain, coverage=total, covers=list(covers[best.entity.entity_id]),
        ))
        remaining = [entry for entry in remaining if entry[1].entity.entity_id not in covered]
    return picks


# ---- answers as evidence ------------------------------------------------------------------------
def _normal(answer: str) -> str:
    return " ".join(str(answer).strip().lower().rstrip(".!").split())


def interpret_answer(item: ClarificationItem, answer: str | bool) -> tuple[str, str]:
    """What an answer says about ``item``'s slot: ("unknown", ""), ("denied", "") or ("value", v).

    yes (or True) -> the queued value; no (or False) -> the value held before it (the belief's best
    other candidate), or "denied" when there is none; anything else is taken as the value itself.
    """
    if isinstance(answer, bool):
        answer = "yes" if answer else "no"
    text = _normal(answer)
    queued_value = item.entity.value
    if text in UNKNOWN_ANSWERS:
        return "unknown", ""
    if text in YES_ANSWERS:
        return "value", queued_value
    if text in NO_ANSWERS:
        others = {v: p for v, p in item.entity.belief.items() if not values_match(v, queued_value or item.entity.text)}
        return ("value", max(others, key=others.get)) if others else ("denied", "")
    return "value", str(answer).strip()


def evidence_from_answer(item: ClarificationItem, value: str, answer: str | bool) -> Entity:
    """A direct statement of ``value`` for ``item``'s slot, to go through the gate like any other evidence.

    It keeps the queued entity's id, type, slot and source turns; its directness is 1 (the user
    said it in reply to a targeted question) and its evidence records the exchange.
    """
    old = item.entity
    entity = Entity.from_dict(old.to_dict())
    entity.directness = 1.0
    entity.belief = {}
    entity.status = "active"
    entity.evidence = f"Q: {item.question} A: {answer}"
    if value and old.value and not values_match(value, old.value):
        entity.text = old.text.replace(old.value, value) if old.value in old.text else f"{old.subject} {old.attribute}: {value}".strip()
        entity.value = value
    entity.history.append({"event": "clarified", "question": item.question, "answer": str(answer)})
    return entity


# ---- command: print a namespace's queue and targets from a run folder -----------------------------
def _memory_files(run: Path) -> list[Path]:
    for folder in (run / "system" / "mosaic", run / "mosaic", run):
        files = sorted(folder.glob("*.json")) if folder.is_dir() else []
        files = [f for f in files if f.name not in ("metrics.json", "overrides.json")]
        if files:
            return files
    raise FileNotFoundError(f"no MOSAIC memory files under {run} (looked in system/mosaic/, mosaic/ and the folder itself); "
                            "pass a run folder of a system=mosaic run")


def load_queue(path: Path) -> list[ClarificationItem]:
    """The clarification queue stored in one namespace's memory file (mosaic.store format)."""
    from mosaic.store import MemoryStore

    state = MemoryStore(path).load()
    return [ClarificationItem.from_dict(q) for q in state.get("queue", [])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mosaic.clarify", description="Print a namespace's clarification queue and greedy targets.")
    parser.add_argument("run", type=Path, help="a run folder (results/runs/.../<hash>) or a folder of MOSAIC memory files")
    parser.add_argument("--namespace", help="namespace (file stem); default: every namespace found")
    parser.add_argument("--budget", type=int, default=5, help="questions to pick (b)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    files = _memory_files(args.run)
    if args.namespace:
        files = [f for f in files if f.stem == args.namespace]
        if not files:
            parser.error(f"no memory file for namespace {args.namespace!r} under {args.run}")
    out: dict[str, Any] = {}
    for path in files:
        queue = load_queue(path)
        targets = greedy_targets(queue, args.budget)
        out[path.stem] = {"queue": [q.to_dict() for q in queue], "targets": [t.to_dict() for t in targets],
                          "coverage_if_all_answered": coverage([q.entity.entity_id for q in queue], queue)}
        if not args.json:
            print(f"== {path.stem}: {len(queue)} queued, budget {args.budget}")
            for q in queue:
                print(f"  queued  {q.entity.entity_id}: {q.entity.text!r}  H={q.entropy:.2f} rho={q.rho:.2f}  ({q.reason})")
            for rank, t in enumerate(targets, 1):
                print(f"  target {rank}: {t.entity_id} gain={t.gain:.3f} f={t.coverage:.3f} covers={t.covers}\n           ask: {t.question}")
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
