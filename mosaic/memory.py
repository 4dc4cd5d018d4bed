"""MosaicMemory: the MOSAIC write and read paths behind the MemorySystem protocol.

Write path per turn: extract entities (one LLM call) -> confidence gate and belief update
-> save-time conflict check against the k nearest entities and their graph neighbours
-> apply the decision (update: the old entity is superseded and its history kept; reject:
the new entity is dropped; flag: both are marked for review; ``mosaic.decisions``) -> graph, communities,
node scores (NCS), persistent store (``mosaic.namespace`` says what a namespace saves). Read path: retriever
over the graph, re-ranked with the node score; the hits it adds and how they read: ``mosaic.search_hits``.
Every LLM call is counted per turn and by purpose (extraction, belief, conflict).

The parts are built from conf/system/mosaic.yaml: each block is a Hydra ``_target_`` with
``_partial_: true``, so the memory receives constructors and calls them with the LLM or
embedder, once per namespace for the per-namespace parts (graph, communities, scorer,
retriever, conflict detector). The runner's validate() checks every block against its constructor
(keys, types and ranges) and ``CONFIG_RULES`` once, before the run folder exists; every part is built
once at construction, so what only a built object can see (a vector size) also fails before any ingest.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import time
from pathlib import Path
from typing import Any, Callable, Literal

from core.api import AddReport, LLMUsage, Retrieved, StoredItem, Turn
from core.config_check import ConfigKeyError, Count, Share, Size
from core.embed import Embedder
from core.llm import GuardedLLM, LLMClient, RetryPolicy, own_usage, retry_policy, usage_since
from mosaic.accounting import MosaicAccounting, Work, mechanism_row
from mosaic.communities import Communities
from mosaic.conflict import ConflictDecision, ConflictDetector
from mosaic.decisions import apply_decisions
from mosaic.entity import Entity
from mosaic.extract import EntityExtractor
from mosaic.gate import ClarificationItem, ConfidenceGate
from mosaic.graph import ACTIVE_STATUSES, MemoryGraph
from mosaic.namespace import Namespace, load_state, state_of
from mosaic.settings import combination_problems
from mosaic.retrieval import Retriever
from mosaic.scoring import NodeScorer
from mosaic.search_hits import render, source_turns, superseded_hits, with_turn_matches
from mosaic.store import MemoryStore, file_safe_name
from core.quantities import same_slot, values_match

log = logging.getLogger(__name__)

# What a search does with a superseded memory (``superseded``): hide it (the paper's search, every published row), or
# return it beside the current ones, marked outdated with the date it was replaced (how an API with history shows it)
Superseded = Literal["hide", "mark"]


def _built(block: str, make: Callable[..., Any], **late: Any) -> Any:
    """Call one part's constructor (keys, types and ranges checked once, by the runner's validate), naming the block
    when a value is refused (what only the built object can see, such as a vector size)."""
    try:
        return make(**late)
    except (TypeError, ValueError) as err:
        raise ConfigKeyError(f"system.{block}: {err}") from err


class MosaicMemory:
    """MOSAIC as a MemorySystem (+ Seedable, Snapshottable, Inspectable, Clarifiable).

    ``extract``, ``gate``, ``conflict`` and ``retrieval`` build their part from the LLM;
    ``graph`` from the embedder; ``communities`` and ``scoring`` from nothing. ``search_weight``
    is the node score's share of the final search rank (the rest: similarity); a search asks the
    retriever for ``max(search_pool_factor * k, k + search_pool_extra)`` hits before re-ranking;
    ``importance`` is what an entity's importance (the node score's alpha term) is set from:
    ``rho`` (its gate confidence) or a fixed number for every entity. ``hand_over_edges``: an update gives the
    superseded entity's association edges to its replacement (true), or drops them with it (false, the graph of
    every row published before the gold-judge study). ``superseded``: see Superseded.
    """

    # eval.workers: each namespace has its own graph, scorer, communities, retriever and detector; the
    # shared extractor and gate hold only counters (core.tally), so namespaces may be written at once.
    # A search updates its namespace's retriever counters and may rebuild its index: searches stay serialised.
    parallel_namespaces = True
    parallel_search = False
    # each setting's type and range is its constructor parameter's (core.config_check); these are the rules that tie keys
    CONFIG_RULES = staticmethod(combination_problems)  # settings that cannot run together

    def __init__(
        self,
        llm: LLMClient,
        embedder: Embedder,
        workdir: str | Path,
        name: str = "mosaic",
        extract: Callable[..., EntityExtractor] = EntityExtractor,
        gate: Callable[..., ConfidenceGate] = ConfidenceGate,
        conflict: Callable[..., ConflictDetector] = ConflictDetector,
        scoring: Callable[[], NodeScorer] = NodeScorer,
        retrieval: Callable[..., Retriever] = Retriever,
        graph: Callable[..., MemoryGraph] = MemoryGraph,
        communities: Callable[[], Communities] = Communities,
        search_weight: Share = 0.2,
        search_pool_factor: Count = 2,
        search_pool_extra: Size = 5,
        importance: Literal["rho"] | Share = "rho",
        persist: bool = True,
        hand_over_edges: bool = True,
        superseded: Superseded = "hide",
        *,
        retry: RetryPolicy | None,  # no default: conf/system/mosaic.yaml says (None: the client's own); a mapping is its fields
    ) -> None:
        self.name = name
        # output guard: every structured call (extraction, belief, routing) retries as system.retry says
        # (core.llm.RetryPolicy); None keeps the client's default (a greedy retry with the next seed)
        try:
            self.retry = retry_policy(retry) if retry is not None else None
        except ValueError as err:
            raise ConfigKeyError(str(err)) from err
        llm = GuardedLLM(llm, self.retry) if self.retry is not None else llm
        self.llm = llm
        self.embedder = embedder
        self.workdir = Path(workdir)
        self.persist = persist
        self.search_weight = float(search_weight)
        self.search_pool_factor, self.search_pool_extra = int(search_pool_factor), int(search_pool_extra)
        self.importance = importance
        self.hand_over_edges = bool(hand_over_edges)
        self.superseded = superseded
        self.make_conflict, self.make_scoring, self.make_retrieval = conflict, scoring, retrieval
        self.make_graph, self.make_communities = graph, communities
        self.extractor: EntityExtractor = _built("extract", extract, llm=llm)
        self.gate: ConfidenceGate = _built("gate", gate, llm=llm)
        self._prototype = self._new_namespace()  # builds every per-namespace part once: bad config fails here
        try:
            self._prototype.retriever.check_dim(int(embedder.dim))
        except ValueError as err:
            raise ConfigKeyError(f"system.retrieval: {err}") from err
        self._spaces: dict[str, Namespace] = {}
        # counters, cost rows and the reports made from them (mosaic.accounting); ``stats``: the write-path counters
        self.accounting = MosaicAccounting()
        self.stats = self.accounting.write  # every namespace adds to it, possibly at once

    def run_metadata(self) -> dict[str, Any]:
        """metadata.system_metadata of a run (mosaic.accounting)."""
        return self.accounting.run_metadata(self.extractor.source)

    # -- per-namespace parts -----------------------------------------------------------
    def _new_detector(self) -> ConflictDetector | None:
        detector = _built("conflict", self.make_conflict, llm=self.llm)
        return detector if detector.enabled else None

    def _new_namespace(self) -> Namespace:
        return Namespace(
            graph=_built("graph", self.make_graph, embedder=self.embedder),
            communities=_built("communities", self.make_communities),
            scorer=_built("scoring", self.make_scoring),
            retriever=_built("retrieval", self.make_retrieval, llm=self.llm),
            detector=self._new_detector(),
        )

    def _space(self, namespace: str) -> Namespace:
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
        self.accounting.retire(self._spaces.pop(namespace, None))
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
        groups = self._write_groups(turns, session_time)
        ahead = self._extract_ahead(space, groups)
        for position, (group, group_time) in enumerate(groups):
            report.merge(self._add_group(space, group, group_time, check_conflicts, ahead=ahead[position] if ahead else None))
        self._save(namespace, space)
        return report

    def _extract_ahead(self, space: Namespace, groups: list[tuple[list[Turn], str | None]]) -> list[tuple[Any, LLMUsage, float]] | None:
        """With ``extract.concurrent_calls`` > 1, every turn's extraction call of this add, made before the first
        write, several at a time (measured: results/bench/llm_settings_quickstart.md). Each job carries the previous turn one-by-one writing
        would show it (``_add_group``'s rule), so the requests are the same; None when off or not possible."""
        if len(groups) < 2 or not self.extractor.can_extract_ahead():
            return None
        jobs = []
        last = space.last_turn
        for (turn,), group_time in groups:
            previous = last if last is not None and last.session_time == group_time else None
            jobs.append((turn, group_time, previous))
            last = dataclasses.replace(turn, session_time=group_time)
        started = time.perf_counter()
        results = self.extractor.extract_ahead(jobs)
        # the calls' wall time is booked on the first group (its cost-log row), so per-turn seconds still sum up
        wall = time.perf_counter() - started
        return [(result, usage, wall if position == 0 else 0.0) for position, (result, usage) in enumerate(results)]

    def _write_groups(self, turns: list[Turn], session_time: str | None) -> list[tuple[list[Turn], str | None]]:
        """Consecutive turns of one session, ``extract.turns_per_call`` at a time (one turn each by default):
        each group is one extraction call (and, with ``conflict.batch``, one conflict call)."""
        size = self.extractor.turns_per_call
        groups: list[tuple[list[Turn], str | None]] = []
        for turn in turns:
            when = session_time or turn.session_time
            if groups and groups[-1][1] == when and len(groups[-1][0]) < size:
                groups[-1][0].append(turn)
            else:
                groups.append(([turn], when))
        return groups

    def _add_group(
        self, space: Namespace, turns: list[Turn], session_time: str | None, check_conflicts: bool = True,
        ahead: tuple[Any, LLMUsage, float] | None = None,
    ) -> AddReport:
        """Write one group. ``ahead``: its extraction, already made by ``_extract_ahead``, with that call's usage and seconds."""
        started = time.perf_counter()
        before = own_usage(self.llm)
        report = AddReport(n_turns=len(turns))
        # the previous turn is conversational context only within one session: a message from
        # another session (or a probe written after a restored context) is not what this one answers
        previous = space.last_turn if space.last_turn is not None and space.last_turn.session_time == session_time else None
        held: list[Entity] = []
        if ahead is not None:
            extractions = [ahead[0]]
            started -= ahead[2]  # the calls' wall time, booked on the first group (see _extract_ahead)
        elif len(turns) == 1:
            held = self._held_for_proposal(space, turns[0]) if check_conflicts else []
            extractions = [self.extractor.extract(turns[0], session_time, previous=previous, held=[e.text for e in held])]
        else:
            extractions = self.extractor.extract_group(turns, session_time, previous=previous)
        for turn, extraction in zip(turns, extractions):
            space.turns[turn.turn_id] = {"speaker": turn.speaker, "text": turn.text, "session_time": session_time}
            report.failures += int(extraction.failures > 0)  # AddReport.failures counts failed turns in every system
            self.stats.add("turns")
            self.stats.add("entities_extracted", len(extraction.entities))
        space.last_turn = dataclasses.replace(turns[-1], session_time=session_time)
        # (turn position, entity index) of every extracted entity, in write order
        order = [(t, i) for t, extraction in enumerate(extractions) for i in range(len(extraction.entities))]
        entities = [extractions[t].entities[i] for t, i in order]
        vectors = self.embedder.encode([e.text for e in entities]) if entities else []
        changed: set[str] = set()
        committed: dict[tuple[int, int], str] = {}
        batch = space.detector is not None and space.detector.batch and check_conflicts
        gated: list[tuple[tuple[int, int], Entity, Any, list[str], list[Entity]]] = []  # batch: judged after the gate
        for (t, index), entity, vector in zip(order, entities, vectors):
            if entity.entity_id in space.graph or any(q.entity.entity_id == entity.entity_id for q in space.queue):
                self.stats.add("id_collisions")
                entity.entity_id = f"{entity.entity_id}-{len(space.graph.entities(include_inactive=True))}"
            decision = self.gate.assess(entity, space.graph.entities())
            if not decision.commit:
                entity.status = "queued"
                space.queue.append(ClarificationItem(entity, decision.rho, decision.entropy, decision.reason, decision.question))
                report.queued.append(entity.entity_id)
                self.stats.add("queued")
                continue
            entity.importance = entity.confidence if self.importance == "rho" else float(self.importance)
            proposed = [held[extractions[t].proposed_clashes[index]]] if index in extractions[t].proposed_clashes else []
            if batch:
                gated.append(((t, index), entity, vector, list(decision.competing), proposed))
                continue
            applied = self._commit(space, entity, vector, report, competing=decision.competing, check=check_conflicts, proposed=proposed)
            if applied is not None:
                changed |= applied
                committed[(t, index)] = entity.entity_id
        if gated:
            # write-cost variant (conflict.batch): the gate saw the graph as it was before this group, and one
            # conflict call judges every gated entity (each against the graph plus the group's earlier entities)
            judged = space.detector.check_group([(entity, vector, proposed) for _, entity, vector, _, proposed in gated], space.graph)
            for (key, entity, vector, competing, _), decisions in zip(gated, judged):
                applied = self._commit(space, entity, vector, report, competing=competing, decisions=decisions)
                if applied is not None:
                    changed |= applied
                    committed[key] = entity.entity_id
        for t, extraction in enumerate(extractions):
            for src, dst in extraction.prerequisites:
                if (t, src) in committed and (t, dst) in committed:
                    src_id, dst_id = committed[(t, src)], committed[(t, dst)]
                    if src_id in space.graph.prereq and dst_id in space.graph.prereq:
                        changed |= space.graph.add_prerequisite(src_id, dst_id)
        if changed:
            space.communities.update(space.graph, changed)
            space.scorer.on_write(space.graph, space.communities, changed)
            space.retriever_dirty = True
        report.usage = usage_since(before, own_usage(self.llm))
        if ahead is not None:
            report.usage.merge(ahead[1])  # the extraction call, made earlier on a pool thread
        seconds = round(time.perf_counter() - started, 4)
        space.cost_log.extend(self.accounting.cost_rows(turns, extractions, report, seconds))
        return report

    def _held_for_proposal(self, space: Namespace, turn: Turn) -> list[Entity]:
        """Write-cost variant (``extract.held_facts`` > 0): the active entities nearest the turn's text that
        the extraction call is shown, so it can propose which one a new fact clashes with. None when
        off, when there is no conflict check, or when nothing held is as similar as a conflict candidate."""
        if self.extractor.held_facts <= 0 or space.detector is None or len(space.graph) == 0:
            return []
        nearest = space.graph.nearest(space.graph.embed(turn.text), self.extractor.held_facts)
        return [entity for entity, similarity in nearest if similarity >= space.detector.min_similarity]

    def _commit(
        self, space: Namespace, entity: Entity, vector: Any, report: AddReport, competing: list[str] = (), check: bool = True,
        proposed: list[Entity] | None = None, decisions: list[ConflictDecision] | None = None,
    ) -> set[str] | None:
        """Run the conflict check (unless ``check`` is off) and apply its decisions; returns changed ids, or None if rejected.

        ``proposed``: held entities the extraction call said this one clashes with (``conflict.judge: proposed``).
        ``decisions``: the check's decisions, already made for a whole group (``conflict.batch``)."""
        graph = space.graph
        detector = space.detector if check else None
        if decisions is None:
            decisions = detector.check(entity, graph, proposed=proposed) if detector is not None else []
        if detector is not None:
            held = [graph.entity(i) for i in competing if i in graph]
            decisions += detector.belief_decisions(entity, held, {d.old_id for d in decisions})
        return apply_decisions(space, entity, vector, decisions, report, self.stats, self.hand_over_edges)

    def search(self, namespace: str, query: str, k: int) -> list[Retrieved]:
        space = self._space(namespace)
        if len(space.graph) == 0 or k <= 0:
            return []
        if space.retriever_dirty:
            space.retriever.rebuild(space.graph, space.communities)
            if space.retriever.match_source_turns:  # turns embedded as rag embeds them
                texts = {turn_id: f"{row['speaker']}: {row['text']}" for turn_id, row in space.turns.items()}
                space.retriever.turns.refresh(texts, space.graph.entities(), self.embedder.encode)
            space.retriever_dirty = False
        query_vector = space.graph.embed(query)
        pool = max(self.search_pool_factor * k, k + self.search_pool_extra)
        hits = space.retriever.search(query_vector, query, pool)
        if space.retriever.match_source_turns:
            hits = with_turn_matches(space, query_vector, hits, pool)
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
        if self.superseded == "mark":
            ranked += superseded_hits(space, query_vector, self.search_weight)
        ranked.sort(key=lambda pair: -pair[0])
        top = ranked[:k]
        space.scorer.set_previous_query_entities([e.entity_id for _, e in top])
        shown: set[str] = set()  # provenance: each source turn's text once, with the best-ranked entity citing it
        out = []
        for score, e in top:
            text = render(e)
            if space.retriever.with_source_turns:
                text += source_turns(space, e, shown)
            out.append(Retrieved(text=text, score=score, timestamp=e.session_time, source_turn_ids=list(e.source_turn_ids), memory_id=e.entity_id))
        return out

    # -- Inspectable / clarification queue ---------------------------------------------
    def stored_items(self, namespace: str) -> list[StoredItem]:
        return [StoredItem(e.entity_id, e.text, list(e.source_turn_ids), e.fact_id) for e in self._space(namespace).graph.entities()]

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
        before = own_usage(self.llm)
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
        report.usage = usage_since(before, own_usage(self.llm))
        self._save(namespace, space)
        return report

    # -- Snapshottable / persistence -------------------------------------------------
    def _load_state(self, space: Namespace, state: dict[str, Any]) -> None:
        load_state(space, state, self.embedder, _built("communities", self.make_communities), _built("scoring", self.make_scoring))

    def _save(self, namespace: str, space: Namespace) -> None:
        store = self._store(namespace)
        if store is not None:
            store.save(state_of(space))

    def snapshot(self, namespace: str) -> dict[str, Any]:
        return copy.deepcopy(state_of(self._space(namespace)))

    def restore(self, namespace: str, state: dict[str, Any]) -> None:
        space = self._new_namespace()
        self._load_state(space, copy.deepcopy(state))
        space.restored_from = Work.of(space)
        self.accounting.retire(self._spaces.get(namespace))
        self._spaces[namespace] = space
        self._save(namespace, space)

    # -- cost accounting (mosaic.accounting) -----------------------------------------
    def cost_per_turn(self, namespace: str | None = None) -> dict[str, Any]:
        """LLM calls and tokens per turn this process ingested, split by purpose, over one namespace or all."""
        return self.accounting.cost_per_turn(self._spaces, namespace)

    def metrics(self) -> dict[str, Any]:
        """System-side numbers for metrics.json: cost per turn, write-path counters, component stats."""
        return self.accounting.metrics(self._spaces, self.extractor, self.gate)

    mechanism_row = staticmethod(mechanism_row)  # the counts below as one table row (core.api.SummarisesMechanisms)

    def mechanism_counts(self) -> dict[str, Any]:
        """What each MOSAIC mechanism did, over every namespace loaded in this process (mosaic.accounting)."""
        return self.accounting.mechanism_counts(self._spaces)
