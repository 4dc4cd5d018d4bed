"""HaluMem end to end on the tiny fixture: the real local LLM (systems, answerer and judge),
the real embedder, the RAG baseline and MOSAIC. Checks the wiring, the counts the protocol
implies, that judges really ran, resumption without new LLM calls, and the table."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from eval.answerer import Answerer
from eval.benchmarks.halumem.benchmark import HaluMemBenchmark
from eval.benchmarks.halumem.data import load_halumem_jsonl
from eval.benchmarks.halumem.metrics import PROTOCOL
from eval.context import RunContext
from tests.hydra_config import conf_judge

pytestmark = pytest.mark.integration

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "halumem" / "halumem_tiny.jsonl"
CONF = Path(__file__).resolve().parents[2] / "conf"


def _system_from_config(name: str, llm: Any, embedder: Any, workdir: Path) -> Any:
    """Build the system as the runner does, from conf/system/<name>.yaml (an import error fails the test)."""
    cfg = OmegaConf.create({"seed": 0, "system": OmegaConf.load(CONF / "system" / f"{name}.yaml")})
    return instantiate(cfg.system, llm=llm, embedder=embedder, workdir=str(workdir), _convert_="all")


def _expected_counts(limit_users: int | None) -> dict[str, int]:
    users = load_halumem_jsonl(TINY)[:limit_users]
    scored = [s for u in users for s in u.sessions if not s.is_generated_qa_session]
    return {
        "users": len(users),
        "sessions": sum(len(u.sessions) for u in users),
        "generated": sum(s.is_generated_qa_session for u in users for s in u.sessions),
        "updates": sum(p.is_searched_update for s in scored for p in s.memory_points),
        "integrity": sum(not p.is_searched_update for s in scored for p in s.memory_points),
        "interference": sum(p.is_interference for s in scored for p in s.memory_points),
        "questions": sum(len(s.questions) for s in scored),
    }


def _check_metric(metric: dict[str, Any] | None, scored: bool) -> None:
    """A share over items the fixture has (``scored``) must exist (not be skipped as None), lie in [0, 1] and sit
    in its CI; a share over no items must be None, never a 0 that reads as a score."""
    assert metric is not None
    if not scored:
        assert metric["mean"] is None, metric
        return
    assert metric["mean"] is not None and metric["n"] > 0, metric
    assert 0.0 <= metric["mean"] <= 1.0
    assert metric["ci_low"] <= metric["mean"] + 1e-9 and metric["mean"] <= metric["ci_high"] + 1e-9


def _run_and_check(system: Any, llm: Any, run_dir: Path, limit_users: int | None) -> dict[str, Any]:
    bench = HaluMemBenchmark(path=str(TINY), limit_users=limit_users, bootstrap_samples=200)
    ctx = RunContext(run_dir=run_dir, llm=llm, judge=conf_judge(llm), workers=1, embedder=None, answerer=Answerer(llm), log=logging.getLogger("test"))
    before = llm.usage
    metrics = bench.run(system, ctx)
    expected = _expected_counts(limit_users)

    counts = metrics["counts"]
    assert counts["users"] == expected["users"]
    assert counts["sessions_added"] == expected["sessions"]
    assert counts["generated_qa_sessions_skipped"] == expected["generated"]
    assert counts["update_points"] == expected["updates"] and counts["questions"] == expected["questions"]

    extraction = metrics["extraction"]
    assert metrics["extraction_source"] == "inspect" and extraction is not None
    assert extraction["counts"]["gold_points"] + extraction["counts"]["interference_points"] == expected["integrity"]
    assert extraction["counts"]["interference_points"] == expected["interference"]
    session_rows = [r for r in ctx.rows("halumem_sessions").rows() if not r["generated_qa_session"]]
    assert extraction["counts"]["stored_memories"] == sum(r["n_stored"] for r in session_rows)
    assert extraction["counts"]["stored_memories"] > 0, "the system stored nothing from the fixture"
    counts = extraction["counts"]
    for name in ("recall", "weighted_recall"):
        _check_metric(extraction[name], scored=counts["gold_points"] > 0)
    _check_metric(extraction["accuracy"], scored=counts["stored_memories"] > 0)
    for name in ("target_precision", "f1"):  # over the stored memories the judge matched to gold points
        _check_metric(extraction[name], scored=counts["target_memories"] > 0)
    _check_metric(extraction["false_memory_resistance"], scored=expected["interference"] > 0)
    for name in ("correct", "hallucination", "omission", "other"):
        _check_metric(metrics["updating"][name], scored=expected["updates"] > 0)
    shares = [metrics["qa"][name]["mean"] for name in ("correct", "hallucination", "omission")]
    assert math.isclose(sum(shares) + metrics["qa"]["judge_failures"] / metrics["qa"]["n"], 1.0)

    # the judge really ran: one call per judged item at least (more when retried)
    spent = llm.usage
    judge_calls = spent.by_purpose.get("judge", {}).get("calls", 0) - before.by_purpose.get("judge", {}).get("calls", 0)
    integrity_rows = ctx.rows("halumem_integrity").rows()
    judged_integrity = sum(r["n_stored"] > 0 for r in integrity_rows)
    judged_updates = sum(bool(r["returned"]) for r in ctx.rows("halumem_updates").rows())
    assert judge_calls >= judged_integrity + extraction["counts"]["stored_memories"] + judged_updates + expected["questions"]
    answers = spent.by_purpose.get("answer", {}).get("calls", 0) - before.by_purpose.get("answer", {}).get("calls", 0)
    assert answers == expected["questions"]

    # resuming a finished run costs no LLM call and gives the same numbers
    calls_after_first = llm.usage.calls
    again = bench.run(system, ctx)
    assert llm.usage.calls == calls_after_first
    assert again["qa"] == metrics["qa"] and again["extraction"] == metrics["extraction"]

    metrics["metadata"] = {"system": system.name, "llm_model_id": llm.model_id}
    table = HaluMemBenchmark.make_table([metrics])
    assert metrics["protocol"] == PROTOCOL  # a new run is scored under the audited protocol, and its column says so
    column = f"{system.name} (HaluMem-{metrics['variant']}, {llm.model_id}; fixed protocol)"
    assert table.loc["QA correct", column] != "-" and table.loc["Extraction F1", column] != "-"
    return metrics


def test_rag_runs_the_whole_fixture(small_llm, embedder, tmp_path):
    system = _system_from_config("rag", small_llm, embedder, tmp_path / "rag")
    _run_and_check(system, small_llm, tmp_path / "run", limit_users=None)


def test_mosaic_runs_the_fixture(small_llm, embedder, tmp_path):
    """First user (both sessions: interference, an update, all six question types); MOSAIC
    calls the LLM per turn, so the whole fixture would take too long on 2 CPU cores."""
    system = _system_from_config("mosaic", small_llm, embedder, tmp_path / "mosaic")
    metrics = _run_and_check(system, small_llm, tmp_path / "run", limit_users=1)
    assert set(metrics["by_question_type"]) == {
        "Basic Fact Recall", "Memory Boundary", "Dynamic Update", "Multi-hop Inference", "Memory Conflict", "Generalization & Application",
    }
