"""The shared answerer and the LoCoMo judge against the real local LLM (0.5B, fast), and
LoCoMoBenchmark.run on a two-question slice with both reference systems and the real embedder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from baselines.full_context import FullContextMemory
from baselines.rag import RagMemory
from eval.answerer import Answerer
from eval.benchmarks.locomo import LoCoMoBenchmark
from eval.context import RunContext
from tests.hydra_config import conf_judge
from core.api import Retrieved

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DATA = next(
    (p for p in (REPO / "data" / "locomo10.json", Path(os.environ.get("LOCOMO_MIRROR", "/nonexistent")) / "locomo10.json") if p.is_file()),
    None,
)

MEMORIES = [
    Retrieved("Caroline: I went to a LGBTQ support group yesterday and it was so powerful.", 0.8, "2023-05-08T13:56:00", ["D1:3"]),
    Retrieved("Melanie: I painted that lake sunrise last year!", 0.4, "2023-05-08T13:56:00", ["D1:12"]),
]


def test_answerer_gives_a_short_answer_from_memories(small_llm):
    answerer = Answerer(small_llm, max_answer_tokens=32)
    out = answerer.answer("What did Melanie paint?", MEMORIES, question_time="2023-05-25T13:14:00")
    assert out["text"], out
    assert 0 < out["completion_tokens"] <= 32 and out["prompt_tokens"] > 50
    assert "sunrise" in out["text"].lower(), out["text"]
    assert small_llm.usage.by_purpose["answer"]["calls"] >= 1


def test_judge_grades_clear_cases(small_llm):
    judge = conf_judge(small_llm)  # the run's judge: conf/judge prompt, max_tokens, attempts
    same = judge.judge("What did Melanie paint?", "A sunrise", "a sunrise over a lake")
    assert same["label"] == "CORRECT", same
    other = judge.judge("What is the name of Ann's dog?", "Rex", "Her dog is called Bella")
    assert other["label"] == "WRONG", other  # a schema failure (None) on a clear case is a fault too
    assert small_llm.usage.by_purpose["judge"]["calls"] >= 2


@pytest.mark.skipif(DATA is None, reason="data/locomo10.json absent (python -m scripts.download_data)")
@pytest.mark.parametrize("system_cls", [RagMemory, FullContextMemory])
def test_locomo_run_on_a_tiny_slice(system_cls, small_llm, embedder, tmp_path):
    bench = LoCoMoBenchmark(path=str(DATA), conversations=[0], max_sessions=1, evidence_in_ingested_only=True, max_questions=2, bootstrap_samples=200)
    system = system_cls(llm=small_llm, embedder=embedder, workdir=str(tmp_path))
    ctx = RunContext(run_dir=tmp_path / "run", llm=small_llm, judge=conf_judge(small_llm), workers=1, embedder=embedder, answerer=Answerer(small_llm))
    metrics = bench.run(system, ctx)
    rows = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert metrics["overall"]["n"] == 2 and len(rows) == 2
    assert all(r["prediction"] and r["retrieved_turn_ids"] for r in rows)
    assert metrics["overall"]["judge"]["n"] + metrics["judge_failures"] == 2
    assert 0.0 <= metrics["overall"]["evidence_recall"]["mean"] <= 1.0
    assert metrics["ingest"]["n_turns"] == 18  # conv-26 session 1 has 18 turns
    table = LoCoMoBenchmark.make_table([metrics])
    assert table.loc[system.name, "overall n"] == 2
