"""The oracle extractor: a benchmark's gold facts in place of MOSAIC's extraction LLM call.

It separates "the small model extracts badly" from "MOSAIC organises memory badly": with
``system.extract.source: oracle`` (conf/ablation/oracle_extractor.yaml) each turn's entities are the
gold facts the benchmark attached to it (``Turn.oracle_facts``), and everything after extraction
(gate and belief, save-time conflict check, graph, communities, scoring, retrieval) runs unchanged.

The entities are the ones the LLM extractor builds, with every field the LLM would have written set
by a fixed rule (docs/halumem.md, "Oracle extractor"):

* text: the gold fact verbatim (not cut, no cap on facts per turn: the gold set is the gold set);
* type: the first word of the benchmark's memory type when it names one of MOSAIC's types
  (HaluMem "Persona Memory" -> persona, "Event Memory" -> event, "Relationship Memory" ->
  relationship), else ``event``, the extractor's own fallback for an unlabelled fact (LoCoMo's
  observations carry no type);
* subject: the fact's subject from the benchmark (HaluMem: the user; LoCoMo: the observation's
  speaker), else the turn's speaker;
* attribute and value: empty (gold facts name no slot), so the gate's slot belief never finds
  competing values and commits on confidence alone; the conflict check judges every fact;
* directness and specificity 1.0 (a gold fact is stated and exact: the labels ``stated`` and
  ``exact``), consistency from the gate as usual, so the gate's rho is 1.0 for every gold fact;
* time: none (gold facts have no separate time phrase); said at the session time, as extracted facts;
* evidence: the sentence of the cited turn that best overlaps the fact, when the benchmark cites
  the turn (LoCoMo); empty otherwise (HaluMem), which the gate reads as the fact itself;
* source turns: the benchmark's evidence ids, else the turn the fact arrived with;
* ``fact_id``: the gold id, so analyses (HaluMem's update links) can tell which gold fact an
  entity is without comparing texts;
* ``gold_replaces``: the gold ids the benchmark says this fact replaces (``OracleFact.replaces``, only in a
  gold-judge run); read by ``GoldConflictJudge`` alone, never by extraction, gate or retrieval.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from core.api import OracleFact, Turn
from mosaic.entity import Entity
from mosaic.extract_prompts import ENTITY_TYPES
from mosaic.graph import ACTIVE_STATUSES

if TYPE_CHECKING:
    from mosaic.conflict import ConflictDecision

ORACLE_DIRECTNESS = 1.0  # the extractor's "stated"
ORACLE_SPECIFICITY = 1.0  # the extractor's "exact"


def entity_type(memory_type: str | None) -> str:
    """MOSAIC's type for a benchmark's memory-type label: its first word when that is a MOSAIC type, else event."""
    first = (memory_type or "").strip().split(" ", 1)[0].lower()
    return first if first in ENTITY_TYPES else "event"


def oracle_entity(fact: OracleFact, turn: Turn, said_at: str | None, entity_id: str, evidence: str) -> Entity:
    """One gold fact as the entity the LLM extractor would have produced for ``turn``."""
    return Entity(
        entity_id=entity_id,
        text=" ".join(fact.text.split()),
        type=entity_type(fact.memory_type),  # type: ignore[arg-type]
        subject=fact.subject or turn.speaker,
        attribute="",
        value="",
        time=None,
        evidence=evidence,
        source_turn_ids=list(fact.source_turn_ids) or [turn.turn_id],
        session_time=said_at,
        directness=ORACLE_DIRECTNESS,
        consistency=1.0,
        specificity=ORACLE_SPECIFICITY,
        fact_id=fact.fact_id,
        gold_replaces=list(fact.replaces),
    )


class GoldConflictJudge:
    """The conflict judge's answer from gold (``conflict.source: gold``, conf/ablation/oracle_judge.yaml).

    NEW contradicts exactly the shown facts whose gold id the benchmark lists in NEW's ``gold_replaces``
    (``OracleFact.replaces``): HaluMem, an update point's gold-linked originals; a conflict suite, a probe's
    labelled partner turns. Only the answer of step 3 is replaced: which held facts are shown, the rules before it
    and the resolution policy after it are MOSAIC's own, so the study measures the mechanism around a perfect judge.
    """

    def blame(self, new: Entity, facts: list[Entity]) -> list[int]:
        gold = set(new.gold_replaces)
        return [i for i, fact in enumerate(facts, start=1) if fact.fact_id is not None and fact.fact_id in gold]


def audit_gold_partners(stats: dict[str, int], trace: dict[str, Any], new: Entity, graph: Any, decisions: list[ConflictDecision]) -> None:
    """Gold-judge runs: where each held gold partner of ``new`` went (retired, or why not: not a candidate, ruled out
    by a rule, not shown, not blamed) and the numeric rule's precision against the labels, added to the conflict
    detector's ``stats`` from its check ``trace``. Counts only; nothing here changes a decision."""
    if not new.gold_replaces:
        stats["numeric_gold_wrong"] += sum(d.decided_by == "numeric" for d in decisions)
        return
    gold = set(new.gold_replaces)
    entities = getattr(graph, "entities", None)
    held = {e.entity_id for e in (entities() if entities else []) if e.fact_id in gold and e.status in ACTIVE_STATUSES}
    decided = {d.old_id for d in decisions}
    for d in decisions:
        if d.decided_by == "numeric":
            stats["numeric_gold_right" if d.old_id in held else "numeric_gold_wrong"] += 1
    candidates = {entity_id for entity_id, _ in trace.get("candidates", [])}
    shown = set(trace.get("facts", []))
    stats["gold_partners_held"] += len(held)
    for entity_id in held:
        reason = ("gold_partners_retired" if entity_id in decided else "gold_partner_not_candidate" if entity_id not in candidates
                  else "gold_partner_ruled_out" if "facts" not in trace else "gold_partner_not_shown"
                  if entity_id not in shown else "gold_partner_not_blamed")  # fmt: skip
        stats[reason] += 1
