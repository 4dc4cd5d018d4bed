"""LoCoMo's retrieval-only run (benchmark.stages=[ingest, retrieve]): no answerer or judge call, ranked ids stored,
metrics per category with category 5 apart, resumable, its own table; stage choices checked before any run."""

from __future__ import annotations

import json

import pytest

from core.config_check import ConfigKeyError
from eval.benchmarks.locomo import LoCoMoBenchmark
from eval.benchmarks.locomo.retrieval import is_retrieval_only
from eval.config_checks import problems
from eval.benchmarks.locomo.retrieval_table import retrieval_table
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
    # both intervals with their counts, and tokens returned per search (one tokenizer) with recall at a budget
    conversations = {r["sample_id"] for r in rows if r["category"] != 5 and r["evidence"]}
    assert turn["overall"]["n_clusters"] == len(conversations) == turn["overall"]["recall@2"]["n_clusters"]
    assert turn["overall"]["recall@2"]["cluster_ci_low"] is not None
    assert all(len(r["retrieved_tokens"]) == len(r["retrieved_ids"]) and r["returned_tokens"] == sum(r["retrieved_tokens"]) for r in rows)
    assert metrics["retrieval"]["returned_tokens"]["median"] > 0 and "tokenizer" in metrics["retrieval"]["returned_tokens"]
    budget = min(t for r in rows for t in r["retrieved_tokens"][:1])  # the shortest first item: a list cut to at most one item
    at_budget = bench(data, token_budgets=[budget]).run(make_system(tmp_path), make_ctx(tmp_path / "run", llm))["retrieval"]["evidence_recall_at_budget"]
    by_hand = [len(set(r["evidence"]) & (set(r["retrieved_ids"][0]) if r["retrieved_tokens"][0] <= budget else set())) / len(set(r["evidence"]))
               for r in rows if r["category"] != 5 and r["evidence"]]  # fmt: skip
    assert at_budget["overall"][str(budget)]["mean"] == pytest.approx(sum(by_hand) / len(by_hand))
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
    assert any("full_context retrieves everything it holds" in p for p in problems(cfg))  # its class says so (ranks_search)
    assert not any("stages" in p for p in problems(compose(["experiment=locomo_retrieval", "ablation=oracle_no_conflict"])))


def test_a_full_run_is_read_as_a_retrieval_row_from_its_own_predictions(tmp_path):
    """Whole-conversation runs with answers get retrieval rows without running again: recall@top_k from their
    predictions is the run's own evidence recall."""
    from eval.benchmarks.locomo.retrieval_table import from_full_run

    data = write(tmp_path, tiny_locomo())
    full = LoCoMoBenchmark(path=str(data), top_k=2, bootstrap_samples=100).run(make_system(tmp_path), make_ctx(tmp_path / "full", scripted_llm()))
    row = from_full_run({**full, "_path": str(tmp_path / "full" / "metrics.json"), "metadata": {"system": "rag", "ablation": "none"}})
    assert row["retrieval"]["ks"] == [1, 2] and row["retrieval_depth"] == 2  # k up to the run's top_k only
    recall = row["retrieval"]["turn"]["overall"]
    assert recall["recall@2"]["mean"] == pytest.approx(full["overall"]["evidence_recall"]["mean"]) and is_retrieval_only(row)
    assert "[from its full run, top 2]" in retrieval_table([row], k=1).iloc[0]["row"]


def test_retrieval_cells_resample_conversations_once_a_row_spans_five(tmp_path):
    """Questions of one conversation succeed together: from 5 conversations on, the recall cell and the paired
    difference show the conversation interval (wider here than the per-question one), and the row says so."""
    import json

    from eval.benchmarks.locomo.retrieval_table import _recall_stat, question_conversations, retrieval_table

    rows, base_rows = [], []
    for c in range(6):
        hit = c % 2 == 0  # whole conversations found or missed: a strong conversation effect
        for q in range(20):
            key = f"conv-{c}:q{q}"
            rows.append({"key": key, "sample_id": f"conv-{c}", "category": 1, "evidence": ["D1:1"],
                         "retrieved_ids": [["D1:1"]] if hit else [["D9:9"]]})
            base_rows.append({**rows[-1], "retrieved_ids": [["D1:1"]]})
    runs = []
    for name, (system, ablation), data in (("mosaic", ("mosaic", "oracle_extractor_no_conflict"), rows), ("base", ("rag", "oracle_facts"), base_rows)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "retrievals.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
        overall = {"recall@1": {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6}}
        runs.append({"_path": str(folder / "metrics.json"), "stages": ["ingest", "retrieve"],
                     "slice": {"questions_selected": 120, "conversations_selected": 6},
                     "retrieval": {"turn": {"overall": overall, "per_category": {"1": overall}}, "ndcg_k": 10},
                     "metadata": {"system": system, "ablation": ablation, "overrides": []}})
    stat = _recall_stat({r["key"]: (1, 1.0 if r["retrieved_ids"] == [["D1:1"]] else 0.0) for r in rows},
                        question_conversations(runs[0]), None, 1000, 0)
    assert stat["n_clusters"] == 6 and stat["cluster_ci_high"] - stat["cluster_ci_low"] > stat["ci_high"] - stat["ci_low"]
    table = retrieval_table(runs, k=1)
    mosaic = table[table["row"].str.contains("oracle_extractor_no_conflict")].iloc[0]
    assert mosaic["interval shown"].startswith("conversation bootstrap over 6 conversations")
    low, high = (float(x) for x in mosaic["overall (no cat. 5) recall@1"].split("[")[1].rstrip("]").split(","))
    assert (low, high) == (round(stat["cluster_ci_low"] * 100, 1), round(stat["cluster_ci_high"] * 100, 1))
