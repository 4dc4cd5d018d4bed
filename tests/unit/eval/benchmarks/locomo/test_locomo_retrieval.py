"""LoCoMo's retrieval-only run (benchmark.stages=[ingest, retrieve]): no answerer or judge call, ranked ids stored,
metrics per category with category 5 apart, resumable, its own table; stage choices checked before any run."""

from __future__ import annotations

import json

import pytest

from core.config_check import ConfigKeyError
from eval.benchmarks.locomo import LoCoMoBenchmark
from eval.benchmarks.locomo.retrieval import is_retrieval_only
from eval.config_checks import problems
from eval.retrieval_table import retrieval_table
from tests.hydra_config import compose_config as compose
from tests.unit.eval.benchmarks.locomo.test_locomo import make_ctx, make_system, read_keys, scripted_llm, tiny_locomo, write


def bench(path, **kw) -> LoCoMoBenchmark:
    return LoCoMoBenchmark(path=str(path), stages=["ingest", "retrieve"], exclude_categories=[], retrieval_ks=[1, 2], ndcg_k=2,
                           bootstrap_samples=100, **kw)  # fmt: skip


def test_retrieval_only_run_asks_no_llm_and_scores_every_question_with_evidence(tmp_path):
    data = write(tmp_path, tiny_locomo())
    llm = scripted_llm()
    metrics = bench(data).run(make_system(tmp_path), make_ctx(tmp_path / "run", llm))
    assert llm.requests == []  # no answer, no judgement
    assert not (tmp_path / "run" / "predictions.jsonl").exists()
    rows = [json.loads(line) for line in (tmp_path / "run" / "retrievals.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and all(len(r["retrieved_ids"]) <= 2 for r in rows)
    turn = metrics["retrieval"]["turn"]
    assert is_retrieval_only(metrics) and set(turn["per_category"]) == {"1", "2", "3", "4", "5"}
    assert turn["overall"]["n"] == 7  # category 5 apart, out of overall
    # recall@2 over the stored ranked ids, by hand (categories 1-4)
    hand = [len(set(r["evidence"]) & {i for item in r["retrieved_ids"][:2] for i in item}) / len(set(r["evidence"]))
            for r in rows if r["category"] != 5]
    assert turn["overall"]["recall@2"]["mean"] == pytest.approx(sum(hand) / len(hand))
    assert metrics["retrieval"]["session"]["overall"]["recall@2"]["mean"] >= turn["overall"]["recall@2"]["mean"]
    table = retrieval_table([{**metrics, "metadata": {"system": "rag", "ablation": "none", "overrides": []}}], k=2)
    assert table.iloc[0]["row"] == "rag [retrieval only]" and "overall (no cat. 5) recall@2" in table.columns


def test_retrieval_only_run_resumes_without_searching_finished_conversations_again(tmp_path):
    data = write(tmp_path, tiny_locomo())
    first = bench(data).run(make_system(tmp_path), make_ctx(tmp_path / "run", scripted_llm()))
    system = make_system(tmp_path)
    again = bench(data).run(system, make_ctx(tmp_path / "run", scripted_llm()))
    assert system.resets == [] and again["retrieval"] == first["retrieval"]
    assert len(read_keys(tmp_path / "run" / "retrievals.jsonl")) == 8


def test_stage_choices_and_unranked_systems_fail_before_any_run(tmp_path):
    with pytest.raises(ConfigKeyError, match="benchmark.stages"):
        LoCoMoBenchmark(stages=["ingest", "judge"])
    with pytest.raises(ConfigKeyError, match="benchmark.retrieval_ks"):
        LoCoMoBenchmark(stages=["ingest", "retrieve"], retrieval_ks=[0])
    cfg = compose(["experiment=locomo_retrieval", "system=full_context"])
    assert any("full_context retrieves every turn" in p for p in problems(cfg))
    assert not any("stages" in p for p in problems(compose(["experiment=locomo_retrieval", "ablation=oracle_no_conflict"])))


def test_a_full_run_is_read_as_a_retrieval_row_from_its_own_predictions(tmp_path):
    """Whole-conversation runs with answers get retrieval rows without running again: recall@top_k from their
    predictions is the run's own evidence recall."""
    from eval.retrieval_table import from_full_run

    data = write(tmp_path, tiny_locomo())
    full = LoCoMoBenchmark(path=str(data), top_k=2, bootstrap_samples=100).run(make_system(tmp_path), make_ctx(tmp_path / "full", scripted_llm()))
    row = from_full_run({**full, "_path": str(tmp_path / "full" / "metrics.json"), "metadata": {"system": "rag", "ablation": "none"}})
    assert row["retrieval"]["ks"] == [1, 2] and row["retrieval_depth"] == 2  # k up to the run's top_k only
    recall = row["retrieval"]["turn"]["overall"]
    assert recall["recall@2"]["mean"] == pytest.approx(full["overall"]["evidence_recall"]["mean"]) and is_retrieval_only(row)
    assert "[from its full run, top 2]" in retrieval_table([row], k=1).iloc[0]["row"]
