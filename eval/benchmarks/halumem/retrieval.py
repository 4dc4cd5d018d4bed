"""HaluMem's retrieval-only run (``benchmark.stages=[ingest, retrieve]``): each user's sessions are added in order
and, right after each session, its questions and its update points are searched as the full run searches them
(``qa_k``, ``update_k`` results), with no answerer and no judge. Rows (``halumem_retrievals.jsonl``) keep ids only,
no text: the gold fact ids of each question's evidence, the fact id (oracle rows) and session of each retrieved
item, and for an update point its own fact id and those of the memories it replaces.

Measured (eval/retrieval_metrics.py, no LLM):

* question evidence recall@k, any-hit@k, NDCG: by fact id for rows whose items carry a gold fact id (oracle rows),
  and at session level for every row (an item's session: its fact id's or its source turn's ``<session>:...``);
* update ranking, per gold update point (searched with its own content; the versions it replaces: the earlier gold
  points within ``link_held_similarity`` cosine of its original memories): is the current version (the point itself)
  returned, is the version it replaces returned at all, and does the current one rank above it (``current_first``;
  at session level for rows that store turns: the point's session against the replaced memory's earlier session).

Why: whether a memory finds the evidence, and keeps the current version of an updated fact ahead of the stale one,
needs no model; an oracle row ingests with no LLM call, so both HaluMem users are measured whole in minutes.
A user with any row missing is replayed from its first session (searches are cheap; the written rows are kept).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from core.api import Inspectable, MemorySystem, Retrieved, Turn
from eval.benchmarks.halumem.data import HaluMemUser, halumem_time_to_iso
from eval.benchmarks.halumem.update_links import fact_id_of
from eval.context import RunContext
from eval.budget import items_within_budget
from eval.intervals import report_settings
from eval.metrics import bootstrap_ci
from eval.retrieval_metrics import by_group, metric_names, question_scores, summarise
from eval.tokens import returned_token_fields, token_summary

RETRIEVAL_STAGES = ("ingest", "retrieve")


def session_of_id(item_id: str) -> str:
    """HaluMem's session of a fact id (``3:p5``) or of a turn id (``3:12:user``): ``3``."""
    return str(item_id).split(":", 1)[0]


def _turns(user: HaluMemUser, s_idx: int, oracle: tuple[Any, ...] | None) -> list[Turn]:
    """The session's dialogue as the full run adds it (benchmark.py ``_run_user``), gold points on the last turn."""
    session = user.sessions[s_idx]
    turns = [Turn(turn_id=f"{s_idx}:{t.dialogue_turn}:{t.role}", speaker=user.name if t.role == "user" else t.role, text=t.content,
                  session_time=halumem_time_to_iso(t.timestamp or session.start_time)) for t in session.dialogue]  # fmt: skip
    if oracle and turns:
        turns[-1] = dataclasses.replace(turns[-1], oracle_facts=oracle)
    return turns


def replaced_fact_ids(originals: list[str], earlier: list[tuple[str, str]], encode: Any, threshold: float) -> list[str]:
    """The earlier gold points (fact id, text) an update replaces: those whose cosine with one of its original memories
    reaches ``threshold`` (benchmark.link_held_similarity, the update links' rule for "the memory it replaces");
    HaluMem's original memories restate earlier points in other words, so exact text finds few of them."""
    if not originals or not earlier:
        return []
    sims = np.asarray(encode(originals)) @ np.asarray(encode([text for _, text in earlier])).T
    return [fact_id for (fact_id, _), hit in zip(earlier, (sims >= threshold).any(axis=0)) if hit]


def _ranked(retrieved: list[Retrieved], by_memory: dict[str, str]) -> dict[str, Any]:
    """Per rank: the item's gold fact id (None when it has none), its sessions and its tokens (eval/tokens.py: one
    tokenizer for every system; counts only, no text)."""
    facts = [by_memory.get(item.memory_id or "") for item in retrieved]
    sessions = [sorted({session_of_id(f)} if f else {session_of_id(t) for t in item.source_turn_ids}) for f, item in zip(facts, retrieved)]
    return {"retrieved_fact_ids": facts, "retrieved_sessions": sessions, **returned_token_fields([item.text for item in retrieved])}


