"""HaluMem's retrieval-only run (benchmark.stages=[ingest, retrieve]): searches only, rows of ids without text,
evidence recall by fact id and by session, and the update-ranking outcomes, by hand on hand-made rows."""

from __future__ import annotations

import logging

import pytest

from baselines.rag import RagMemory
from eval.benchmarks.halumem.benchmark import HaluMemBenchmark
from eval.benchmarks.halumem.public import public_row, reaggregate
from eval.benchmarks.halumem.retrieval import _update_outcome
from eval.context import RunContext
from eval.rows import read_rows
from tests.fakes import FakeLLM, HashEmbedder
from tests.hydra_config import conf_judge
from tests.unit.eval.benchmarks.halumem.test_halumem import TINY, USER2, EchoAnswerer, _fixed_judge


def _update(current: str, replaced: list[str], facts: list, sessions: list) -> dict:
    return {"kind": "update", "current_fact_id": current, "replaced_fact_ids": replaced, "retrieved_fact_ids": facts,
            "retrieved_sessions": sessions}  # fmt: skip


def test_update_outcome_ranks_the_current_version_against_the_one_it_replaces():
    stale_first = _update("2:p1", ["0:p2"], ["0:p2", "2:p1"], [["0"], ["2"]])
    assert _update_outcome(stale_first, "fact") == {"current_returned": 1.0, "replaced_returned": 1.0, "current_first": 0.0}
    assert _update_outcome(stale_first, "session")["current_first"] == 0.0
    current_only = _update("2:p1", ["0:p2"], ["2:p1", None], [["2"], ["3"]])
    assert _update_outcome(current_only, "fact") == {"current_returned": 1.0, "replaced_returned": 0.0, "current_first": 1.0}
    assert _update_outcome(_update("2:p1", [], [], []), "fact") is None  # what it replaces is no gold point: unscored
    assert _update_outcome(_update("2:p1", ["2:p0"], [], []), "session") is None  # same session: a session cannot tell


def test_retrieval_only_run_makes_no_llm_call_and_publishes_without_text(tmp_path):
    llm = FakeLLM(_fixed_judge)
    system = RagMemory(llm=None, embedder=HashEmbedder(), workdir=str(tmp_path / "w"), name="rag", source="oracle")
    bench = HaluMemBenchmark(path=str(TINY), bootstrap_samples=50, oracle_facts=True, stages=["ingest", "retrieve"])
    ctx = RunContext(run_dir=tmp_path, llm=llm, judge=conf_judge(llm), workers=1, embedder=HashEmbedder(), answerer=EchoAnswerer(),
                     log=logging.getLogger("test"))  # fmt: skip
    metrics = bench.run(system, ctx)
    assert llm.requests == [] and metrics["counts"] == {"users": 2, "questions": 9, "update_points": 3}
    rows = {r["key"]: r for r in read_rows(tmp_path / "halumem_retrievals.jsonl")}
    move = rows[f"{USER2}:2:u1"]  # the move: its own text is searched, so the current fact comes first
    assert move["replaced_fact_ids"] == ["0:p2"] and move["retrieved_fact_ids"][0] == move["current_fact_id"]
    assert metrics["retrieval"]["fact_level"] and metrics["retrieval"]["fact"]["updates"]["current_first"]["mean"] == 1.0
    assert 0 <= metrics["retrieval"]["session"]["overall"]["recall@10"]["mean"] <= 1
    # the cluster is the user: both intervals with their counts; tokens per item kept (counts only) and summarised
    assert metrics["retrieval"]["session"]["overall"]["n_clusters"] == 2 == metrics["retrieval"]["fact"]["updates"]["current_first"]["n_clusters"]
    assert all(r["returned_tokens"] == sum(r["retrieved_tokens"]) for r in rows.values())
    assert metrics["retrieval"]["returned_tokens"]["qa"]["n"] == 9
    assert set(metrics["retrieval"]["fact"]["evidence_recall_at_budget"]) == {"250", "500", "1000", "2000"}
    assert "retrieved_tokens" in public_row("retrievals", move)
    again = bench.run(system, ctx)  # finished users are not searched again
    assert again["retrieval"] == metrics["retrieval"]
    assert all(len(str(v)) < 64 for row in rows.values() for v in public_row("retrievals", row).values() if isinstance(v, str))
    (tmp_path / "metrics.json").write_text(__import__("json").dumps({**metrics, "metadata": {}}))
    (tmp_path / "config.yaml").write_text(f"benchmark:\n  path: {TINY}\n  bootstrap_samples: 50\n  oracle_facts: true\n  stages: [ingest, retrieve]\n")
    assert reaggregate(tmp_path)["retrieval"] == metrics["retrieval"]


def test_halumem_stage_choices_are_checked_before_any_run():
    with pytest.raises(Exception, match="benchmark.stages"):
        HaluMemBenchmark(path=str(TINY), stages=["ingest"]).check_inputs()
