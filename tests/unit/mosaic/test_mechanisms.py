"""MOSAIC at conversation scale, with a scripted LLM: the mechanism counts in ``metrics()``, the turn index
and the experiments each row composes. (What provenance retrieval shows: test_search_hits.py.)"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from mosaic.memory import MosaicMemory
from mosaic.retrieval import Retriever
from tests.fakes import FakeLLM
from tests.unit.mosaic.test_memory import _add, _memory, responder
from tests.unit.mosaic.test_graph import BowEmbedder
from tests.unit.mosaic.test_search_hits import _matching_memory


def test_mechanism_counts_follow_the_write_and_read_paths(tmp_path):
    mem, _, _ = _memory(tmp_path, verdict="update")
    _add(mem, "c", "D1:1", "I have two dogs.", when="2023-05-08")
    _add(mem, "c", "D1:2", "I work as a nurse.", when="2023-05-08")
    _add(mem, "c", "D2:1", "We have three dogs now.", when="2023-06-01")
    _add(mem, "c", "D2:2", "Maybe we have four dogs?", when="2023-06-01")  # hedged: the gate queues it
    mem.search("c", "How many dogs?", 2)
    mem.search("c", "What is Ana's job?", 2)
    counts = mem.metrics()["mechanisms"]
    assert counts["entities"] == {"active": 2, "flagged": 0, "superseded": 1, "queued": 1, "rejected": 0, "turns_kept": 4}
    assert counts["conflict_events"] == {"update": 1, "reject": 0, "flag": 0}
    scans = counts["retrieval"]["candidates_scanned"]
    assert counts["retrieval"]["mode"] == "exact" and counts["retrieval"]["queries"] == 2
    assert scans == {"queries": 2, "mean": 2.0, "p95": 2, "max": 2}  # a flat index scans every active entity
    assert counts["ncs"]["writes"] == 3 and counts["ncs"]["full_refreshes"] >= 1 and counts["ncs"]["drift_measurements"] == 0
    assert counts["leiden_reruns"] >= 1


def test_rejected_and_flagged_are_counted(tmp_path):
    for verdict, held in (("reject", {"active": 2, "flagged": 0, "rejected": 1}), ("flag", {"active": 1, "flagged": 2, "rejected": 0})):
        mem, _, _ = _memory(tmp_path / verdict, verdict=verdict)
        _add(mem, "c", "D1:1", "I have two dogs.", when="2023-05-08")
        _add(mem, "c", "D1:2", "I work as a nurse.", when="2023-05-08")
        _add(mem, "c", "D2:1", "We have three dogs now.", when="2023-06-01")
        counts = mem.metrics()["mechanisms"]
        assert {k: counts["entities"][k] for k in held} == held
        assert counts["conflict_events"][verdict] == 1


def test_dual_path_counts_scans_hits_and_fallbacks():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(4, 32))
    vectors = np.concatenate([c + 0.05 * rng.normal(size=(50, 32)) for c in centres])
    labels = np.repeat(np.arange(4), 50)
    retriever = Retriever(mode="dual", top_k=5, lsh_tables=4, lsh_bits=4, min_candidates=10)
    retriever.build([f"e{i}" for i in range(200)], vectors, labels)
    for q in range(20):
        retriever.search(centres[q % 4] + 0.05 * rng.normal(size=32))
    assert sum(retriever.scan_histogram.values()) == 20
    assert sum(v * c for v, c in retriever.scan_histogram.items()) == retriever.stats["candidates_scanned"]
    assert retriever.stats["lsh_hits"] + retriever.stats["fallbacks"] == 20
    assert retriever.stats["lsh_hits"] > 0 and max(retriever.scan_histogram) < 200  # confident queries scan one community


def test_ncs_drift_measurements_are_reported(tmp_path):
    mem, _, _ = _memory(tmp_path, verdict=None)
    # the third, said in an earlier session than the first, is flagged beside it (not newer), so three nodes stay active
    for i, (text, when) in enumerate([("I have two dogs.", "2023-05-08"), ("I work as a nurse.", "2023-05-08"), ("We have three dogs now.", "2023-04-01")]):
        _add(mem, "c", f"D1:{i}", text, when=when)
    assert mem.metrics()["mechanisms"]["ncs"]["drift_measurements"] == 0
    space = mem._space("c")
    scorer = space.scorer
    assert len(scorer.scores()) >= 3
    scorer.refresh(space.graph)  # the estimate is now exact: a drift measurement must find nothing
    scorer.refresh(space.graph, measure_drift=True)  # what the periodic refresh does every refresh_every writes
    ncs = mem.metrics()["mechanisms"]["ncs"]
    assert ncs["drift_measurements"] == 1 and ncs["max_abs_score_drift"] == pytest.approx(0.0, abs=1e-6)
    assert ncs["min_top10_agreement"] == 1.0
    # an estimate that has drifted: one node's PageRank ten times too high (as a stale push would leave it)
    exact = scorer.scores()
    stale = min(exact, key=exact.get)
    scorer._pagerank[stale] *= 10.0
    scorer._pagerank_max = max(scorer._pagerank.values())
    drifted = scorer.scores()
    expected = max(abs(drifted[e] - exact[e]) for e in exact)
    assert expected > 1e-3  # far above the power iteration's tolerance
    scorer.refresh(space.graph, measure_drift=True)
    assert scorer.scores() == pytest.approx(exact, abs=1e-6)  # the refresh repaired the estimate
    ncs = mem.metrics()["mechanisms"]["ncs"]
    assert ncs["drift_measurements"] == 2
    assert ncs["max_abs_score_drift"] == pytest.approx(expected, abs=1e-6)  # the drift reported is the drift there was
    ranked = lambda scores: set(sorted(scores, key=scores.get, reverse=True)[:10])  # noqa: E731
    assert ncs["min_top10_agreement"] == len(ranked(drifted) & ranked(exact)) / min(10, len(exact))


def test_whole_conversation_experiments_compose_for_each_row():
    from eval.runner import validate
    from tests.hydra_config import compose_config

    rows = {("locomo_conv26", "system=mosaic"): ("mosaic", "none", False),
            ("locomo_conv26", "system=rag"): ("rag", "none", None),
            ("locomo_conv26", "ablation=with_source_turns"): ("mosaic", "with_source_turns", True),
            ("locomo_conv49", "ablation=with_source_turns"): ("mosaic", "with_source_turns", True),
            ("locomo_conv26", "ablation=turn_matching"): ("mosaic", "turn_matching", True),
            ("locomo_conv49", "ablation=turn_matching"): ("mosaic", "turn_matching", True)}
    for (experiment, override), (system, ablation, provenance) in rows.items():
        cfg = compose_config([f"experiment={experiment}", override])
        validate(cfg)
        assert (cfg.system.name, cfg.ablation_name) == (system, ablation)
        assert cfg.system.get("retrieval", {}).get("with_source_turns") == provenance
        assert cfg.system.get("retrieval", {}).get("match_source_turns") == (True if ablation == "turn_matching" else None if system == "rag" else False)
        assert list(cfg.benchmark.conversations) == [experiment.replace("locomo_conv", "conv-")]
        assert cfg.benchmark.max_sessions is None and list(cfg.benchmark.exclude_categories) == [5]


def test_conflict_check_costs_are_counted(tmp_path):
    """``conflict_checks`` sums the real detector's counters over namespaces: checks run and how they ended."""
    from mosaic.conflict import ConflictDetector

    mem = MosaicMemory(retry=None, llm=FakeLLM(responder), embedder=BowEmbedder(), workdir=tmp_path,
                       retrieval=partial(Retriever, mode="exact", top_k=5),
                       conflict=lambda llm: ConflictDetector(llm, use_llm=False))  # fmt: skip
    for space in ("a", "b"):
        _add(mem, space, "D1:1", "I have two dogs.", when="2023-05-08")
        _add(mem, space, "D1:2", "I work as a nurse.", when="2023-05-08")
    checks = mem.metrics()["mechanisms"]["conflict_checks"]
    detectors = [s.detector for s in mem._spaces.values()]
    assert len(detectors) == 2 and checks["checks"] == sum(d.stats["checks"] for d in detectors) >= 4
    assert checks["llm_calls"] == 0 and checks["no_candidates"] >= 2  # each namespace's first fact has nothing to check against


