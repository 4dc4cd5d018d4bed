"""eval/benchmarks/conflict/compare.py: suite runs paired by case (detection, false alarms) and their cost per probe."""

from __future__ import annotations

import pytest

from eval.benchmarks.conflict.compare import compare_conflict, write_cost
from tests.run_folders import conflict_run


def test_conflict_runs_compare_detection_and_false_alarms(tmp_path):
    runs = {name: conflict_run(tmp_path, name, hits) for name, hits in (("base", (True, False, False)), ("other", (True, True, True)))}
    result = compare_conflict(runs["base"], runs["other"], n_samples=200)
    assert result["detected"]["mean"] == pytest.approx(0.5) and result["detected"]["n"] == 2
    assert result["false_alarm"]["mean"] == pytest.approx(1.0) and result["false_alarm"]["n"] == 1
    cost = write_cost(runs["other"])
    assert cost["unit"] == "probe" and cost["calls_per_turn"] == pytest.approx(4 / 3) and cost["tokens_per_turn"] is None
