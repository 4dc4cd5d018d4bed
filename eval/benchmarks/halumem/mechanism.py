"""Metrics that see the save-time mechanism on HaluMem: stale leak, current-first, chain-aware evidence recall.

HaluMem's own scores cannot tell a memory that retires what an update replaced from one that keeps both, and
evidence recall even punishes retiring: questions often cite the very memory an update replaced. These metrics
read gold fact ids only (an oracle run's items carry them: ``StoredItem.fact_id``), so they need no judge and no
LLM call, and they mean the same for every system that lists its memories.

* The gold chain: update point U replaces the earlier gold points its ``original_memories`` name, by the same rule
  as the update links (update_links.py: cosine >= ``link_held_similarity`` with the run's embedder), over the
  non-interference points of earlier sessions (what an oracle run can hold). ``gold_replacements`` computes it;
  the gold-judge study hands the same map to the system (``OracleFact.replaces``).
* stale leak: over linked update points (a replaced fact was held before U's session), the share whose search for
  U's own content (``update_k`` results) still returns a replaced fact.
* current-first: over the same points, the share where U's own fact ranks above every replaced fact in the search
  for the replaced memory's own text (its first linked original memory); a fact not returned ranks last, and a
  point where neither comes back does not count as current-first.
* evidence recall per question (questions whose evidence names a gold point): strict, the share of cited facts
  returned in the ``qa_k`` results; chain-aware, a cited fact also counts as found when a fact that replaces it,
  directly or down the chain (up to the question's session), is returned.

Rows (``halumem_mechanism.jsonl``, one per session) hold keys, ids and booleans only; ``probe_session`` makes the
searches (the retrieval-only mode, ``benchmark.mechanism_probes``), and ``mechanism_metrics`` totals them with
bootstrap CIs over points and questions.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from core.api import MemorySystem
from eval.benchmarks.halumem.data import Session
from eval.benchmarks.halumem.update_links import Encode, fact_id_of
from eval.metrics import bootstrap_ci

Replacements = dict[str, tuple[str, ...]]  # update point's fact id -> the earlier gold fact ids it replaces


def gold_replacements(sessions: Sequence[Session], encode: Encode, held_similarity: float) -> Replacements:
    """Every searched update point's replaced gold facts, by the update-link rule (module docstring)."""
    gold = [(s_idx, p) for s_idx, session in enumerate(sessions) for p in session.memory_points if not p.is_interference]
    updates = [(s_idx, p) for s_idx, p in gold if p.is_searched_update]
    if not updates:
        return {}
    held = np.asarray(encode([p.content for _, p in gold]))  # every text encoded once
    originals = [text for _, p in updates for text in p.original_memories]
    sims = np.asarray(encode(originals)) @ held.T
    out: Replacements = {}
    row = 0
    for s_idx, point in updates:
        earlier = np.asarray([s < s_idx for s, _ in gold])  # non-interference points of the sessions before
        hit = (sims[row:row + len(point.original_memories)] >= held_similarity).any(axis=0) & earlier
        row += len(point.original_memories)
        if earlier.any():  # a point with nothing before it has no entry (nothing could be held)
            out[fact_id_of(s_idx, point)] = tuple(fact_id_of(*gold[i]) for i in np.flatnonzero(hit))
    return out


def successors(replaces: Replacements) -> dict[str, set[str]]:
    """Each replaced fact id -> the facts that replace it, directly or down the chain."""
    direct: dict[str, set[str]] = {}
    for new, olds in replaces.items():
        for old in olds:
            direct.setdefault(old, set()).add(new)
    closed: dict[str, set[str]] = {}
    for start in direct:
        seen, todo = set(), list(direct[start])
        while todo:
            fact = todo.pop()
            if fact not in seen:
                seen.add(fact)
                todo += direct.get(fact, ())
        closed[start] = seen
    return closed


def _session_of(fact_id: str) -> int:
    return int(fact_id.split(":", 1)[0])


def evidence_recall(evidence: Sequence[str], retrieved: Sequence[str], chain: dict[str, set[str]], s_idx: int) -> tuple[float, float]:
    """(strict, chain-aware) share of a question's cited facts that came back (module docstring)."""
    got = set(retrieved)
    strict = sum(fact in got for fact in evidence)
    aware = sum(fact in got or any(_session_of(n) <= s_idx and n in got for n in chain.get(fact, ())) for fact in evidence)
    return strict / len(evidence), aware / len(evidence)


