"""MosaicMemory: the MOSAIC write and read paths behind the MemorySystem protocol.

Write path per turn: extract entities (one LLM call) -> confidence gate and belief update
-> save-time conflict check against the k nearest entities and their graph neighbours
-> apply the decision (update: the old entity is superseded and its history kept; reject:
the new entity is dropped; flag: both are marked for review) -> graph, communities, node
scores (NCS), persistent store. Read path: retriever over the graph, re-ranked with the
node score. Every LLM call is counted per turn and by purpose (extraction, belief, conflict).

Components owned by other modules (conflict detector, communities, scorer, retriever) are
imported when first needed, so a missing one fails with an error that says which switch
avoids it; tests can hand in doubles through ``parts``.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from core.embed import Embedder
from mosaic.entity import Entity, resolve_by_evidence
from mosaic.extract import EntityExtractor
from mosaic.gate import ClarificationItem, ConfidenceGate, number_in, same_slot, values_match
from mosaic.graph import ACTIVE_STATUSES, MemoryGraph
from core.llm import LLMClient, usage_since
from core.api import AddReport, ConflictEvent, LLMUsage, Retrieved, StoredItem, Turn
from mosaic.store import MemoryStore, file_safe_name

log = logging.getLogger(__name__)


# -- seams to components owned elsewhere ------------------------------------------------
class ConflictChecker(Protocol):
    def check(self, new: Entity, graph: MemoryGraph) -> list[Any]:
        """Decisions with new_id, old_id, verdict, conflict_type, reason, score."""


class CommunityIndex(Protocol):
    def update(self, graph: MemoryGraph, changed: set[str]) -> None: ...


class Scorer(Protocol):
    def on_write(self, graph: MemoryGraph, communities: Any, changed: set[str]) -> None: ...

    def score(self, entity_id: str) -> float: ...

    def set_previous_query_entities(self, ids: list[str]) -> None: ...


class SearchIndex(Protocol):
    def rebuild(self, graph: MemoryGraph, communities: Any) -> None: ...

    def search(self, query_vector: Any, query_text: str, k: int) -> list[tuple[str, float]]: ...


@dataclass
class MosaicParts:
    """Factories for the components built per namespace; None means 'the real class from config'."""

    detector: Callable[[], ConflictChecker] | None = None
    communities: Callable[[], CommunityIndex] | None = None
    scorer: Callable[[], Scorer] | None = None
    retriever: Callable[[], SearchIndex] | None = None


def _load_class(module: str, name: str, switch: str) -> type:
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise ImportError(f"MOSAIC needs {module}.{name}, which is not available ({err}); {switch}") from err


def _plain(block: Any) -> dict[str, Any]:
    """A config block (dict or OmegaConf DictConfig) as a plain, mutable dict."""
    if block is None:
        return {}
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(block, DictConfig):
            return dict(OmegaConf.to_container(block, resolve=True))  # type: ignore[arg-type]
    except ImportError:
        pass
    return copy.deepcopy(dict(block))


@dataclass
class SlotDecision:
    """A conflict decision made by the write path itself from the gate's belief (same fields as ConflictDecision)."""

    new_id: str
    old_id: str
    verdict: str
    conflict_type: str
    reason: str
    score: float


@dataclass
class _Namespace:
    graph: MemoryGraph
    communities: Any
    scorer: Any
    retriever: Any
    detector: ConflictChecker | None = None
    queue: list[ClarificationItem] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)  # dropped newcomers, kept for audit only
    cost_log: list[dict[str, Any]] = field(default_factory=list)
    last_turn: Turn | None = None
    retriever_dirty: bool = True