def test_turn_index_adds_each_turn_once_and_ranks_by_cosine():
    from mosaic.retrieval import TurnIndex

    index, calls = TurnIndex(), []

    def encode(texts):
        calls.append(list(texts))
        return BowEmbedder().encode(texts)

    assert index.search(np.ones(BowEmbedder().dim), 3) == []
    assert index.extend({"D1:1": "Ana: I work as a nurse.", "D1:2": "Ana: I have two dogs."}, encode) == 2
    assert index.extend({"D1:1": "Ana: I work as a nurse.", "D1:3": "Bo: I sing."}, encode) == 1
    assert calls == [["Ana: I work as a nurse.", "Ana: I have two dogs."], ["Bo: I sing."]] and len(index) == 3
    hits = index.search(BowEmbedder().encode(["two dogs"])[0], 2)
    assert hits[0][0] == "D1:2" and hits[0][1] > hits[1][1] and len(hits) == 2


def test_retrieval_probe_reports_each_variant_against_the_runs_settings(tmp_path):
    import json

    from omegaconf import OmegaConf

    from research.retrieval_probe import probe, to_markdown
    from tests.hydra_config import compose_config

    run = tmp_path / "run"
    writer = _matching_memory(run / "system", False)
    _add(writer, "locomo:conv-x", "D1:1", "I have two dogs.")
    _add(writer, "locomo:conv-x", "D1:2", "I work as a nurse.")
    cfg = compose_config(["system=mosaic", "benchmark.top_k=1", "system.retrieval.mode=exact"])
    OmegaConf.save(cfg, run / "config.yaml")
    with open(run / "predictions.jsonl", "w") as rows:
        for n, (question, evidence) in enumerate((("has i work", ["D1:2"]), ("two dogs", ["D1:1"]), ("no gold", [])), 1):
            rows.write(json.dumps({"key": f"conv-x:q{n}", "sample_id": "conv-x", "question": question, "evidence": evidence}) + "\n")
    (run / "metrics.json").write_text(json.dumps({"overall": {"evidence_recall": {"mean": 0.5}}}))
    result = probe(run, {"baseline": [], "turns": ["retrieval.match_source_turns=true"]}, embedder=BowEmbedder())
    assert result["n_questions"] == 2 and result["top_k"] == 1 and result["recorded_evidence_recall"] == 0.5
    assert result["per_question"]["turns"] == {"conv-x:q1": 1.0, "conv-x:q2": 1.0}
    # "has" is in the entity "Ana has 2 dogs"; "i work" only in the nurse entity's turn
    assert result["per_question"]["baseline"] == {"conv-x:q1": 0.0, "conv-x:q2": 1.0}
    turns = result["variants"]["turns"]
    assert turns["evidence_recall"] == 100.0 and turns["minus_baseline"]["mean"] == 50.0 and turns["turn_matches"] >= 1 and "minus_baseline" in turns
    assert "minus_baseline" not in result["variants"]["baseline"] and "| turns | retrieval.match_source_turns=true | 100.0 |" in to_markdown(result)


