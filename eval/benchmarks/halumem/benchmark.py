"""The HaluMem run loop (arXiv 2511.03506): memory extraction, updating and QA, scored operation by operation.

Protocol, following HaluMem's own toolkit (MemTensor/HaluMem ``eval/eval_*.py`` and
``eval/evaluation.py``): for each user, sessions are added in order; right after each session

* updating: each update point (``is_update == "True"`` with original memories) is searched with
  its own content (``update_k`` = 10 results) and judged Correct/Hallucination/Omission/Other; a point
  whose search returned nothing leaves the update task for the integrity set (``process_user`` in
  HaluMem's ``eval/evaluation.py``; its update row is kept, marked ``routed: integrity``);
* extraction: every other gold point of the session (interference points included) is judged 0/1/2
  against everything the system stored in that session, and every stored memory is judged for
  support by the dialogue and the session's non-interference gold points (0/1/2) and, in a second
  call, for whether its fields are gold fields;
* QA: each question of the session is searched (``qa_k`` = 20 results), answered by the shared
  answerer and judged Correct/Hallucination/Omission.

Each session is one ``add`` with all its messages (HaluMem's toolkit adds a session's dialogue in
order, in API-sized batches, e.g. 20 messages for MemOS, <= 28 for Zep, and scores only after the
whole session; how a system splits it inside is its own business).
Oracle runs (``oracle_facts``): the session's gold memory points, interference ones excluded, ride
on the session's last turn as ``Turn.oracle_facts`` (docs/halumem.md, "Oracle extractor").
Systems that report conflict events and list their memories also get update-link counts
(``update_links``: did the save-time check link each real update to what it replaces).

Sessions flagged ``is_generated_qa_session`` (HaluMem-Long filler) are added but not scored.
Systems that cannot list what they stored (not ``Inspectable``; Zep-like) get no extraction
metrics, as in the paper. Rows are appended as they are produced, so a killed run resumes
(memory state is rebuilt by replaying adds; the LLM cache makes that cheap).

Judge: the run's judge model (``ctx.judge.llm``, from conf/judge) asks HaluMem's four rubrics
(eval/benchmarks/halumem/judge.py, prompts in conf/halumem_judge/ as ``judge_prompts``), not the LoCoMo prompt in ``ctx.judge.prompt``: HaluMem scores
integrity and accuracy 0/1/2 and updates/answers in four or three classes, not CORRECT/WRONG against one
gold answer, so its prompts and reply schemas are part of its protocol. Their reply budget and retries
are this benchmark's own keys (``judge_max_tokens``: 200, the reason plus a score or two fields, and
``judge_attempts``), kept apart from conf/judge ``max_tokens`` (160, LoCoMo's one-label reply).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from tqdm import tqdm

from core.api import AddReport, DeclaresConflictSignal, Inspectable, MemorySystem, OracleFact, ParallelSearch, Retrieved, StoredItem, Turn
from core.config_check import ConfigKeyError
from eval.benchmarks.halumem.clarify import CLARIFY_TABLES, clarify_metrics, clarify_session
from eval.benchmarks.halumem.compare import comparison as paired_comparison
from eval.benchmarks.halumem.data import HUB_REPO, HaluMemUser, Session, halumem_time_to_iso, load_halumem_hub, load_halumem_jsonl
from eval.benchmarks.halumem.decomposition import decomposition as decomposition_columns
from eval.benchmarks.halumem.judge import QA_LABELS, UPDATE_LABELS, HaluMemJudge, Verdict
from eval.benchmarks.halumem.mechanism import chain_row, gold_replacements, mechanism_metrics, probe_session
from eval.benchmarks.halumem.metrics import PROTOCOL, by_memory_type, by_question_type, extraction_metrics, label_metrics, ranking_metrics
from eval.benchmarks.halumem.public import publish_copy
from eval.benchmarks.halumem.retrieval import RETRIEVAL_STAGES, run_halumem_retrieval
from eval.benchmarks.halumem.retrieval_paired import recompute_retrieval
from eval.benchmarks.halumem.table import make_table
from eval.benchmarks.halumem.update_links import fact_id_of, link_session, update_link_metrics
from eval.benchmarks.halumem.update_ranking import Encode, version_ranks
from eval.context import RunContext
from eval.tokens import returned_token_fields, token_summary
from eval.workers import SystemGuard, run_stage

log = logging.getLogger(__name__)


def _snapshot_stored(system: Any, namespace: str) -> dict[tuple[str, str], StoredItem]:
    return {(item.memory_id, item.text): item for item in system.stored_items(namespace)}


def _fact_ids(held: dict[tuple[str, str], StoredItem]) -> set[str]:
    """Gold fact ids of what a system holds (items of an oracle run carry one; model-extracted items none)."""
    return {item.fact_id for item in held.values() if item.fact_id}


def evidence_fact_ids(evidence: Sequence[str], gold_ids: dict[str, list[tuple[int, str]]], s_idx: int) -> list[str]:
    """Gold fact ids of a question's evidence: each evidence text's latest gold point (by exact text) from a session
    up to the question's; an evidence text with no such point has none (the mechanism analysis counts those)."""
    out = []
    for text in evidence:
        ids = [fact_id for session, fact_id in gold_ids.get(text, []) if session <= s_idx]
        if ids:
            out.append(ids[-1])
    return out


