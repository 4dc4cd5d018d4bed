"""eval.mechanism_counts: the system that recorded its mechanism counts flattens them (core.api.SummarisesMechanisms),
found from the run's record; a system that declares no summary gets no row, whatever it recorded."""

from __future__ import annotations

import json
from typing import Any

from eval.mechanism_counts import mechanism_markdown, mechanisms


class CountsItsSteps:
    @staticmethod
    def mechanism_row(mechanisms: dict[str, Any]) -> dict[str, Any]:
        return {"steps": mechanisms["steps"]["total"], "share": mechanisms["steps"]["done"] / mechanisms["steps"]["total"]}


class SaysNothing:
    pass


def _run(tmp_path, name: str, target: str, system_metrics: dict[str, Any]):
    run = tmp_path / name
    run.mkdir()
    meta = {"system": name, "system_target": target}
    (run / "metrics.json").write_text(json.dumps({"metadata": meta, "system_metrics": system_metrics}))
    return run


def test_the_recorded_system_class_flattens_its_own_counts(tmp_path):
    run = _run(tmp_path, "stepper", f"{__name__}.CountsItsSteps", {"mechanisms": {"steps": {"total": 4, "done": 1}}})
    assert mechanisms(run) == {"steps": 4, "share": 0.25}
    assert mechanism_markdown({"a": mechanisms(run)}) == "| row | steps | share |\n|---|---|---|\n| a | 4 | 0.25 |"


def test_no_row_without_counts_or_without_a_summarising_class(tmp_path):
    assert mechanisms(_run(tmp_path, "quiet", f"{__name__}.CountsItsSteps", {})) is None
    assert mechanisms(_run(tmp_path, "plain", f"{__name__}.SaysNothing", {"mechanisms": {"steps": {"total": 1}}})) is None
    assert mechanism_markdown({}) == ""


def test_mosaic_runs_are_summarised_by_mosaic_from_its_config_name(tmp_path):
    """A record without the class path (runs before it was recorded) is read through conf/system/<name>.yaml."""
    counts = {"entities": {"active": 2}, "conflict_events": {"update": 1}, "leiden_reruns": 0,
              "retrieval": {"candidates_scanned": {"mean": 3.0}, "lsh_confident_hits": 1, "llm_routing_fallbacks": 0},
              "ncs": {"full_refreshes": 1, "drift_measurements": 0, "max_abs_score_drift": None}}  # fmt: skip
    run = _run(tmp_path, "mosaic", "", {"mechanisms": counts})
    row = mechanisms(run)
    assert row is not None and row["entities_active"] == 2 and row["events_update"] == 1 and row["turn_matches"] == 0