def test_counts_stay_whole_across_restores_and_resets(tmp_path):
    """The conflict experiment restores a snapshot before every probe, which replaces the namespace object:
    the process's totals keep every probe's work, count the snapshot's turns once, and leave out the rebuild
    that loading a snapshot makes (before, metrics() saw the last probe alone, plus the context again)."""
    mem, _, _ = _memory(tmp_path, verdict="update")
    _add(mem, "ctx", "D1:1", "I have two dogs.")
    _add(mem, "ctx", "D1:2", "I work as a nurse.")
    snap = mem.snapshot("ctx")
    leiden_after_context = mem.metrics()["mechanisms"]["leiden_reruns"]
    for probe in range(3):
        mem.restore("ctx", snap)
        _add(mem, "ctx", f"P{probe}", "We have three dogs now.", when="2023-06-01")
        mem.search("ctx", "How many dogs?", 2)
    metrics = mem.metrics()
    counts = metrics["mechanisms"]
    assert mem.cost_per_turn()["turns"] == 2 + 3
    assert mem.cost_per_turn()["by_purpose_per_turn"]["extraction"]["calls"] == 1.0
    assert counts["ncs"]["writes"] == 2 + 3  # no write counted for the three rebuilds on restore
    assert counts["retrieval"]["queries"] == 3 == metrics["retriever"]["queries"]
    assert counts["retrieval"]["candidates_scanned"]["queries"] == 3
    assert counts["leiden_reruns"] >= leiden_after_context and counts["conflict_events"]["update"] == 3
    assert counts["entities"]["superseded"] == 1  # state: the live memory only (the last probe's)
    mem.reset("ctx")
    assert mem.cost_per_turn()["turns"] == 5 and mem.cost_per_turn("ctx")["turns"] == 0
    assert mem.metrics()["mechanisms"]["ncs"]["writes"] == 5 and mem.metrics()["mechanisms"]["entities"]["active"] == 0