def _replay_search(system: MemorySystem, namespace: str, query: str, k: int) -> None:
    """Search again for a point or question a killed run already scored, result dropped, when the system's
    search depends on the one before it (``parallel_search`` false or absent: MOSAIC's continuity term), so
    the searches after it see the state an uninterrupted run had; a pure-read search is not repeated."""
    if not (isinstance(system, ParallelSearch) and system.parallel_search):
        system.search(namespace, query, k)


# Row files whose rows are LLM verdicts (or answers): a row whose call failed is redone by the next run.
SCORED_TABLES = ("integrity", "accuracy", "updates", "qa")


def failed(row: dict[str, Any] | None) -> bool:
    """Whether a verdict row records a failed LLM call (the judge's or the answerer's)."""
    return row is not None and bool(row.get("failure") or row.get("answer_failure") or row.get("gold_fields_failure"))


def done(table: Any, key: str) -> bool:
    """Whether ``key`` has a row that needs no retry."""
    return key in table and not failed(table.get(key))
def oracle_facts(user: HaluMemUser, s_idx: int, session: Session, replaces: dict[str, tuple[str, ...]] | None = None) -> tuple[OracleFact, ...]:
    """The session's gold memory points as oracle facts, in HaluMem's order, interference points left out
    (they are the distractors HaluMem's false-memory resistance rewards a system for NOT storing). ``replaces``:
    the gold-judge study's map (mechanism.gold_replacements), carried on each update point."""
    replaces = replaces or {}
    return tuple(
        OracleFact(fact_id=fact_id_of(s_idx, p), text=p.content, subject=user.name, memory_type=p.memory_type,
                   replaces=replaces.get(fact_id_of(s_idx, p), ()))
        for p in session.memory_points
        if not p.is_interference
    )


def dialogue_text(session: Session) -> str:
    return "\n".join(f"[{t.timestamp or session.start_time}] {t.role}: {t.content}" for t in session.dialogue)


