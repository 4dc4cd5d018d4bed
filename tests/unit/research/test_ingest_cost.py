"""research/ingest_cost: the measured cost per ingested turn of a run, from the benchmark's per-session rows and
the per-turn log a slow system keeps (core/turn_costs.py), also for a run stopped inside its first session."""

from __future__ import annotations

import json

import pytest

from core.api import LLMUsage
from core.turn_costs import TurnCosts
from research.ingest_cost import ingest_cost, main


def test_a_run_stopped_in_its_first_session_reports_the_turns_its_system_logged(tmp_path, capsys):
    costs = TurnCosts(tmp_path / "system")
    costs.record("conv", "D1:1", 60.0, LLMUsage(calls=4, prompt_tokens=4000, completion_tokens=400), failures=0)
    costs.record("conv", "D1:2", 120.0, LLMUsage(calls=4, prompt_tokens=5000, completion_tokens=600), failures=1)
    costs.record("conv", "D1:1", 1.0, LLMUsage(calls=4, prompt_tokens=4000, completion_tokens=400, cached_calls=4))  # a resume's replay
    with (tmp_path / "system" / "turn_costs.jsonl").open("a") as handle:
        handle.write('{"namespace": "conv", "turn_id": "D1:3", "sec')  # torn by a kill
    report = main([str(tmp_path), "--out", str(tmp_path / "cost.json")])
    assert report["all"] is None and not report["finished"]
    turn = report["by_turn"]
    assert turn["turns"] == 2 and turn["seconds_per_turn"] == pytest.approx(90.0) and turn["calls_per_turn"] == 4
    assert turn["prompt_tokens_per_turn"] == 4500 and turn["cached_share"] == 0 and turn["failures"] == 1
    assert "| turns logged by the system | | 2 | 90.0 | 4.00, | 5,000 |" in capsys.readouterr().out
    assert json.loads((tmp_path / "cost.json").read_text())["by_turn"] == turn


def test_a_folder_with_neither_log_is_refused_by_name(tmp_path):
    with pytest.raises(SystemExit, match="ingest_sessions.jsonl is missing"):
        ingest_cost(tmp_path)
