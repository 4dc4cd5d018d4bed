"""research.gpu_projection: the table sizes it counts and the token arithmetic it projects (no LLM, no GPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from research.gpu_projection import Rate, ServedRun, halumem_size, locomo_ingested_turns, project, seconds_per_token

REPO = Path(__file__).resolve().parents[3]
LOCOMO = REPO / "data" / "locomo10.json"


@pytest.mark.skipif(not LOCOMO.is_file(), reason="data/locomo10.json missing")
def test_counts_the_quickstart_slice_and_the_whole_file():
    assert locomo_ingested_turns(LOCOMO, [0], 3) == 58  # the quickstart: conv-26, first 3 sessions
    assert locomo_ingested_turns(LOCOMO, ["conv-26"], None) == 419
    assert locomo_ingested_turns(LOCOMO, None, None) == 5882


def test_halumem_size_counts_users_messages_and_questions():
    assert halumem_size(REPO / "tests" / "fixtures" / "halumem" / "halumem_tiny.jsonl") == (2, 18, 9)


def test_projection_is_turns_times_write_plus_questions_times_read():
    rates = {
        "sys": {"per_turn": Rate(100, 10), "per_question": Rate(50, 5), "per_case": Rate(7, 1), "context_turns": 10},
        "full_context": {"per_turn": Rate(0, 0), "per_question": Rate(1000, 5), "context_turns": 10},
    }
    out = project(rates, locomo=(1000, 20), halumem=(1, 300, 4), conflict_cases=3, locomo_turns_per_conv=100)
    assert out["sys"]["locomo"] == Rate(100 * 1000 + 50 * 20, 10 * 1000 + 5 * 20)
    assert out["sys"]["halumem"] == Rate(100 * 300 + 50 * 4, 10 * 300 + 5 * 4)
    assert out["sys"]["conflict"] == Rate(21, 3)
    # full_context reads the whole conversation per question: its prompt scales with the conversation's length
    assert out["full_context"]["locomo"] == Rate(1000 * 10 * 20, 5 * 20) and out["full_context"]["conflict"] is None


def test_two_cited_runs_give_one_cost_per_prompt_and_per_completion_token():
    reading = ServedRun("prompt heavy", prompt=1000, completion=100, seconds=1000 / 100 + 100 / 10)  # 100 prompt, 10 completion tok/s
    writing = ServedRun("completion heavy", prompt=100, completion=1000, seconds=100 / 100 + 1000 / 10)
    per_prompt, per_completion = seconds_per_token(reading, writing)
    assert per_prompt == pytest.approx(1 / 100) and per_completion == pytest.approx(1 / 10)
    with pytest.raises(ValueError, match="alike"):
        seconds_per_token(reading, ServedRun("same mix", 2000, 200, 1.0))
    assert ServedRun.parse("a:b profile:10:20:3.5") == ServedRun("a:b profile", 10, 20, 3.5)