class MosaicMemory:
    """MOSAIC as a MemorySystem (+ Snapshottable, Inspectable, Clarifiable). Config blocks are plain dicts.

    ``extract``: EntityExtractor kwargs; ``gate``: ConfidenceGate kwargs (``enabled``, ``rho_min``,
    ``delta``...); ``conflict``: ``enabled``, ``k``, ``use_belief`` (also resolve held values of a
    single-valued slot that the committed belief abandoned) and ConflictDetector tuning; ``ncs``: ``enabled``
    and NodeScorer stability kwargs; ``scoring``: alpha/beta/gamma and ``search_weight`` (share of the
    node score in the final search rank); ``retrieval``: Retriever kwargs; ``graph``: MemoryGraph
    kwargs; ``communities``: Communities kwargs.
    """

    def __init__(
        self,
        llm: LLMClient,
        embedder: Embedder,
        workdir: str | Path,
        name: str = "mosaic",
        extract: dict[str, Any] | None = None,
        gate: dict[str, Any] | None = None,
        conflict: dict[str, Any] | None = None,
        ncs: dict[str, Any] | None = None,
        scoring: dict[str, Any] | None = None,
        retrieval: dict[str, Any] | None = None,
        graph: dict[str, Any] | None = None,
        communities: dict[str, Any] | None = None,
        persist: bool = True,
        parts: MosaicParts | None = None,
    ) -> None:
        self.name = name
        self.llm = llm
        self.embedder = embedder
        self.workdir = Path(workdir)
        self.persist = persist
        self.parts = parts or MosaicParts()
        self.extract_cfg = _plain(extract)
        self.gate_cfg = _plain(gate)
        self.conflict_cfg = _plain(conflict)
        self.ncs_cfg = _plain(ncs)
        self.scoring_cfg = _plain(scoring)
        self.retrieval_cfg = _plain(retrieval)
        self.graph_cfg = _plain(graph)
        self.communities_cfg = _plain(communities)
        self.conflict_enabled = bool(self.conflict_cfg.pop("enabled", True))
        self.use_belief = bool(self.conflict_cfg.pop("use_belief", True))
        self.search_weight = float(self.scoring_cfg.pop("search_weight", 0.2))
        self.extractor = EntityExtractor(llm, **self.extract_cfg)
        self.gate = ConfidenceGate(llm, **self.gate_cfg)
        self._spaces: dict[str, _Namespace] = {}
        self.stats: dict[str, int] = {"turns": 0, "entities_extracted": 0, "committed": 0, "queued": 0, "updated": 0,
                                      "rejected": 0, "flagged": 0, "stale_decisions": 0, "id_collisions": 0}

    # -- component factories ---------------------------------------------------------
    def _make_detector(self) -> ConflictChecker | None:
        if not self.conflict_enabled:
            return None
        if self.parts.detector is not None:
            return self.parts.detector()
        cls = _load_class("mosaic.conflict", "ConflictDetector", "set system.conflict.enabled=false to run without conflict checks")
        return cls(self.llm, **self.conflict_cfg)

    def _make_communities(self) -> Any:
        if self.parts.communities is not None:
            return self.parts.communities()
        return _load_class("mosaic.communities", "Communities", "it is part of MOSAIC's read path")(**self.communities_cfg)

    def _make_scorer(self) -> Any:
        if self.parts.scorer is not None:
            return self.parts.scorer()
        ncs = dict(self.ncs_cfg)
        enabled = bool(ncs.pop("enabled", True))
        cls = _load_class("mosaic.scoring", "NodeScorer", "it is part of MOSAIC's read path")
        return cls(**self.scoring_cfg, ncs=enabled, **ncs)

    def _make_retriever(self) -> Any:
        if self.parts.retriever is not None:
            return self.parts.retriever()
        cls = _load_class("mosaic.retrieval", "Retriever", "it is part of MOSAIC's read path")
        return cls(llm=self.llm, **self.retrieval_cfg)

    def _new_namespace(self) -> _Namespace:
        return _Namespace(
            graph=MemoryGraph(self.embedder, **self.graph_cfg),
            communities=self._make_communities(),
            scorer=self._make_scorer(),
            retriever=None,
            detector=self._make_detector(),
        )

    def _space(self, namespace: str) -> _Namespace:
        if namespace not in self._spaces:
            space = self._new_namespace()
            self._spaces[namespace] = space
            store = self._store(namespace)
            if store is not None and store.exists():
                self._load_state(space, store.load())
        return self._spaces[namespace]

    def _store(self, namespace: str) -> MemoryStore | None:
        if not self.persist:
            return None
        return MemoryStore(self.workdir / "mosaic" / f"{file_safe_name(namespace)}.json")

    # -- MemorySystem ----------------------------------------------------------------
    def reset(self, namespace: str) -> None:
        self._spaces.pop(namespace, None)
        store = self._store(namespace)
        if store is not None and store.exists():
            store.path.unlink()

    def add(self, namespace: str, turns: list[Turn], session_time: str | None = None) -> AddReport:
        return self._add(namespace, turns, session_time, check_conflicts=True)

    def seed(self, namespace: str, turns: list[Turn], session_time: str | None = None) -> AddReport:
        """``add`` without the save-time conflict check (extraction and the gate still run): for
        knowledge that is vetted already, such as a conflict suite's context."""
        return self._add(namespace, turns, session_time, check_conflicts=False)

    def _add(self, namespace: str, turns: list[Turn], session_time: str | None, check_conflicts: bool) -> AddReport:
        space = self._space(namespace)
        report = AddReport()
        for turn in turns:
            report.merge(self._add_turn(space, turn, session_time or turn.session_time, check_conflicts))
        self._save(namespace, space)
        return report

    def _add_turn(self, space: _Namespace, turn: Turn, session_time: str | None, check_conflicts: bool = True) -> AddReport:
        started = time.perf_counter()
        before = self.llm.usage
        report = AddReport(n_turns=1)
        # the previous turn is conversational context only within one session: a message from
        # another session (or a probe written after a restored context) is not what this one answers
        previous = space.last_turn if space.last_turn is not None and space.last_turn.session_time == session_time else None
        extraction = self.extractor.extract(turn, session_time, previous=previous)
        space.last_turn = dataclasses.replace(turn, session_time=session_time)
        report.failures += extraction.failures
        self.stats["turns"] += 1
        self.stats["entities_extracted"] += len(extraction.entities)
        vectors = self.embedder.encode([e.text for e in extraction.entities]) if extraction.entities else []
        changed: set[str] = set()
        committed: dict[int, str] = {}
        for index, (entity, vector) in enumerate(zip(extraction.entities, vectors)):
            if entity.entity_id in space.graph or any(q.entity.entity_id == entity.entity_id for q in space.queue):
                self.stats["id_collisions"] += 1
                entity.entity_id = f"{entity.entity_id}-{len(space.graph.entities(include_inactive=True))}"
            decision = self.gate.assess(entity, space.graph.entities())
            if not decision.commit:
                entity.status = "queued"
                space.queue.append(ClarificationItem(entity, decision.rho, decision.entropy, decision.reason, decision.question))
                report.queued.append(entity.entity_id)
                self.stats["queued"] += 1
                continue
            entity.importance = entity.confidence
            applied = self._commit(space, entity, vector, report, competing=decision.competing, check=check_conflicts)
            if applied is not None:
                changed |= applied
                committed[index] = entity.entity_id
        for src, dst in extraction.prerequisites:
            if src in committed and dst in committed:
                src_id, dst_id = committed[src], committed[dst]
                if src_id in space.graph.prereq and dst_id in space.graph.prereq:
                    changed |= space.graph.add_prerequisite(src_id, dst_id)
        if changed:
            space.communities.update(space.graph, changed)
            space.scorer.on_write(space.graph, space.communities, changed)
            space.retriever_dirty = True
        report.usage = usage_since(before, self.llm.usage)
        space.cost_log.append({
            "turn_id": turn.turn_id,
            "seconds": round(time.perf_counter() - started, 4),
            "entities": len(extraction.entities),
            "stored": len(report.stored),
            "usage": {"calls": report.usage.calls, "prompt_tokens": report.usage.prompt_tokens,
                      "completion_tokens": report.usage.completion_tokens, "by_purpose": report.usage.by_purpose},
        })
        return report

    def _commit(
        self, space: _Namespace, entity: Entity, vector: Any, report: AddReport, competing: list[str] = (), check: bool = True
    ) -> set[str] | None:
        """Run the conflict check (unless ``check`` is off) and apply its decisions; returns changed ids, or None if rejected."""
        graph = space.graph
        detector = space.detector if check else None
        decisions = detector.check(entity, graph) if detector is not None else []
        if detector is not None and self.use_belief:
            decisions += self._belief_decisions(space, entity, competing, {d.old_id for d in decisions})
        live = []
        for d in decisions:
            if d.old_id in graph and graph.entity(d.old_id).status in ACTIVE_STATUSES:
                live.append(d)
            else:
                self.stats["stale_decisions"] += 1
        rejects = [d for d in live if d.verdict == "reject"]
        if rejects:
            for d in rejects:
                report.rejected.append(self._event(entity, graph.entity(d.old_id), d))
            entity.history.append({"event": "rejected", "by": [d.old_id for d in rejects], "reason": rejects[0].reason})
            space.rejected.append(entity.to_dict())
            self.stats["rejected"] += 1
            return None
        flags = [d for d in live if d.verdict == "flag"]
        if flags:
            entity.status = "flagged"
        changed = graph.add_entity(entity, vector)
        for d in live:
            old = graph.entity(d.old_id)
            event = self._event(entity, old, d)
            if d.verdict == "update":
                entity.history.extend(old.history)
                entity.history.append({
                    "entity_id": old.entity_id, "text": old.text, "value": old.value, "confidence": old.confidence,
                    "session_time": old.session_time, "source_turn_ids": list(old.source_turn_ids),
                    "belief": dict(old.belief), "superseded_by": entity.entity_id,
                    "conflict_type": d.conflict_type, "reason": d.reason,
                })
                old.history.append({"event": "superseded", "by": entity.entity_id, "reason": d.reason, "session_time": entity.session_time})
                changed |= graph.transfer_prerequisites(old.entity_id, entity.entity_id)
                changed |= graph.set_status(old.entity_id, "superseded")
                report.updated.append(event)
                self.stats["updated"] += 1
            elif d.verdict == "flag":
                old.history.append({"event": "flagged", "with": entity.entity_id, "reason": d.reason, "session_time": entity.session_time})
                entity.history.append({"event": "flagged", "with": old.entity_id, "reason": d.reason})
                changed |= graph.set_status(old.entity_id, "flagged")
                report.flagged.append(event)
                self.stats["flagged"] += 1
        report.stored.append(StoredItem(entity.entity_id, entity.text, list(entity.source_turn_ids)))
        self.stats["committed"] += 1
        return changed

    def _belief_decisions(self, space: _Namespace, new: Entity, competing: list[str], covered: set[str]) -> list[SlotDecision]:
        """Conflicts the gate's belief update already proves: a held value of the same single-valued
        slot that the committed belief no longer favours. The detector may miss these (e.g. number
        words), but keeping both values active would contradict the belief just committed.

        The verdict uses the detector's resolution policy, judged on evidence strength (directness
        and specificity) rather than rho: rho includes consistency, which is low for *every*
        contradicting newcomer by construction and would make any correction look less authoritative.
        """
        out: list[SlotDecision] = []
        winner = max(new.belief, key=new.belief.get) if new.belief else None
        if winner is None or not values_match(winner, new.value or new.text):
            return out
        for old_id in competing:
            if old_id in covered or old_id not in space.graph:
                continue
            old = space.graph.entity(old_id)
            if old.status not in ACTIVE_STATUSES or values_match(old.value, new.value):
                continue
            numeric = number_in(old.value) is not None and number_in(new.value) is not None
            verdict = self._policy(space, new, old)
            reason = (f"belief over '{new.subject} / {new.attribute}' moved from '{old.value}' to '{new.value}' "
                      f"(p={new.belief.get(winner, 0.0):.2f})")
            out.append(SlotDecision(new.entity_id, old_id, verdict, "numeric" if numeric else "semantic", reason, float(new.belief.get(winner, 0.0))))
        return out

    def _policy(self, space: _Namespace, new: Entity, old: Entity) -> str:
        resolve = getattr(space.detector, "resolve", None)
        if callable(resolve):  # one policy for detector and belief decisions
            return resolve(new, old)
        return resolve_by_evidence(new, old, strength=self.gate.reliability)  # a detector without its own policy

    @staticmethod
    def _event(new: Entity, old: Entity, decision: Any) -> ConflictEvent:
        return ConflictEvent(
            new_text=new.text,
            old_text=old.text,
            verdict=decision.verdict,
            conflict_type=decision.conflict_type,
            reason=decision.reason,
            new_source_turn_ids=list(new.source_turn_ids),
            old_source_turn_ids=list(old.source_turn_ids),
            old_memory_id=old.entity_id,
        )

    def search(self, namespace: str, query: str, k: int) -> list[Retrieved]:
        space = self._space(namespace)
        if len(space.graph) == 0 or k <= 0:
            return []
        if space.retriever is None:
            space.retriever = self._make_retriever()
        if space.retriever_dirty:
            space.retriever.rebuild(space.graph, space.communities)
            space.retriever_dirty = False
        query_vector = space.graph.embed(query)
        hits = space.retriever.search(query_vector, query, max(2 * k, k + 5))
        ranked: list[tuple[float, Entity]] = []
        for entity_id, similarity in hits:
            if entity_id not in space.graph:
                continue
            entity = space.graph.entity(entity_id)
            if entity.status not in ACTIVE_STATUSES:
                continue
            try:
                node_score = float(space.scorer.score(entity_id))
            except KeyError:
                node_score = 0.0
            ranked.append(((1 - self.search_weight) * float(similarity) + self.search_weight * node_score, entity))
        ranked.sort(key=lambda pair: -pair[0])
        top = ranked[:k]
        space.scorer.set_previous_query_entities([e.entity_id for _, e in top])
        return [
            Retrieved(text=self._render(e), score=s, timestamp=e.session_time, source_turn_ids=list(e.source_turn_ids), memory_id=e.entity_id)
            for s, e in top
        ]

    @staticmethod
    def _render(entity: Entity) -> str:
        text = entity.text
        if entity.time and entity.time not in text:
            text += f" (time: {entity.time})"
        if entity.status == "flagged":
            text += " (disputed: conflicting reports held)"
        return text

    # -- Inspectable / clarification queue ---------------------------------------------
    def stored_items(self, namespace: str) -> list[StoredItem]:
        return [StoredItem(e.entity_id, e.text, list(e.source_turn_ids)) for e in self._space(namespace).graph.entities()]

    def rejected_entities(self, namespace: str) -> list[Entity]:
        """Newcomers the conflict check dropped (not part of memory; kept so decisions can be audited)."""
        return [Entity.from_dict(e) for e in self._space(namespace).rejected]

    def clarification_queue(self, namespace: str) -> list[dict[str, Any]]:
        """Entities held back by the gate, each with the targeted question that would settle it."""
        return [item.to_dict() for item in self._space(namespace).queue]

    def clarification_targets(self, namespace: str, budget: int) -> list[dict[str, Any]]:
        """The greedy coverage-maximising questions to ask (mosaic.clarify), best first, with each pick's gain."""
        from mosaic.clarify import greedy_targets

        return [target.to_dict() for target in greedy_targets(self._space(namespace).queue, budget)]

    def resolve_clarification(self, namespace: str, item: str | dict[str, Any], answer: str | bool | None = None, *,
                              confirmed: bool | None = None) -> AddReport:
        """Feed the answer to a queued question through the gate's belief update like any other evidence.

        ``item``: the queued entity id (or its queue dict); ``answer``: "yes"/"no"/"unknown", a value,
        or a bool (``confirmed=`` is the older keyword for that). "unknown" leaves it queued; a denial
        with no other value, or an answer that restates the value memory holds, drops it; otherwise the answer (a direct statement) is gated against what
        memory holds and, when committed, conflict-checked; the other queued entities of its slot are
        settled by it and leave the queue. Not committed again -> re-queued with the new belief.
        """
        from mosaic.clarify import evidence_from_answer, interpret_answer

        answer = confirmed if answer is None else answer
        if answer is None:
            raise TypeError("resolve_clarification needs an answer (str or bool)")
        space = self._space(namespace)
        entity_id = item if isinstance(item, str) else item["entity"]["entity_id"]
        queued = next((q for q in space.queue if q.entity.entity_id == entity_id), None)
        if queued is None:
            raise KeyError(f"no queued entity {entity_id!r} in namespace {namespace!r}")
        report = AddReport()
        before = self.llm.usage
        kind, value = interpret_answer(queued, answer)
        if kind == "unknown":
            queued.entity.history.append({"event": "asked", "question": queued.question, "answer": str(answer)})
        elif kind == "denied":
            space.queue.remove(queued)
            queued.entity.history.append({"event": "denied", "question": queued.question, "answer": str(answer)})
            space.rejected.append(queued.entity.to_dict())
        elif any(h.status in ACTIVE_STATUSES and same_slot(h, queued.entity) and values_match(h.value, value)
                 for h in space.graph.entities()):  # the answer confirms what memory already holds
            space.queue.remove(queued)
            queued.entity.history.append({"event": "held_value_confirmed", "question": queued.question, "answer": str(answer)})
            space.rejected.append(queued.entity.to_dict())
        else:
            space.queue.remove(queued)
            entity = evidence_from_answer(queued, value, answer)
            decision = self.gate.assess(entity, space.graph.entities())
            if not decision.commit:
                entity.status = "queued"
                space.queue.append(ClarificationItem(entity, decision.rho, decision.entropy, decision.reason, decision.question))
                report.queued.append(entity.entity_id)
            else:
                entity.importance = entity.confidence
                for other in [q for q in space.queue if same_slot(q.entity, entity)]:  # settled by the same answer
                    space.queue.remove(other)
                    other.entity.history.append({"event": "settled_by_clarification", "by": entity.entity_id})
                    space.rejected.append(other.entity.to_dict())
                changed = self._commit(space, entity, space.graph.embed(entity.text), report, competing=decision.competing)
                if changed:
                    space.communities.update(space.graph, changed)
                    space.scorer.on_write(space.graph, space.communities, changed)
                    space.retriever_dirty = True
        report.usage = usage_since(before, self.llm.usage)
        self._save(namespace, space)
        return report

    # -- Snapshottable / persistence -------------------------------------------------
    def _state(self, space: _Namespace) -> dict[str, Any]:
        last = space.last_turn
        return {
            "graph": space.graph.to_dict(),
            "queue": [item.to_dict() for item in space.queue],
            "rejected": copy.deepcopy(space.rejected),
            "cost_log": copy.deepcopy(space.cost_log),
            "last_turn": None if last is None else {"turn_id": last.turn_id, "speaker": last.speaker, "text": last.text, "session_time": last.session_time},
        }

    def _load_state(self, space: _Namespace, state: dict[str, Any]) -> None:
        space.graph = MemoryGraph.from_dict(state["graph"], self.embedder)
        space.queue = [ClarificationItem.from_dict(q) for q in state.get("queue", [])]
        space.rejected = copy.deepcopy(state.get("rejected", []))
        space.cost_log = copy.deepcopy(state.get("cost_log", []))
        last = state.get("last_turn")
        space.last_turn = Turn(**last) if last else None
        space.communities = self._make_communities()
        space.scorer = self._make_scorer()
        everything = {e.entity_id for e in space.graph.entities()}
        if everything:
            space.communities.update(space.graph, everything)
            space.scorer.on_write(space.graph, space.communities, everything)
        space.retriever_dirty = True

    def _save(self, namespace: str, space: _Namespace) -> None:
        store = self._store(namespace)
        if store is not None:
            store.save(self._state(space))

    def snapshot(self, namespace: str) -> dict[str, Any]:
        return copy.deepcopy(self._state(self._space(namespace)))

    def restore(self, namespace: str, state: dict[str, Any]) -> None:
        space = self._new_namespace()
        self._load_state(space, copy.deepcopy(state))
        self._spaces[namespace] = space
        self._save(namespace, space)

    # -- cost accounting -------------------------------------------------------------
    def cost_per_turn(self, namespace: str | None = None) -> dict[str, Any]:
        """LLM calls and tokens per ingested turn, split by purpose, over one or all namespaces."""
        logs = [row for ns, space in self._spaces.items() if namespace in (None, ns) for row in space.cost_log]
        total = LLMUsage()
        for row in logs:
            u = row["usage"]
            total.merge(LLMUsage(calls=u["calls"], prompt_tokens=u["prompt_tokens"], completion_tokens=u["completion_tokens"], by_purpose=u["by_purpose"]))
        n = max(len(logs), 1)
        return {
            "turns": len(logs),
            "seconds_per_turn": sum(r["seconds"] for r in logs) / n,
            "calls_per_turn": total.calls / n,
            "prompt_tokens_per_turn": total.prompt_tokens / n,
            "completion_tokens_per_turn": total.completion_tokens / n,
            "by_purpose_per_turn": {p: {k: v / n for k, v in c.items()} for p, c in total.by_purpose.items()},
        }

    def metrics(self) -> dict[str, Any]:
        """System-side numbers for metrics.json: cost per turn, write-path counters, component stats."""
        out: dict[str, Any] = {
            "cost_per_turn": self.cost_per_turn(),
            "write": dict(self.stats),
            "extraction": dict(self.extractor.stats),
            "gate": dict(self.gate.stats),
            "queue_size": sum(len(s.queue) for s in self._spaces.values()),
        }
        for label, attr in (("scorer", "scorer"), ("communities", "communities"), ("retriever", "retriever"), ("conflict", "detector")):
            stats = [getattr(getattr(s, attr, None), "stats", None) for s in self._spaces.values()]
            stats = [st for st in stats if isinstance(st, dict)]
            if stats:
                out[label] = _sum_stats(stats)
        return out


def _sum_stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Add numeric counters across namespaces; non-numeric values keep the last namespace's."""
    out: dict[str, Any] = {}
    for row in rows:
        for key, value in row.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and isinstance(out.get(key, 0), (int, float)):
                out[key] = out.get(key, 0) + value
            else:
                out[key] = value
    return out