def run_halumem_retrieval(bench: Any, system: MemorySystem, ctx: RunContext) -> dict[str, Any]:
    """Add, then search every question and update point of every session; the metrics dict."""
    from eval.benchmarks.halumem.benchmark import evidence_fact_ids, oracle_facts  # the full run's own rules, one place

    users = bench.load(ctx)
    rows, done_users = ctx.rows("halumem_retrievals"), ctx.rows("halumem_users")
    for user in users:
        if user.uuid in done_users:
            continue
        namespace = f"halumem-{user.uuid}"
        system.reset(namespace)
        sessions = user.sessions if bench.limit_sessions is None else user.sessions[: bench.limit_sessions]
        gold_ids: dict[str, list[tuple[int, str]]] = {}
        for i, sess in enumerate(user.sessions):
            for p in sess.memory_points:
                gold_ids.setdefault(p.content, []).append((i, fact_id_of(i, p)))
        ctx.log.info("halumem user %s: %d sessions (retrieval only)", user.uuid, len(sessions))
        for s_idx, session in enumerate(tqdm(sessions, desc=f"halumem user {user.uuid[:8]} (add, search)", unit="session")):
            oracle = oracle_facts(user, s_idx, session) if bench.oracle_facts else None
            system.add(namespace, _turns(user, s_idx, oracle), session_time=halumem_time_to_iso(session.start_time))
            if session.is_generated_qa_session:
                continue
            by_memory = ({item.memory_id: item.fact_id for item in system.stored_items(namespace) if item.fact_id}
                         if isinstance(system, Inspectable) else {})  # fmt: skip
            for point in session.memory_points:
                if not point.is_searched_update:
                    continue
                key = f"{user.uuid}:{s_idx}:u{point.index}"
                found = system.search(namespace, point.content, bench.update_k)
                if key not in rows:
                    earlier = [(fact_id_of(i, p), p.content) for i, sess in enumerate(user.sessions[:s_idx])
                               for p in sess.memory_points if not p.is_interference]  # fmt: skip
                    replaced = replaced_fact_ids(list(point.original_memories), earlier, ctx.embedder.encode, bench.link_held_similarity)
                    rows.append({"key": key, "uuid": user.uuid, "session": s_idx, "kind": "update", "memory_type": point.memory_type,
                                 "current_fact_id": fact_id_of(s_idx, point), "replaced_fact_ids": replaced,
                                 "n_original_memories": len(point.original_memories), **_ranked(found, by_memory)})  # fmt: skip
            for q_idx, question in enumerate(session.questions):
                key = f"{user.uuid}:{s_idx}:q{q_idx}"
                found = system.search(namespace, question.question, bench.qa_k)
                if key not in rows:
                    rows.append({"key": key, "uuid": user.uuid, "session": s_idx, "kind": "qa", "question_type": question.question_type,
                                 "n_evidence": len(question.evidence), "evidence_fact_ids": evidence_fact_ids(list(question.evidence), gold_ids, s_idx),
                                 **_ranked(found, by_memory)})  # fmt: skip
        done_users.append({"key": user.uuid, "sessions": len(sessions)})
    order = {user.uuid: i for i, user in enumerate(users)}
    kept = sorted(rows.rows(), key=lambda r: order.get(r["uuid"], len(order)))
    return aggregate_retrieval(bench, kept, len(done_users.rows()), getattr(system, "name", type(system).__name__))


def aggregate_retrieval(bench: Any, kept: list[dict[str, Any]], n_users: int, system_name: str) -> dict[str, Any]:
    """The metrics dict of a retrieval-only run from its rows (the run, and public.reaggregate on published rows)."""
    return {
        "benchmark": bench.name,
        "variant": bench.variant_label,
        "user_file": Path(bench.path).name if bench.path else None,
        "system": system_name,
        "stages": list(RETRIEVAL_STAGES),
        "oracle_facts": bench.oracle_facts,
        "main_metric": None,
        "retrieval": retrieval_metrics(kept, sorted({k for k in (1, 5, 10, bench.qa_k) if k <= bench.qa_k}), bench.bootstrap_samples, bench.seed),
        "counts": {"users": n_users, "questions": sum(r["kind"] == "qa" for r in kept),
                   "update_points": sum(r["kind"] == "update" for r in kept)},  # fmt: skip
        "failures": {"rows": 0, "ingest_turns": 0},
    }


