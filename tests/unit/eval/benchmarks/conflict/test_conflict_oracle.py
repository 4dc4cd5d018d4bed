"""Conflict suites in the oracle studies: each turn is its own gold fact, and a probe names its labelled partners for
the gold judge (eval/benchmarks/conflict/benchmark.py ``oracle_facts`` / ``oracle_conflicts``). Hand-written suite."""

from __future__ import annotations

from functools import partial

import pytest

from eval.benchmarks.conflict import ConflictBenchmark
from eval.benchmarks.conflict.benchmark import as_own_fact
from eval.benchmarks.conflict.suite import parse_suite
from mosaic.conflict import ConflictDetector
from mosaic.extract import EntityExtractor
from mosaic.memory import MosaicMemory
from mosaic.retrieval import Retriever
from tests.fakes import FakeLLM
from tests.unit.mosaic.test_conflict import HashEmbedder

SUITE = parse_suite({
    "name": "garden", "description": "hand-written", "split": "dev",
    "contexts": {"plot": [{"speaker": "Mara", "text": "The allotment gate is locked at 8pm."},
                          {"speaker": "Mara", "text": "Members water their beds before 9am in summer."}]},
    "cases": [{"id": "g1", "context": "plot", "probe": {"speaker": "Tom", "text": "Members must water their beds after 6pm in summer."},
               "conflict": True, "type": "semantic", "explicit": True, "conflicts_with": [1]}],
})  # fmt: skip


def test_a_turn_becomes_its_own_fact_and_a_probe_names_its_partners():
    turn = as_own_fact(SUITE.probe_turn(SUITE.cases[0]), replaces=tuple(sorted(SUITE.gold_turn_ids(SUITE.cases[0]))))
    [fact] = turn.oracle_facts
    assert (fact.fact_id, fact.text, fact.source_turn_ids, fact.replaces) == ("probe:g1", turn.text, ("probe:g1",), ("plot:1",))


def test_the_gold_judge_detects_the_labelled_partner_with_no_llm_call(tmp_path):
    llm = FakeLLM(lambda m, s: (_ for _ in ()).throw(AssertionError("no LLM call expected")))
    memory = MosaicMemory(retry=None, llm=llm, embedder=HashEmbedder(), workdir=tmp_path, persist=False,
                          extract=partial(EntityExtractor, source="oracle"), conflict=partial(ConflictDetector, source="gold"),
                          retrieval=partial(Retriever, mode="exact"))  # fmt: skip
    memory.seed("ns", [as_own_fact(t) for t in SUITE.context_turns("plot", "2024-01-01")], "2024-01-01")
    case = SUITE.cases[0]
    report = memory.add("ns", [as_own_fact(SUITE.probe_turn(case, "2024-02-01"), tuple(SUITE.gold_turn_ids(case)))], "2024-02-01")
    assert [e.old_source_turn_ids for e in report.updated] == [["plot:1"]] and llm.requests == []


def test_gold_partners_need_oracle_facts(tmp_path):
    with pytest.raises(ValueError, match="oracle_facts"):
        ConflictBenchmark(suite="data/conflicts/household_finance.json", oracle_conflicts=True)


def test_gold_judge_rows_stay_out_of_the_headline_view():
    from eval.benchmarks.conflict.table import headline_table

    run = {"suite": "garden", "detection_rate": {"mean": 1.0}, "metadata": {"system": "mosaic", "ablation": "oracle_judge"}}
    assert headline_table([{**run, "oracle_conflicts": True}]).empty
    assert len(headline_table([run])) == 1
