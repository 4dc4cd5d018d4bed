"""HaluMem mechanism metrics (eval/benchmarks/halumem/mechanism.py) and the gold labels the gold-judge study hands over,
on hand-written sessions (no HaluMem text)."""

from __future__ import annotations

from core.api import Retrieved
from eval.benchmarks.halumem.benchmark import oracle_facts
from eval.benchmarks.halumem.data import MemoryPoint, Question, Session
from eval.benchmarks.halumem.mechanism import evidence_recall, gold_replacements, mechanism_metrics, probe_session, successors
from tests.fakes import HashEmbedder


def _point(index: int, content: str, update_of: tuple[str, ...] = (), source: str = "secondary") -> MemoryPoint:
    return MemoryPoint(index, content, "Persona Memory", source, bool(update_of), update_of, "Jan 01, 2029, 10:00:00", 0.5)


def _session(points, questions=()) -> Session:
    return Session("Jan 01, 2029, 10:00:00", "Jan 01, 2029, 11:00:00", (), tuple(points), tuple(questions))


SESSIONS = (
    _session([_point(0, "Ana lives in Berlin."), _point(1, "Ana works as a nurse."), _point(2, "Ana likes opera.", source="interference")]),
    _session([_point(0, "Ana moved to Munich.", ("Ana lives in Berlin.",)), _point(1, "Ana likes opera.", ("Ana likes opera.",))]),
    _session([_point(0, "Ana moved to Hamburg.", ("Ana moved to Munich.",))],
             [Question("Where did Ana live first?", "Berlin", ("Ana lives in Berlin.",), "easy", "Basic Fact Recall")]),
)  # fmt: skip


def test_gold_replacements_follow_the_update_link_rule_over_earlier_non_interference_points():
    replaces = gold_replacements(SESSIONS, HashEmbedder().encode, 0.8)
    # an interference point is never held in an oracle run, so nothing replaces it
    assert replaces == {"1:p0": ("0:p0",), "1:p1": (), "2:p0": ("1:p0",)}
    assert successors(replaces) == {"0:p0": {"1:p0", "2:p0"}, "1:p0": {"2:p0"}}
    facts = oracle_facts(type("U", (), {"name": "Ana"})(), 2, SESSIONS[2], replaces)
    assert [(f.fact_id, f.replaces) for f in facts] == [("2:p0", ("1:p0",))]
    assert [f.replaces for f in oracle_facts(type("U", (), {"name": "Ana"})(), 2, SESSIONS[2])] == [()]  # not a gold-judge run


def test_chain_aware_recall_counts_a_replaced_fact_found_through_its_current_version():
    chain = successors({"1:p0": ("0:p0",), "2:p0": ("1:p0",)})
    assert evidence_recall(["0:p0"], ["2:p0"], chain, 2) == (0.0, 1.0)
    assert evidence_recall(["0:p0"], ["2:p0"], chain, 1) == (0.0, 0.0)  # the later version did not exist yet
    assert evidence_recall(["0:p0", "0:p1"], ["0:p1"], chain, 2) == (0.5, 0.5)


class ListedMemory:
    """Search returns fixed memory ids per query (ranks are what the metrics read)."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers

    def search(self, namespace: str, query: str, k: int) -> list[Retrieved]:
        return [Retrieved(text="", score=1.0, memory_id=m) for m in self.answers.get(query, [])[:k]]


def test_stale_leak_and_current_first_read_the_ranks_of_replaced_and_current_facts():
    replaces = {"1:p0": ("0:p0",), "1:p1": ()}
    fact_of = {"m-berlin": "0:p0", "m-munich": "1:p0", "m-nurse": "0:p1"}.get
    leaking = ListedMemory({"Ana moved to Munich.": ["m-munich", "m-berlin"], "Ana lives in Berlin.": ["m-berlin", "m-munich"]})
    clean = ListedMemory({"Ana moved to Munich.": ["m-munich", "m-nurse"], "Ana lives in Berlin.": ["m-munich", "m-nurse"]})
    rows = []
    for memory in (leaking, clean):
        row = probe_session(memory, "ns", 1, SESSIONS[1], replaces, {"0:p0", "0:p1"}, fact_of, lambda ev: [], 10, 20)
        rows.append(row)
    assert rows[0]["points"] == [{"index": 0, "replaced_held": 1, "stale_leak": True, "current_first": False}]
    assert rows[1]["points"] == [{"index": 0, "replaced_held": 1, "stale_leak": False, "current_first": True}]
    assert rows[0]["replaces"] == {"1:p0": ["0:p0"], "1:p1": []}
    totals = mechanism_metrics([{"uuid": "u", "session": 1, "key": f"u:{i}", **row} for i, row in enumerate(rows)], 50, 0)
    assert totals["linked_update_points"] == 2 and totals["stale_leak"]["mean"] == 0.5 and totals["current_first"]["mean"] == 0.5
    # a point whose replaced fact was never held is not linked
    assert probe_session(leaking, "ns", 1, SESSIONS[1], replaces, {"0:p1"}, fact_of, lambda ev: [], 10, 20)["points"] == []


def test_a_run_that_answers_questions_gets_chain_aware_recall_from_its_qa_rows():
    from eval.benchmarks.halumem.mechanism import chain_row

    replaces = gold_replacements(SESSIONS, HashEmbedder().encode, 0.8)
    rows = [{"key": f"u:{i}", "uuid": "u", "session": i, **chain_row(i, s, replaces)} for i, s in enumerate(SESSIONS)]
    qa = [{"uuid": "u", "session": 2, "evidence_fact_ids": ["0:p0"], "retrieved_fact_ids": ["2:p0"]},
          {"uuid": "u", "session": 2, "evidence_fact_ids": [], "retrieved_fact_ids": []}]  # no cited gold point: not counted
    totals = mechanism_metrics(rows, 50, 0, qa)
    assert totals["questions"] == 1 and totals["recall_from"] == "qa rows" and totals["linked_update_points"] == 0
    assert totals["evidence_recall_strict"]["mean"] == 0.0 and totals["evidence_recall_chain"]["mean"] == 1.0