@dataclass
class HaluMemBenchmark:
    """HaluMem on any ``MemorySystem``; see the module docstring for the protocol."""

    input_parameters = ("path",)  # the file hashed into a run's identity (core.api.DeclaresInputs); the hub has none

    path: str | None = None
    variant: str | None = None  # Medium | Long: table label and hub file; None = from the file name
    hub_repo: str = HUB_REPO
    hub_revision: str | None = None
    name: str = "halumem"
    judge_prompts: dict[str, Any] | None = None  # the judges' prompts (conf/halumem_judge/); None = the default file
    update_k: int = 10
    qa_k: int = 20
    extraction_source: str = "auto"  # auto | inspect | report | none
    score_extraction: bool = True  # false: what was stored is still read (update links) but not judged (no extraction metrics)
    score_updating: bool = True  # false: no update searches or verdicts (a writes-only study of the update links)
    score_qa: bool = True  # false: no questions asked (a writes-only study of the update links)
    limit_users: int | None = None
    limit_sessions: int | None = None
    judge_max_tokens: int = 200
    judge_attempts: int = 2
    bootstrap_samples: int = 1000
    seed: int = 0
    clarify: str = "off"  # off | oracle: answer clarification targets from gold points (halumem/clarify.py)
    clarify_budget: int = 3
    clarify_match_threshold: float = 0.5
    oracle_facts: bool = False  # attach the session's gold memory points to its last turn (oracle-extractor study)
    link_held_similarity: float = 0.8  # update links: cosine at which a held memory is what an update replaces
    link_new_similarity: float = 0.6  # update links, model-extracted runs: cosine for an event's new item to be a gold point
    oracle_conflicts: bool = False  # gold-judge study: oracle facts also carry the gold facts they replace (OracleFact.replaces)
    mechanism_probes: bool = False  # searches for the mechanism metrics after each session (mechanism.py; no LLM call)
    # the full run, or [ingest, retrieve]: searches only, no answers or verdicts (eval/benchmarks/halumem/retrieval.py)
    stages: Sequence[str] = ("ingest", "retrieve", "answer", "judge")
    _users: list[HaluMemUser] | None = field(default=None, repr=False)

    @property
    def variant_label(self) -> str:
        """The variant named in tables: as configured, else guessed from the file name."""
        if self.clarify != "off":  # an oracle study is never a Table 2 column of the plain variant
            return f"{dataclasses.replace(self, clarify='off').variant_label}+{self.clarify}-clarify"
        if self.variant:
            return self.variant
        stem = Path(self.path).stem.lower() if self.path else "medium"
        return "Long" if "long" in stem else "Medium" if "medium" in stem else f"custom:{Path(str(self.path)).name}"

    def load(self, ctx: RunContext | None = None) -> list[HaluMemUser]:
        """The users; with ``ctx``, parsed from the bytes the run read and checked against its folder's identity."""
        if self._users is None or (ctx is not None and self.path):
            content = ctx.read_input(self.path) if ctx is not None and self.path and Path(self.path).is_file() else None
            users = load_halumem_jsonl(self.path, content) if self.path else load_halumem_hub(self.variant_label, self.hub_repo, self.hub_revision)
            if self.limit_users is not None:
                users = users[: self.limit_users]
            self._users = users
        return self._users

    def check_inputs(self) -> None:
        """Settings and the local file (parsed; the hub copy is fetched by the run): before the run folder exists."""
        if self.clarify not in ("off", "oracle"):
            raise ConfigKeyError(f"benchmark.clarify={self.clarify!r}: must be off or oracle")
        if self.extraction_source not in ("auto", "inspect", "report", "none"):
            raise ConfigKeyError(f"benchmark.extraction_source={self.extraction_source!r}: must be auto, inspect, report or none")
        if self.oracle_conflicts and not self.oracle_facts:
            raise ConfigKeyError("benchmark.oracle_conflicts=true labels oracle facts, so it needs benchmark.oracle_facts=true (ablation=oracle_judge sets both)")
        if tuple(self.stages) not in (("ingest", "retrieve", "answer", "judge"), RETRIEVAL_STAGES):
            raise ConfigKeyError(f"benchmark.stages={list(self.stages)}: choose [ingest, retrieve, answer, judge] (the full run) or [ingest, retrieve] (retrieval only)")
        if self.path:
            load_halumem_jsonl(self.path)

    def _extraction_mode(self, system: MemorySystem) -> str:
        mode = self.extraction_source
        if mode not in ("auto", "inspect", "report", "none"):
            raise ValueError(f"halumem extraction_source must be auto|inspect|report|none, got {mode!r}")
        if mode == "auto":
            return "inspect" if isinstance(system, Inspectable) else "none"
        if mode == "inspect" and not isinstance(system, Inspectable):
            raise ValueError(f"system {getattr(system, 'name', system)!r} cannot list what it stored (not Inspectable); use extraction_source=report or none")
        return mode

    # -- running ----------------------------------------------------------------------------
    def run(self, system: MemorySystem, ctx: RunContext) -> dict[str, Any]:
        if tuple(self.stages) == RETRIEVAL_STAGES:
            return run_halumem_retrieval(self, system, ctx)
        users = self.load(ctx)
        judge = HaluMemJudge(ctx.judge.llm, self.judge_prompts, max_tokens=self.judge_max_tokens, attempts=self.judge_attempts)  # the run's judge model, HaluMem's rubrics
        mode = self._extraction_mode(system)
        if self.clarify not in ("off", "oracle"):
            raise ValueError(f"benchmark.clarify must be off or oracle, got {self.clarify!r}")
        tables = ("sessions", "integrity", "accuracy", "updates", "qa", "users", "update_links") + (CLARIFY_TABLES if self.clarify != "off" else ())
        # the gold chain per session (mechanism.py): with probes, or, where questions are answered, for chain-aware recall
        chained = self.mechanism_probes or (self.score_qa and ctx.embedder is not None)
        tables += ("mechanism",) if chained else ()
        if (self.oracle_conflicts or self.mechanism_probes) and ctx.embedder is None:
            raise ValueError("benchmark.oracle_conflicts / mechanism_probes need the run's embedder (the update-link rule); this run has none")
        rows = {name: ctx.rows(f"halumem_{name}") for name in tables}

        def one_user(user: HaluMemUser) -> None:
            self._run_user(user, system, ctx, judge, mode, rows)
            rows["users"].append({"key": user.uuid, "sessions": len(self._sessions(user))})

        retry = {str(r["key"]).split(":")[0] for name in SCORED_TABLES for r in rows[name].rows() if failed(r)}
        todo = [user for user in users if user.uuid not in rows["users"] or user.uuid in retry]  # failed rows: the user again
        run_stage(ctx, "users", one_user, todo, SystemGuard(system).namespace_workers(ctx.workers))
        order = {user.uuid: i for i, user in enumerate(users)}  # rows read back in user order, whatever run.workers was
        return self.aggregate(
            {name: sorted(table.rows(), key=lambda r: order.get(str(r["key"]).split(":")[0], len(order))) for name, table in rows.items()},
            extraction_mode=mode,
            system_name=getattr(system, "name", type(system).__name__),
            links=self._links_counted(system, mode, ctx),
        )

    @staticmethod
    def _links_counted(system: MemorySystem, mode: str, ctx: RunContext) -> bool:
        """Update links need what the system held before each add (inspect), a system that can raise conflicts, and
        the run's embedder (held and new memories are matched to gold points by text where they carry no fact id)."""
        none_by_construction = isinstance(system, DeclaresConflictSignal) and system.conflict_signal is False
        return mode == "inspect" and not none_by_construction and ctx.embedder is not None

    def _sessions(self, user: HaluMemUser) -> tuple[Session, ...]:
        return user.sessions if self.limit_sessions is None else user.sessions[: self.limit_sessions]

    def _run_user(self, user: HaluMemUser, system: MemorySystem, ctx: RunContext, judge: HaluMemJudge, mode: str, rows: dict[str, Any]) -> None:
        namespace = f"halumem-{user.uuid}"
        system.reset(namespace)
        held = _snapshot_stored(system, namespace) if mode == "inspect" else {}
        sessions = self._sessions(user)
        gold_text = {fact_id_of(i, p): p.content for i, sess in enumerate(user.sessions) for p in sess.memory_points}
        gold_ids: dict[str, list[tuple[int, str]]] = {}
        for i, sess in enumerate(user.sessions):
            for p in sess.memory_points:
                gold_ids.setdefault(p.content, []).append((i, fact_id_of(i, p)))
        ever_held: set[str] = _fact_ids(held)  # gold facts the system has held at any snapshot (QA mechanism fields)
        replaces = (gold_replacements(user.sessions, ctx.embedder.encode, self.link_held_similarity)
                    if self.oracle_conflicts or "mechanism" in rows else {})  # fmt: skip
        fact_of_memory = {item.memory_id: item.fact_id for item in held.values() if item.fact_id}  # everything ever held
        # The log and the bar name the user by uuid only: a name is dataset text, and an evaluation run's log is read.
        ctx.log.info("halumem user %s: %d sessions", user.uuid, len(sessions))
        for s_idx, session in enumerate(tqdm(sessions, desc=f"halumem user {user.uuid[:8]} (sessions: add, judge)", unit="session")):
            key = f"{user.uuid}:{s_idx}"
            turns = [
                Turn(
                    turn_id=f"{s_idx}:{t.dialogue_turn}:{t.role}",
                    speaker=user.name if t.role == "user" else t.role,
                    text=t.content,
                    session_time=halumem_time_to_iso(t.timestamp or session.start_time),
                )
                for t in session.dialogue
            ]
            if self.oracle_facts and turns:  # gold points are dated at the session's end: they arrive with its last turn
                turns[-1] = dataclasses.replace(turns[-1], oracle_facts=oracle_facts(user, s_idx, session, replaces if self.oracle_conflicts else None))
            held_before = list(held.values())
            report: AddReport = system.add(namespace, turns, session_time=halumem_time_to_iso(session.start_time))
            if mode == "inspect":
                now = _snapshot_stored(system, namespace)
                stored = [item for k, item in now.items() if k not in held]
                held = now
                ever_held |= _fact_ids(held)
                fact_of_memory.update({item.memory_id: item.fact_id for item in held.values() if item.fact_id})
            else:
                stored = list(report.stored) if mode == "report" else []
            rows["sessions"].append(
                {
                    "key": key,
                    "generated_qa_session": session.is_generated_qa_session,
                    "n_turns": len(turns),
                    "n_stored": len(stored),
                    "n_updated": len(report.updated),
                    "n_rejected": len(report.rejected),
                    "n_flagged": len(report.flagged),
                    "add_failures": report.failures,
                    "usage": report.usage.__dict__,
                }
            )
            if session.is_generated_qa_session:
                continue
            if self._links_counted(system, mode, ctx) and key not in rows["update_links"]:
                row = link_session(s_idx, session.memory_points, held_before, report.conflict_events, gold_text, ctx.embedder.encode,
                                   self.link_held_similarity, self.link_new_similarity)  # fmt: skip
                rows["update_links"].append({"key": key, "uuid": user.uuid, "session": s_idx, **row})
            if self.clarify != "off":
                stored = clarify_session(self, user, s_idx, session, system, namespace, judge, mode, rows, stored)
                held = _snapshot_stored(system, namespace) if mode == "inspect" else held
                ever_held |= _fact_ids(held)
            # updates first: a point whose search returned nothing joins the integrity set (the extraction
            # judges call no system, so the system sees the same searches in the same order as before)
            encode = ctx.embedder.encode if ctx.embedder is not None else None
            unsearched = self._judge_updates(user, s_idx, session, system, namespace, judge, rows, encode) if self.score_updating else None
            if mode != "none" and self.score_extraction:
                self._judge_extraction(user, s_idx, session, [item.text for item in stored], judge, rows, unsearched)
            if self.score_qa:
                facts = {"gold_ids": gold_ids, "ever_held": ever_held,
                         "by_memory": {item.memory_id: item.fact_id for item in held.values() if item.fact_id}}
                self._answer_questions(user, s_idx, session, system, namespace, ctx, judge, rows, facts)
            if self.mechanism_probes:  # last, so the scored tasks search as they would without it
                row = probe_session(system, namespace, s_idx, session, replaces, _fact_ids({(i.memory_id, i.text): i for i in held_before}),
                                    fact_of_memory.get, lambda evidence: evidence_fact_ids(list(evidence), gold_ids, s_idx),
                                    self.update_k, self.qa_k)  # fmt: skip
                if key not in rows["mechanism"]:
                    rows["mechanism"].append({"key": key, "uuid": user.uuid, "session": s_idx, **row})
            elif "mechanism" in rows and key not in rows["mechanism"]:  # the chain only: recall is read from the QA rows
                rows["mechanism"].append({"key": key, "uuid": user.uuid, "session": s_idx, **chain_row(s_idx, session, replaces)})

    def _judge_extraction(self, user: HaluMemUser, s_idx: int, session: Session, stored: list[str], judge: HaluMemJudge, rows: dict[str, Any],
                          unsearched: set[int] | None) -> None:
        """Integrity of every gold point outside the update task (``unsearched``: update points whose search returned
        nothing; None: no update task ran, so every point is in the integrity set), then each stored memory's accuracy."""
        for point in session.memory_points:
            key = f"{user.uuid}:{s_idx}:{point.index}"
            in_update_task = point.is_searched_update and unsearched is not None and point.index not in unsearched
            if in_update_task or done(rows["integrity"], key):
                continue
            if stored:
                verdict = judge.integrity(stored, point.content)
                score, failure, reason = verdict.value, verdict.failure, verdict.reason
            else:  # nothing stored: HaluMem scores 0 without asking the judge
                score, failure, reason = 0, None, "nothing stored in this session"
            rows["integrity"].replace(
                {
                    "key": key,
                    "uuid": user.uuid,
                    "session": s_idx,
                    "memory_content": point.content,
                    "memory_type": point.memory_type,
                    "memory_source": point.memory_source,
                    "is_interference": point.is_interference,
                    "importance": point.importance,
                    "score": score,
                    "failure": failure,
                    "reason": reason,
                    "n_stored": len(stored),
                }
            )
        gold = [p.content for p in session.memory_points if not p.is_interference]
        dialogue = dialogue_text(session)
        for m_idx, text in enumerate(stored):
            key = f"{user.uuid}:{s_idx}:m{m_idx}"
            if done(rows["accuracy"], key):
                continue
            verdict, fields = judge.accuracy(dialogue, gold, text), judge.gold_fields(gold, text)
            rows["accuracy"].replace(
                {
                    "key": key,
                    "uuid": user.uuid,
                    "session": s_idx,
                    "memory": text,
                    "score": verdict.value,
                    "in_gold_fields": fields.value,
                    "failure": verdict.failure,
                    "gold_fields_failure": fields.failure,
                    "reason": verdict.reason,
                    "gold_fields_reason": fields.reason,
                }
            )

    def _judge_updates(self, user: HaluMemUser, s_idx: int, session: Session, system: MemorySystem, namespace: str, judge: HaluMemJudge,
                       rows: dict[str, Any], encode: Encode | None = None) -> set[int]:
        """Search and judge the session's update points; returns the indexes of those whose search returned nothing
        (HaluMem moves them to the integrity set: their row is kept, ``routed: integrity``, outside the update metrics).
        With the run's embedder (``encode``) each row also gets the LLM-free version ranks (update_ranking.py)."""
        unsearched: set[int] = set()
        for point in session.memory_points:
            key = f"{user.uuid}:{s_idx}:{point.index}"
            if not point.is_searched_update:
                continue
            if done(rows["updates"], key):
                _replay_search(system, namespace, point.content, self.update_k)
                if rows["updates"].get(key).get("routed") == "integrity":
                    unsearched.add(point.index)
                continue
            returned = [item.text for item in system.search(namespace, point.content, self.update_k)]
            tokens = returned_token_fields(returned)  # tokens returned per search, one tokenizer for every system (eval/tokens.py)
            if returned:
                verdict = judge.update(returned, point.content, list(point.original_memories))
            else:
                unsearched.add(point.index)
                verdict = Verdict(None, "search returned nothing: judged for integrity instead")
            rows["updates"].replace(
                {
                    "key": key,
                    "uuid": user.uuid,
                    "session": s_idx,
                    "memory_content": point.content,
                    "original_memories": list(point.original_memories),
                    "memory_type": point.memory_type,
                    "importance": point.importance,
                    "returned": returned,
                    **tokens,
                    "routed": "update" if returned else "integrity",
                    **(version_ranks(returned, point.content, point.original_memories, encode, self.link_held_similarity) if encode else {}),
                    "label": verdict.value,
                    "content_verdict": (verdict.extra or {}).get("content"),
                    "original_current": (verdict.extra or {}).get("original_current"),
                    "failure": verdict.failure,
                    "reason": verdict.reason,
                }
            )
        return unsearched

    def _answer_questions(self, user: HaluMemUser, s_idx: int, session: Session, system: MemorySystem, namespace: str, ctx: RunContext,
                          judge: HaluMemJudge, rows: dict[str, Any], facts: dict[str, Any]) -> None:
        """Answer and judge the session's questions. Each row also keeps gold fact ids (no text) for the mechanism
        analysis of oracle runs (research/halumem_error_analysis.py): the evidence's, those of the retrieved items,
        and which evidence the system holds now or has held at any snapshot (``facts``: the run loop's
        ``gold_ids``, ``ever_held`` and ``by_memory``, held memory id -> fact id; empty for a system that cannot list
        its memories)."""
        for q_idx, question in enumerate(session.questions):
            key = f"{user.uuid}:{s_idx}:q{q_idx}"
            if done(rows["qa"], key):
                _replay_search(system, namespace, question.question, self.qa_k)
                continue
            retrieved = system.search(namespace, question.question, self.qa_k)
            answer = ctx.answerer.answer(question.question, retrieved, question_time=halumem_time_to_iso(session.end_time))
            verdict = judge.qa(question.question, question.answer, list(question.evidence), answer["text"])
            rows["qa"].replace(
                {
                    "key": key,
                    "uuid": user.uuid,
                    "session": s_idx,
                    "question": question.question,
                    "question_type": question.question_type,
                    "difficulty": question.difficulty,
                    "gold": question.answer,
                    "response": answer["text"],
                    "answer_failure": answer.get("failure"),  # the answerer's LLM gave no usable answer
                    "n_retrieved": len(retrieved),
                    **returned_token_fields([item.text for item in retrieved]),  # eval/tokens.py
                    **self._evidence_fields(list(question.evidence), retrieved, facts, s_idx),
                    "answer_prompt_tokens": answer.get("prompt_tokens"),
                    "answer_latency_s": answer.get("latency_s"),
                    "label": verdict.value,
                    "failure": verdict.failure,
                    "reason": verdict.reason,
                }
            )

    @staticmethod
    def _evidence_fields(evidence: list[str], retrieved: Sequence[Retrieved], facts: dict[str, Any], s_idx: int) -> dict[str, Any]:
        ids = evidence_fact_ids(evidence, facts["gold_ids"], s_idx)
        held = set(facts["by_memory"].values())
        return {
            "n_evidence": len(evidence),
            "evidence_fact_ids": ids,
            "retrieved_fact_ids": [facts["by_memory"][item.memory_id] for item in retrieved if item.memory_id in facts["by_memory"]],
            "evidence_held": [fact_id for fact_id in ids if fact_id in held],
            "evidence_ever_held": [fact_id for fact_id in ids if fact_id in facts["ever_held"]],
        }

    # -- aggregation --------------------------------------------------------------------------
    def aggregate(self, rows: dict[str, list[dict[str, Any]]], extraction_mode: str, system_name: str, links: bool = False) -> dict[str, Any]:
        n_boot, seed = self.bootstrap_samples, self.seed
        extraction = None
        if extraction_mode != "none" and self.score_extraction:
            extraction = extraction_metrics(rows["integrity"], rows["accuracy"], n_boot, seed)
        skipped = ("benchmark.score_extraction=false: stored memories were read, not judged" if not self.score_extraction and extraction_mode != "none"
                   else "the system cannot list what it stored (not Inspectable)" if extraction_mode == "none" and self.extraction_source == "auto"
                   else f"benchmark.extraction_source={self.extraction_source}")  # fmt: skip
        update_rows = [r for r in rows["updates"] if r.get("routed") != "integrity"]  # routed rows are in the integrity set
        updating = label_metrics(update_rows, UPDATE_LABELS, n_boot, seed) if self.score_updating else None
        if updating is not None:
            updating["version_ranking"] = ranking_metrics(update_rows, n_boot, seed)  # LLM-free companion
        qa = label_metrics(rows["qa"], QA_LABELS, n_boot, seed) if self.score_qa else None
        sessions = rows["sessions"]
        return {
            "benchmark": self.name,
            "variant": self.variant_label,
            "system": system_name,
            "protocol": PROTOCOL,
            "main_metric": qa["correct"]["mean"] if qa else None,
            "extraction_source": extraction_mode,
            "extraction": extraction,
            "extraction_skipped": None if extraction is not None else skipped,
            "updating": updating,
            "qa": qa,
            "tasks_skipped": [name for name, on in (("updating", self.score_updating), ("qa", self.score_qa)) if not on],
            "by_question_type": by_question_type(rows["qa"], QA_LABELS, n_boot, seed) if qa else None,
            "by_memory_type": by_memory_type(rows["integrity"] if extraction is not None else None, update_rows, n_boot, seed),
            "counts": {
                "users": len(rows["users"]),
                "sessions_added": len(sessions),
                "generated_qa_sessions_skipped": sum(r["generated_qa_session"] for r in sessions),
                "update_points": len(update_rows),
                "update_points_routed_to_integrity": len(rows["updates"]) - len(update_rows),
                "questions": len(rows["qa"]),
                "add_failures": sum(r["add_failures"] for r in sessions),
                "conflicts": {k: sum(r[f"n_{k}"] for r in sessions) for k in ("updated", "rejected", "flagged")},
            },
            "oracle_facts": self.oracle_facts,
            "update_links": (
                {**update_link_metrics(rows.get("update_links", [])), "held_similarity": self.link_held_similarity,
                 "new_similarity": self.link_new_similarity, "matched_by": "fact_id where an item has one (oracle runs), else its text"}
                if links else None
            ),  # fmt: skip
            "bootstrap": {"samples": n_boot, "seed": seed, "confidence": 0.95, "unit": "item", "cluster_unit": "user"},
            # tokens each search returned (median, p95; eval/tokens.py names the tokenizer), QA and update searches apart
            "returned_tokens": {"qa": token_summary(r.get("returned_tokens") for r in rows["qa"]),
                                "updates": token_summary(r.get("returned_tokens") for r in rows["updates"])},
            # failed LLM work: verdict rows retried by the next run of the same command; add failures the system reported
            "failures": {"rows": sum(failed(r) for name in SCORED_TABLES for r in rows.get(name, [])),
                         "ingest_turns": sum(int(r.get("add_failures") or 0) for r in sessions)},
            **({"clarify": clarify_metrics(self, rows, extraction_mode)} if self.clarify != "off" else {}),
            **({"mechanism": mechanism_metrics(rows["mechanism"], n_boot, seed, rows.get("qa"))} if rows.get("mechanism") else {}),
        }

    @staticmethod
    def make_table(metrics_list: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
        """Table 2 (eval.benchmarks.halumem.table); scripts/make_tables.py calls it. Retrieval-only runs: their own table."""
        if metrics_list and all(tuple(m.get("stages") or ()) == RETRIEVAL_STAGES for m in metrics_list):
            from eval.benchmarks.halumem.retrieval_table import retrieval_table

            return retrieval_table(metrics_list)
        return make_table(metrics_list, *args, **kwargs)

    # -- what eval/'s shared reporting asks of this benchmark (core.api's per-benchmark reporting Protocols) --------
    comparison = staticmethod(paired_comparison)  # scripts.compare_runs: eval/benchmarks/halumem/compare.py
    recompute_retrieval = staticmethod(recompute_retrieval)  # scripts.add_fields: retrieval_paired.py
    decomposition = staticmethod(decomposition_columns)  # results/tables/decomposition: decomposition.py
    # what of a run folder may be published (core.api.PublishesOwnCopy): HaluMem's data is CC BY-NC-ND 4.0, so rows
    # without dataset text and no saved memory (eval/benchmarks/halumem/public.py, docs/halumem.md "Publishing a run")
    publish_copy = staticmethod(publish_copy)