def _update_outcome(row: dict[str, Any], level: str) -> dict[str, float] | None:
    """current_returned, replaced_returned and current_first of one update point, by fact id or by session; None
    when the level cannot tell the versions apart (no gold id for the replaced memory, or both in one session)."""
    replaced = set(row["replaced_fact_ids"])
    if not replaced:
        return None
    if level == "fact":
        ranks = row["retrieved_fact_ids"]
        current, stale = (lambda f: f == row["current_fact_id"]), (lambda f: f in replaced)
    else:
        current_session = session_of_id(row["current_fact_id"])
        stale_sessions = {session_of_id(f) for f in replaced} - {current_session}
        if not stale_sessions:
            return None
        ranks = row["retrieved_sessions"]
        current, stale = (lambda s: current_session in s), (lambda s: bool(stale_sessions & set(s)))
    first_current = next((i for i, r in enumerate(ranks) if r is not None and current(r)), None)
    first_stale = next((i for i, r in enumerate(ranks) if r is not None and stale(r)), None)
    return {"current_returned": float(first_current is not None), "replaced_returned": float(first_stale is not None),
            "current_first": float(first_current is not None and (first_stale is None or first_current < first_stale))}  # fmt: skip


def _recall_within(gold: set[str], items: list[set[str]], item_tokens: list[int], budget: int) -> float:
    """Evidence recall of the list cut where its tokens reach ``budget`` (eval/budget.py's cut)."""
    kept = items[: items_within_budget(item_tokens, budget)]
    return len(gold & set().union(*kept)) / len(gold) if kept else 0.0


def retrieval_metrics(rows: list[dict[str, Any]], ks: list[int], n_samples: int, seed: int, token_budgets: list[int] | None = None) -> dict[str, Any]:
    """Question evidence recall (fact level where items carry fact ids; session level) overall and per question type,
    and the update-ranking outcomes (fact and session level), each mean with its per-item interval and the one over
    users then items within them (``n_clusters``: a run of one user holds for that user only); tokens returned per
    search and, for rows that record them, QA evidence recall at each token budget (conf/report.yaml's by default)."""
    budgets = [int(b) for b in (report_settings()["token_budgets"] if token_budgets is None else token_budgets)]
    names = metric_names(ks, 10)
    qa = [r for r in rows if r["kind"] == "qa"]
    fact_level = any(f is not None for r in rows for f in r["retrieved_fact_ids"])
    with_tokens = all(r.get("retrieved_tokens") is not None for r in rows)
    out: dict[str, Any] = {"ks": ks, "ndcg_k": 10, "fact_level": fact_level, "clusters": "user", "users": sorted({str(r["uuid"]) for r in rows}),
                           "questions_without_evidence_ids": sum(not r["evidence_fact_ids"] for r in qa)}  # fmt: skip
    if with_tokens:
        out["returned_tokens"] = {"qa": token_summary(r["returned_tokens"] for r in qa),
                                  "updates": token_summary(r["returned_tokens"] for r in rows if r["kind"] == "update")}  # fmt: skip
    levels = {"session": (lambda ids: {session_of_id(i) for i in ids}, lambda r: [set(s) for s in r["retrieved_sessions"]])}
    if fact_level:
        levels["fact"] = (set, lambda r: [{f} if f else set() for f in r["retrieved_fact_ids"]])
    for level, (gold_of, items_of) in levels.items():
        scored, users, budget_rows = [], [], []
        for r in qa:
            s = question_scores(gold_of(r["evidence_fact_ids"]), items_of(r), ks, 10)
            if s is not None:
                scored.append((r["question_type"], s))
                users.append(str(r["uuid"]))
                budget_rows.append(r)
        out[level] = {"overall": summarise([s for _, s in scored], names, n_samples, seed, users),
                      "per_question_type": by_group(scored, names, n_samples, seed, users)}  # fmt: skip
        if with_tokens and budgets:
            out[level]["evidence_recall_at_budget"] = {
                str(b): bootstrap_ci([_recall_within(gold_of(r["evidence_fact_ids"]), items_of(r), r["retrieved_tokens"], b) for r in budget_rows],
                                     n_samples, seed, clusters=users)
                for b in budgets}  # fmt: skip
        outcomes, update_users = [], []
        for r in rows:
            if r["kind"] == "update" and (o := _update_outcome(r, level)) is not None:
                outcomes.append(o)
                update_users.append(str(r["uuid"]))
        out[level]["updates"] = {"n": len(outcomes), "n_clusters": len(set(update_users)),
                                 **{name: bootstrap_ci([o[name] for o in outcomes], n_samples, seed, clusters=update_users)
                                    for name in ("current_returned", "replaced_returned", "current_first")}}  # fmt: skip
    return out