def _rank(ids: list[str], wanted: set[str]) -> float:
    return next((i for i, fact in enumerate(ids) if fact in wanted), float("inf"))


def probe_session(
    system: MemorySystem, namespace: str, s_idx: int, session: Session, replaces: Replacements, held_before: set[str],
    fact_of: Callable[[str | None], str | None], question_evidence: Callable[[Sequence[str]], list[str]], update_k: int, qa_k: int,
) -> dict[str, Any]:
    """The session's mechanism searches, after its add: one per linked update point and its first linked original,
    one per question. ``held_before``: gold fact ids held before the session; ``fact_of``: a returned memory id's fact
    id (None for an item with none); ``question_evidence``: a question's evidence texts -> their gold fact ids."""

    def search(query: str, k: int) -> list[str]:
        return [fact for fact in (fact_of(item.memory_id) for item in system.search(namespace, query, k)) if fact]

    points = []
    for point in session.memory_points:
        fact_id = fact_id_of(s_idx, point)
        replaced = set(replaces.get(fact_id, ())) & held_before
        if point.is_interference or not point.is_searched_update or not replaced:
            continue
        leak = bool(replaced & set(search(point.content, update_k)))
        # the first original memory that names a held replaced fact is that fact's own query
        ids = search(point.original_memories[0], update_k)
        first = _rank(ids, {fact_id}) < _rank(ids, replaced)
        points.append({"index": point.index, "replaced_held": len(replaced), "stale_leak": leak, "current_first": first})
    questions = []
    for q_idx, question in enumerate(session.questions):
        evidence = question_evidence(question.evidence)
        if evidence:
            questions.append({"q": q_idx, "evidence_fact_ids": evidence, "retrieved_fact_ids": search(question.question, qa_k)})
    return {"points": points, "questions": questions, **chain_row(s_idx, session, replaces)}


def chain_row(s_idx: int, session: Session, replaces: Replacements) -> dict[str, Any]:
    """The session's part of the gold chain (its update points' replaced ids), as a row field."""
    return {"replaces": {fact_id_of(s_idx, p): list(replaces[fact_id_of(s_idx, p)]) for p in session.memory_points if fact_id_of(s_idx, p) in replaces}}


def mechanism_metrics(rows: list[dict[str, Any]], n_boot: int, seed: int, qa_rows: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Totals over session rows (``probe_session``'s or ``chain_row``'s, with ``uuid`` and ``session``): rates with
    bootstrap CIs over points and questions; each user's gold chain is rebuilt from the ``replaces`` its rows carry.
    Without probe questions, evidence recall is read from the answered questions' rows (``qa_rows``: their
    ``evidence_fact_ids`` and ``retrieved_fact_ids``, the same top-``qa_k`` search)."""
    points = [p for row in rows for p in row.get("points", [])]
    chains: dict[str, dict[str, set[str]]] = {}
    for uuid in {row["uuid"] for row in rows}:
        chains[uuid] = successors({new: tuple(olds) for row in rows if row["uuid"] == uuid for new, olds in row.get("replaces", {}).items()})
    recalls = [evidence_recall(q["evidence_fact_ids"], q["retrieved_fact_ids"], chains[row["uuid"]], int(row["session"]))
               for row in rows for q in row.get("questions", [])]  # fmt: skip
    source = "probes"
    if not recalls and qa_rows:
        source = "qa rows"
        recalls = [evidence_recall(q["evidence_fact_ids"], q.get("retrieved_fact_ids", []), chains.get(q["uuid"], {}), int(q["session"]))
                   for q in qa_rows if q.get("evidence_fact_ids") and q.get("uuid") in chains]  # fmt: skip

    def rate(values: list[float]) -> dict[str, Any]:
        return {**bootstrap_ci(values, n_boot, seed), "n": len(values)}

    return {
        "linked_update_points": len(points),
        "stale_leak": rate([float(p["stale_leak"]) for p in points]),
        "current_first": rate([float(p["current_first"]) for p in points]),
        "evidence_recall_strict": rate([s for s, _ in recalls]),
        "evidence_recall_chain": rate([c for _, c in recalls]),
        "questions": len(recalls),
        **({"recall_from": source} if source != "probes" else {}),  # probe runs published before this key lack it
    }
