"""Save-time conflict check (MOSAIC mechanism 1): does a new entity contradict what memory holds?

A small local model cannot be asked "is there a contradiction?" and trusted: asked about a
whole memory it finds none, asked pair by pair it calls nearly every pair a contradiction.
So the check is a pipeline that narrows before it asks, and asks in a calibrated way:

1. Candidates: the ``k`` nearest active entities by embedding, plus their graph neighbours
   (G_P and G_A), so that a logical clash that needs two held facts has both in view.
2. Like with like, numbers in Python: quantities with units are parsed from both texts
   (core.quantities); the held entity that says the most nearly the same thing once numbers are
   masked is the one the new entity is about; if its numbers of the same unit family differ
   beyond tolerance, that is a numeric conflict, decided without the LLM.
3. The LLM sees a short numbered list of the closest candidates (with a fixed few-shot prefix, so
   llama.cpp's prompt cache covers most of the prompt) and answers with the number of the fact the
   new statement contradicts, or 0. Only the first token is generated; the score is
   1 - p("0") from its log-probabilities, compared with a threshold tuned on a dev suite.
4. Resolution policy: newer and at least as authoritative evidence updates the old entity;
   clearly stronger held evidence rejects the new one; anything else flags both for review.
5. Belief decisions: a held value of the same single-valued slot that the gate's committed
   belief abandoned is a conflict too (``belief_decisions``), resolved by the same policy.
Every conflict decision of MOSAIC is made in this module; step 3's prompts, one per judgement mode, and the
reading of their answers are mosaic.conflict_judgement's, the gold-judge study's accounting mosaic.oracle's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Protocol

import numpy as np
from pydantic import Field

from core.config_check import Cosine, Count, Share, Weight
from core.llm import LLMClient
from core.quantities import mask_numbers, number_in, numeric_clash, quantities, same_slot, values_match
from mosaic.conflict_judgement import (
    GOLD_REASON,
    LLM_REASONS,
    ask_judgement,
    batch_label_distributions,
    build_messages,
    build_nli_batch_messages,
    digit_distribution,
)
from mosaic.entity import Entity, resolve_by_evidence
from mosaic.graph import ACTIVE_STATUSES
from mosaic.oracle import GoldConflictJudge, audit_gold_partners

Verdict = Literal["update", "reject", "flag"]
Mode = Literal["nli", "pick", "revise", "supersede"]  # the LLM judgement of step 3 (conf/system/mosaic.yaml conflict.mode)
Source = Literal["model", "gold"]  # who answers step 3: the LLM, or the benchmark's labels (conflict.source)
Kind = Literal["numeric", "semantic", "logical", "unknown"]


@dataclass
class ConflictDecision:
    """One real conflict between a new entity and a held one, and what the policy did about it."""

    new_id: str
    old_id: str
    verdict: Verdict  # update = new supersedes old; reject = new dropped; flag = both held for review
    conflict_type: Kind
    reason: str
    score: float  # detector confidence in [0, 1]
    related_ids: list[str] = field(default_factory=list)  # other held entities the judgement relied on
    decided_by: str = ""  # numeric, revision, llm, gold (the judge's answer) or belief


class ConflictJudge(Protocol):
    """Step 3 answered from outside the model: which of the facts shown does NEW contradict (1-based, any number)."""

    def blame(self, new: Entity, facts: list[Entity]) -> list[int]: ...


class CandidateGraph(Protocol):
    """What the detector needs from mosaic.graph.MemoryGraph (kept narrow so tests can stand in)."""

    def nearest(self, vector: np.ndarray, k: int, exclude: set[str] = ...) -> list[tuple[Entity, float]]: ...

    def neighbours(self, entity_id: str) -> list[Entity]: ...

    def vector(self, entity_id: str) -> np.ndarray: ...

    def embed(self, text: str) -> np.ndarray: ...


# ----------------------------------------------------------------------------- detector
class ConflictDetector:
    """Candidate selection -> like-with-like numeric rule -> calibrated LLM pick -> resolution policy.

    Tuning knobs (defaults were calibrated on the household-finance dev suite only, by the rule
    "highest detection with false alarms <= 10%": mode=nli, threshold=0.35 gave 91% detection and
    6% false alarms there; see results/conflict_dev/ and research/tune_conflict.py):
    ``n_facts`` facts shown to the LLM, ``min_similarity`` to enter the candidate list,
    ``numeric_similarity`` (masked-text cosine that makes two statements "about the same thing"),
    ``threshold`` on the LLM's 1 - p(0), ``explain`` (one extra short call for a reason on hits; off by
    default: on the 1.5B model it mostly answered "The facts contradict each other.", at ~4 s a hit),
    ``reject_margin`` (how much more confident held evidence must be to reject the newcomer),
    ``duplicate_similarity`` (cosine at which the nearest held fact counts as a restatement: no LLM call),
    ``numeric_tolerance`` (relative difference under which two numbers of one unit family agree),
    ``enabled`` (false: the memory runs without save-time checks), ``use_belief`` (also resolve held
    values of a slot that the gate's committed belief abandoned), ``judge_min_similarity`` (null: off,
    the paper's behaviour; a cosine: the LLM is asked only when the nearest candidate reaches it, a
    write-cost switch), ``judge`` (``always``: every check that reaches step 3 asks the LLM, the paper's
    behaviour; ``proposed``: the LLM only confirms a clash the extraction call proposed, a write-cost
    variant that needs ``extract.held_facts`` >= 1), ``batch`` (false: one LLM call per check, the paper's
    behaviour; true: ``check_group`` asks every check of a write group that reaches step 3 in one call, a
    write-cost variant; nli mode only), ``revision_similarity`` (null: off, the paper's behaviour; a cosine: a new
    fact whose nearest held fact is at least this close, but below ``duplicate_similarity``, revises it without an
    LLM call, resolved by the evidence policy like any conflict; an ablation for HaluMem's update events, which
    are mostly refinements that an "are these both true?" judge accepts, see docs/halumem.md), ``source`` (``model``:
    the LLM answers step 3, the paper's check; ``gold``: ``gold_judge`` answers it from the benchmark's labels with no
    LLM call, the gold-judge study that measures the mechanism's ceiling; candidates, rules and policy stay the same).

    Blame is per candidate: a verdict names the facts it contradicts, so one new fact can retire several held facts
    (the gold judge names every labelled partner shown; ``pick``/``revise`` the picked number). ``nli`` and
    ``supersede`` answer for the list as a whole; when ``nli`` says false over more than one fact, one more one-token
    call with the ``pick`` prompt names the fact (the nearest is not assumed).
    """

    def __init__(
        self,
        llm: LLMClient,
        enabled: bool = True,
        k: Count = 5,  # nearest held entities checked; conflict.enabled=false turns checks off
        mode: Mode = "nli",
        n_facts: Count = 6,
        min_similarity: Cosine = 0.2,
        numeric_similarity: Cosine = 0.75,
        threshold: Share = 0.35,  # p(false) at which a check is a conflict
        use_numeric_rule: bool = True,
        use_llm: bool = True,
        explain: bool = False,
        reject_margin: Share = 0.2,  # a difference of two evidence strengths in [0, 1]
        top_logprobs: Annotated[int, Field(ge=1, le=20)] = 10,  # alternatives per token an OpenAI-compatible server returns
        max_explain_tokens: Count = 40,
        duplicate_similarity: Cosine = 0.95,
        numeric_tolerance: Weight = 0.02,  # a relative difference of two numbers
        use_belief: bool = True,
        judge_min_similarity: Cosine | None = None,
        judge: Literal["always", "proposed"] = "always",
        batch: bool = False,
        revision_similarity: Cosine | None = None,
        source: Source = "model",
        gold_judge: ConflictJudge | None = None,
    ) -> None:
        self.llm = llm
        # types and ranges are checked from the signature (core.config_check), combinations by mosaic.settings
        self.source = source
        if gold_judge is None and source == "gold":
            gold_judge = GoldConflictJudge()
        self.gold_judge = gold_judge
        self.enabled = bool(enabled)
        self.k = int(k)
        self.judge = judge
        self.batch = bool(batch)
        self.mode = mode
        self.n_facts = int(n_facts)
        self.min_similarity = float(min_similarity)
        self.numeric_similarity = float(numeric_similarity)
        self.threshold = float(threshold)
        self.use_numeric_rule = use_numeric_rule
        self.use_llm = use_llm
        self.explain = explain
        self.reject_margin = float(reject_margin)
        self.top_logprobs = int(top_logprobs)
        self.max_explain_tokens = int(max_explain_tokens)
        self.duplicate_similarity = float(duplicate_similarity)
        self.numeric_tolerance = float(numeric_tolerance)
        self.use_belief = bool(use_belief)
        self.judge_min_similarity = None if judge_min_similarity is None else float(judge_min_similarity)
        self.revision_similarity = None if revision_similarity is None else float(revision_similarity)
        self.last_trace: dict[str, Any] = {}  # what the last check saw and scored (for miss analysis)
        self.last_group_traces: list[dict[str, Any]] = []  # check_group: one trace per check
        self.stats: dict[str, int] = {"checks": 0, "no_candidates": 0, "numeric_hits": 0, "llm_calls": 0, "llm_hits": 0,
                                      "skipped_far": 0, "skipped_unproposed": 0, "revision_hits": 0, "update": 0, "reject": 0, "flag": 0,
                                      "batched_checks": 0, "batch_unparsed": 0, "blame_calls": 0, "gold_judgements": 0, "gold_hits": 0,
                                      "gold_partners_held": 0, "gold_partners_retired": 0, "gold_partner_not_candidate": 0,
                                      "gold_partner_not_shown": 0, "gold_partner_ruled_out": 0, "gold_partner_not_blamed": 0,
                                      "numeric_gold_right": 0, "numeric_gold_wrong": 0}  # fmt: skip

    # -- candidates ------------------------------------------------------------------
    def _new_vector(self, new: Entity, graph: CandidateGraph) -> np.ndarray:
        try:
            return graph.vector(new.entity_id)
        except KeyError:
            return graph.embed(new.text)

    def candidates(
        self, new: Entity, graph: CandidateGraph, peers: list[tuple[Entity, np.ndarray]] = (), vector: np.ndarray | None = None
    ) -> list[tuple[Entity, float]]:
        """k nearest held entities plus their graph neighbours, ranked by cosine to the newcomer.

        ``peers``: entities of the same write group judged before this one and not yet in the graph (with
        their vectors), so a group sees its earlier entities as a one-at-a-time write would."""
        vec = self._new_vector(new, graph) if vector is None else vector
        exclude = {new.entity_id}
        nearest = graph.nearest(vec, self.k, exclude=exclude)
        pool: dict[str, Entity] = {e.entity_id: e for e, _ in nearest}
        for entity, _ in nearest:
            for nb in graph.neighbours(entity.entity_id):
                if nb.entity_id not in exclude:
                    pool.setdefault(nb.entity_id, nb)
        scored = [(e, float(np.dot(graph.vector(e.entity_id), vec))) for e in pool.values()]
        scored += [(e, float(np.dot(v, vec))) for e, v in peers if e.entity_id not in exclude and e.entity_id not in pool]
        scored.sort(key=lambda pair: -pair[1])
        return [(e, s) for e, s in scored if s >= self.min_similarity]

    # -- numeric rule ----------------------------------------------------------------
    def _numeric(self, new: Entity, cands: list[tuple[Entity, float]], graph: CandidateGraph) -> tuple[Entity, str, float] | None:
        """Compare numbers only with the held entity that says the same thing with numbers masked."""
        if not quantities(new.text):
            return None
        families = {q.family for q in quantities(new.text)}
        comparable = [e for e, _ in cands if families & {q.family for q in quantities(e.text)}]
        if not comparable:
            return None
        masked = graph_embedder_encode(graph, [mask_numbers(new.text)] + [mask_numbers(e.text) for e in comparable])
        sims = masked[1:] @ masked[0]
        best = int(np.argmax(sims))
        slot_peers = [i for i, e in enumerate(comparable) if same_slot(new, e)]
        if slot_peers:  # extraction named the same subject and attribute: that is like with like
            best = max(slot_peers, key=lambda i: sims[i])
        self.last_trace["numeric_best"] = {"old_id": comparable[best].entity_id, "masked_similarity": float(sims[best])}
        if sims[best] < self.numeric_similarity and not slot_peers:
            return None
        why = numeric_clash(new.text, comparable[best].text, rel_tol=self.numeric_tolerance)
        return (comparable[best], why, float(max(sims[best], self.numeric_similarity))) if why else None

    # -- LLM -------------------------------------------------------------------------
    def _ask(self, new: Entity, facts: list[Entity]) -> tuple[float, list[int], list[dict[str, str]], str]:
        """Step 3 for one check: (score, 1-based indices of the blamed facts, messages, first answer); sets the
        trace's ``llm_calls`` (0 with the gold judge; 1, or 2 when an nli verdict needs the fact named)."""
        if self.source == "gold":
            blamed = self.gold_judge.blame(new, facts)
            self.stats["gold_judgements"] += 1
            self.last_trace["llm_calls"] = 0
            return (1.0 if blamed else 0.0), blamed, [], ",".join(map(str, blamed))
        score, pick, messages, answer = self.judge_texts([f.text for f in facts], new.text)
        self.last_trace["llm_calls"] = 1
        if self.mode == "nli" and score >= self.threshold and self.judge != "proposed":  # proposed: the proposal, shown first, names it
            pick = self._blame_one(facts, new.text)
        return score, [pick] if pick > 0 else [], messages, answer

    def _blame_one(self, facts: list[Entity], new_text: str) -> int:
        """Which fact an nli ``false`` is about: fact 1 when it is the only one shown, else the most likely non-zero
        number of one ``pick`` call over the same facts (one generated token; its few-shot prefix is fixed)."""
        if len(facts) == 1:
            return 1
        messages = build_messages([f.text for f in facts], new_text)
        result = self.llm.chat(messages, max_tokens=1, top_logprobs=self.top_logprobs, purpose="conflict")
        dist = digit_distribution(result.logprobs, result.text, len(facts))
        self.stats["blame_calls"] += 1
        self.last_trace["llm_calls"] = int(self.last_trace.get("llm_calls", 0)) + 1
        self.last_trace["blame_digits"] = {k: round(v, 4) for k, v in sorted(dist.items())}
        return max(range(1, len(facts) + 1), key=lambda i: dist.get(i, 0.0))

    def judge_texts(self, texts: list[str], new_text: str) -> tuple[float, int, list[dict[str, str]], str]:
        """Step 3 on texts: (score, 1-based index of the blamed fact, messages, first answer); one LLM call."""
        score, pick, messages, answer, read = ask_judgement(self.llm, self.mode, texts, new_text, self.top_logprobs)
        self.last_trace.update(read)
        return score, pick, messages, answer

    def _reason(self, messages: list[dict[str, str]], answer: str) -> str:
        follow = [*messages, {"role": "assistant", "content": answer},
                  {"role": "user", "content": "In one short sentence, why?"}]  # fmt: skip
        return self.llm.chat(follow, max_tokens=self.max_explain_tokens, purpose="conflict").text.strip()

    # -- policy ----------------------------------------------------------------------
    def resolve(self, new: Entity, old: Entity) -> Verdict:
        """Newer and at least as authoritative -> update; clearly stronger held evidence -> reject; else flag.

        Authority is evidence strength (directness, specificity), not the gate's rho: rho includes
        consistency with held values, which every correction lacks by definition.
        """
        return resolve_by_evidence(new, old, self.reject_margin)  # type: ignore[return-value]

    def belief_decisions(self, new: Entity, competing: list[Entity], covered: set[str]) -> list[ConflictDecision]:
        """Conflicts the gate's belief update already proves: a held value of the same single-valued
        slot (``competing``, as the gate found them) that the committed belief no longer favours.
        ``check`` may miss these (e.g. number words), but keeping both values active would contradict
        the belief just committed. Held entities in ``covered`` were already decided by ``check``.

        The verdict is ``resolve``'s, judged on evidence strength rather than rho: rho includes
        consistency, which is low for *every* contradicting newcomer by construction.
        """
        if not self.use_belief:
            return []
        winner = max(new.belief, key=new.belief.get) if new.belief else None
        if winner is None or not values_match(winner, new.value or new.text):
            return []
        out: list[ConflictDecision] = []
        for old in competing:
            if old.entity_id in covered or old.status not in ACTIVE_STATUSES or values_match(old.value, new.value):
                continue
            numeric = number_in(old.value) is not None and number_in(new.value) is not None
            p = float(new.belief.get(winner, 0.0))
            reason = f"belief over '{new.subject} / {new.attribute}' moved from '{old.value}' to '{new.value}' (p={p:.2f})"
            out.append(ConflictDecision(new.entity_id, old.entity_id, self.resolve(new, old), "numeric" if numeric else "semantic", reason, p,
                                        decided_by="belief"))
        return out

    # -- the check -------------------------------------------------------------------
    def check(self, new: Entity, graph: CandidateGraph, proposed: list[Entity] | None = None) -> list[ConflictDecision]:
        """Real conflicts between ``new`` and held entities (one per blamed fact; the policy is applied).

        ``proposed``: held entities the extraction call said ``new`` clashes with (``judge: proposed``)."""
        self.last_trace = {"new_id": new.entity_id, "llm_calls": 0}
        decisions, facts = self._prepare(new, graph, proposed or [])
        if facts is not None:
            score, blamed, messages, answer = self._ask(new, facts)
            decisions = decisions + self._decide(new, facts, score, blamed, messages, answer)
        self._count(self.last_trace, decisions)
        if self.source == "gold":
            audit_gold_partners(self.stats, self.last_trace, new, graph, decisions)
        return decisions

    def check_group(
        self, items: list[tuple[Entity, np.ndarray, list[Entity]]], graph: CandidateGraph
    ) -> list[list[ConflictDecision]]:
        """``check`` for every entity of a write group, the LLM asked once for all that reach step 3.

        ``items``: (new entity, its vector, proposed clashes) in write order; each is checked against the graph
        as it is plus the group's earlier entities. A group of one asks the single-check prompt (``_ask``)."""
        traces: list[dict[str, Any]] = []
        results: list[list[ConflictDecision] | None] = []
        pending: list[tuple[int, list[Entity]]] = []
        for index, (new, vector, proposed) in enumerate(items):
            self.last_trace = {"new_id": new.entity_id, "llm_calls": 0}
            peers = [(earlier, earlier_vector) for earlier, earlier_vector, _ in items[:index]]
            decisions, facts = self._prepare(new, graph, proposed or [], peers=peers, vector=vector)
            traces.append(self.last_trace)
            results.append(decisions)
            if facts is not None:
                pending.append((index, facts))
        if len(pending) == 1:
            index, facts = pending[0]
            self.last_trace = traces[index]
            score, blamed, messages, answer = self._ask(items[index][0], facts)
            results[index] = results[index] + self._decide(items[index][0], facts, score, blamed, messages, answer)
        elif pending:
            checks = [([f.text for f in facts], items[index][0].text) for index, facts in pending]
            messages = build_nli_batch_messages(checks)
            result = self.llm.chat(messages, max_tokens=4 * len(checks), top_logprobs=self.top_logprobs, purpose="conflict")
            labels = batch_label_distributions(result.logprobs, result.text, len(checks))
            traces[pending[0][0]]["llm_calls"] = 1  # one call for the whole group, counted once
            self.stats["batched_checks"] += len(pending)
            for (index, facts), dist in zip(pending, labels):
                self.last_trace = traces[index]
                self.last_trace["batched"] = len(pending)
                if dist is None:
                    self.stats["batch_unparsed"] += 1
                    self.last_trace["decided_by"] = "unparsed"
                    continue
                self.last_trace["labels"] = {k: round(v, 4) for k, v in dist.items()}
                blamed = [self._blame_one(facts, items[index][0].text) if self.judge != "proposed" else 1] if dist["false"] >= self.threshold else []
                results[index] = results[index] + self._decide(items[index][0], facts, dist["false"], blamed, messages, "false")
        for trace, decisions in zip(traces, results):
            self._count(trace, decisions)
        self.last_group_traces = traces
        return results

    def _count(self, trace: dict[str, Any], decisions: list[ConflictDecision]) -> None:
        self.stats["checks"] += 1
        self.stats["llm_calls"] += int(trace.get("llm_calls", 0))
        self.stats["no_candidates"] += int(not trace.get("candidates"))
        self.stats["skipped_far"] += int(trace.get("decided_by") == "far")
        self.stats["skipped_unproposed"] += int(trace.get("decided_by") == "not_proposed")
        for d in decisions:
            self.stats[d.verdict] += 1
            by = d.decided_by or trace.get("decided_by")
            self.stats["numeric_hits" if by == "numeric" else "revision_hits" if by == "revision" else
                       "gold_hits" if by == "gold" else "llm_hits"] += 1  # fmt: skip

    def _prepare(
        self, new: Entity, graph: CandidateGraph, proposed: list[Entity],
        peers: list[tuple[Entity, np.ndarray]] = (), vector: np.ndarray | None = None,
    ) -> tuple[list[ConflictDecision], list[Entity] | None]:
        """Steps 1-2 and the rules that decide without the LLM: (the rules' decisions, the facts to show the judge,
        or None when no judgement is asked). The numeric rule decides its pair and the judge still sees the other
        candidates (the rules run in order with the judge); the duplicate and revision rules end the check."""
        cands = self.candidates(new, graph, peers=peers, vector=vector)
        self.last_trace["candidates"] = [(e.entity_id, round(s, 4)) for e, s in cands]
        ruled: list[ConflictDecision] = []
        if not cands:
            return ruled, None
        if self.use_numeric_rule:
            hit = self._numeric(new, cands, graph)
            if hit is not None:
                old, why, sim = hit
                self.last_trace["decided_by"] = "numeric"
                ruled.append(ConflictDecision(new.entity_id, old.entity_id, self.resolve(new, old), "numeric", why, min(1.0, sim),
                                              decided_by="numeric"))
                cands = [(e, s) for e, s in cands if e.entity_id != old.entity_id]
                if not cands:
                    return ruled, None
        top, top_similarity = cands[0]
        if top_similarity >= self.duplicate_similarity or _normalise_text(top.text) == _normalise_text(new.text):
            # a restatement of a held fact (numbers already agreed, or the rule above would have fired)
            # is not a contradiction; the small model's p(false) on identical texts is not near 0
            self.last_trace["decided_by"] = self.last_trace.get("decided_by", "duplicate")
            return ruled, None
        if self.revision_similarity is not None and top_similarity >= self.revision_similarity:
            # ablation: the nearest held fact is about the same thing and says it differently, so
            # the newer statement revises it; the old one is superseded and kept in its history
            self.last_trace["decided_by"] = "revision"
            reason = f"revision: nearest held fact at cosine {top_similarity:.2f} >= conflict.revision_similarity: {top.text}"
            return [*ruled, ConflictDecision(new.entity_id, top.entity_id, self.resolve(new, top), "semantic", reason, top_similarity,
                                             decided_by="revision")], None
        if not self.use_llm and self.source == "model":
            return ruled, None
        if self.judge_min_similarity is not None and top_similarity < self.judge_min_similarity:
            # write-cost switch: no held fact is close enough to be about the same thing,
            # so the LLM judgement is skipped; the numeric rule above has already had its say
            self.last_trace["decided_by"] = self.last_trace.get("decided_by", "far")
            return ruled, None
        facts = [e for e, _ in cands[: self.n_facts]]
        if self.judge == "proposed":
            # write-cost variant: the extraction call already read the held facts nearest the
            # turn and proposed none for this entity, so no judgement is asked; a proposed clash is
            # confirmed by the calibrated judge with the proposed fact first (the one NLI mode blames)
            proposed = [e for e in proposed if e.entity_id != new.entity_id and e.status in ACTIVE_STATUSES]
            self.last_trace["proposed"] = [e.entity_id for e in proposed]
            if not proposed:
                self.last_trace["decided_by"] = self.last_trace.get("decided_by", "not_proposed")
                return ruled, None
            ids = {e.entity_id for e in proposed}
            facts = (proposed + [e for e in facts if e.entity_id not in ids])[: self.n_facts]
        return ruled, facts

    def _decide(
        self, new: Entity, facts: list[Entity], score: float, blamed: list[int], messages: list[dict[str, str]], answer: str
    ) -> list[ConflictDecision]:
        """Step 3's answer -> one decision per blamed fact (threshold, the blamed facts, the policy)."""
        blamed = [i for i in dict.fromkeys(blamed) if 1 <= i <= len(facts)]
        self.last_trace.update({"facts": [f.entity_id for f in facts], "score": score, "pick": blamed[0] if blamed else 0, "blamed": blamed})
        if score < self.threshold or not blamed:
            return []
        reason = ""
        if self.explain and messages:
            reason = self._reason(messages, answer)
            self.last_trace["llm_calls"] = int(self.last_trace.get("llm_calls", 0)) + 1
        self.last_trace["decided_by"] = "gold" if self.source == "gold" else "llm"
        decisions = []
        for pick in blamed:
            old = facts[pick - 1]
            related = [f.entity_id for f in facts if f.entity_id != old.entity_id]
            kind: Kind = "numeric" if quantities(new.text) and quantities(old.text) else "unknown"
            # the verdict itself is the judge's: say what it judged and how sure it was
            why = reason or (GOLD_REASON if self.source == "gold" else LLM_REASONS[self.mode]).format(pick=pick, score=score, old=old.text)
            decisions.append(ConflictDecision(new.entity_id, old.entity_id, self.resolve(new, old), kind, why, score, related,
                                              decided_by=self.last_trace["decided_by"]))
        return decisions


def _normalise_text(text: str) -> str:
    return " ".join(re.sub(r"[^\w/.%$]+", " ", text.lower()).split())


def graph_embedder_encode(graph: Any, texts: list[str]) -> np.ndarray:
    """Unit vectors for ``texts`` with the graph's own embedder (one batch)."""
    embedder = getattr(graph, "embedder", None)
    if embedder is not None:
        return np.asarray(embedder.encode(texts), dtype=np.float32)
    return np.vstack([graph.embed(t) for t in texts]).astype(np.float32)
