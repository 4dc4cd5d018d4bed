"""research/bench_theory.py's quick mode runs end to end and its numbers obey what they check."""

from __future__ import annotations

import json
import math

import pytest

from tests.script_loader import load_script


@pytest.mark.slow
def test_quick_mode_writes_theory_json_and_plots(tmp_path):
    module = load_script("bench_theory", package="research")
    module.main(["--quick", "--out", str(tmp_path)])
    results = json.loads((tmp_path / "theory.json").read_text())
    summary = results["coverage"]["summary"]["all"]
    assert summary["instances"] == 10 and results["coverage"]["bound"] == pytest.approx(1 - 1 / math.e)
    for row in results["coverage"]["instances"]:  # nothing beats the exhaustive optimum
        assert max(row["greedy"], row["random"], row["top_entropy"]) <= row["optimum"] + 1e-9
    assert summary["worst_greedy_ratio"] == min(r["greedy_ratio"] for r in results["coverage"]["instances"])
    for row in results["ncs_rounds"]:
        assert row["max_push_rounds"] >= 1 and row["L"] >= row["depth"]
    assert [r["n_nodes"] for r in results["ncs_cost"]][0] < [r["n_nodes"] for r in results["ncs_cost"]][-1]
    assert (tmp_path / "theory_coverage.png").stat().st_size > 0 and (tmp_path / "theory_ncs.png").stat().st_size > 0


def test_greedy_coverage_instance_by_hand_budget_one():
    module = load_script("bench_theory", package="research")
    import random

    row = module.coverage_instance(random.Random(3), "slots", n_entities=12, budget=1)
    assert row is None or row["greedy"] == pytest.approx(row["optimum"])  # with b = 1 greedy is exact
