"""eval/benchmarks/halumem/decomposition.py: HaluMem's decomposition cells come from the rows' own runs on one data
slice (same file, same sessions, same scoring protocol), and say which."""

from __future__ import annotations

from eval.decomposition import decomposition_rows

HALUMEM = "eval.benchmarks.halumem.HaluMemBenchmark"  # the path runs made before the package split record


def _halumem(system: str, ablation: str, sessions: int, correct: float) -> dict:
    return {"metadata": {"system": system, "ablation": ablation, "overrides": [], "input_files": {"benchmark.path": "ab" * 32},
                         "benchmark_target": HALUMEM},
            "counts": {"questions": 2 * sessions, "sessions_added": sessions}, "failures": {"rows": 1, "ingest_turns": 0},
            "updating": {"correct": {"mean": correct}}, "qa": {"correct": {"mean": correct}}}  # fmt: skip


def test_halumem_columns_come_from_the_same_system_and_ablation():
    halumem = {"metadata": {"system": "mosaic", "ablation": "oracle_extractor", "overrides": [], "input_files": {"benchmark.path": "ab" * 32},
                            "benchmark_target": HALUMEM},
               "counts": {"questions": 55, "sessions_added": 25},
               "update_links": {"update_points": 62, "right": 3, "wrong": 2, "missed": 5, "no_target": 52, "false_alarms": 4, "non_update_points": 200},
               "updating": {"correct": {"mean": 0.5}, "hallucination": {"mean": 0.1}, "omission": {"mean": 0.4}},
               "qa": {"correct": {"mean": 0.6}, "hallucination": {"mean": 0.2}, "omission": {"mean": 0.2}}}  # fmt: skip
    rag_facts = {**halumem, "metadata": {**halumem["metadata"], "system": "rag", "ablation": "oracle_facts"}}
    del rag_facts["update_links"]
    rows = {r["row"]: r for r in decomposition_rows({"halumem": [halumem, rag_facts]})}
    assert rows["MOSAIC, oracle extractor"]["HaluMem update correct / halluc. / omission"] == "50.0 / 10.0 / 40.0"
    assert rows["MOSAIC, oracle extractor"]["HaluMem QA correct / halluc. / omission"] == "60.0 / 20.0 / 20.0"
    assert rows["rag over turns"]["HaluMem QA correct / halluc. / omission"] == ""
    assert rows["MOSAIC, oracle extractor"]["HaluMem data"] == "25 sessions, 55 q, file abababab, old protocol"  # which user, which protocol
    links = "HaluMem update links right / wrong / missed / no target; false alarms"
    # a run made before alarmed points were counted shows its events as events, not as points
    assert rows["MOSAIC, oracle extractor"][links] == "3 / 2 / 5 / 52 of 62; 4 events on 200 points (points not counted)"
    counted = {**halumem, "update_links": {**halumem["update_links"], "false_alarm_points": 3}}
    rows_counted = {r["row"]: r for r in decomposition_rows({"halumem": [counted, rag_facts]})}
    assert rows_counted["MOSAIC, oracle extractor"][links] == "3 / 2 / 5 / 52 of 62; 3 of 200"
    assert rows["rag over turns"][links] == ""  # no run
    assert rows["rag over oracle facts"][links] == "no check (append-only)"  # a run with no conflict check


def test_halumem_cells_pair_rows_over_the_same_sessions_only():
    """A session-limited run (10 sessions) used to sit beside whole-user runs (25 sessions) of the other rows."""
    runs = {"halumem": [_halumem("rag", "none", 25, 0.5), _halumem("rag", "oracle_facts", 25, 0.6),
                        _halumem("mosaic", "oracle_extractor", 25, 0.7), _halumem("mosaic", "none", 10, 0.2)]}  # fmt: skip
    rows = {r["row"]: r for r in decomposition_rows(runs)}
    assert {r["HaluMem data"] for name, r in rows.items() if name != "MOSAIC, model extractor"} == {"25 sessions, 50 q, file abababab, old protocol"}
    assert rows["MOSAIC, model extractor"]["HaluMem data"] == "" and rows["MOSAIC, model extractor"]["HaluMem QA correct / halluc. / omission"] == ""


def test_halumem_cells_pair_rows_scored_under_the_same_protocol_only():
    """An old-protocol update column (old plus new unmarked counted Correct) must not sit beside a re-scored one."""
    from eval.benchmarks.halumem.metrics import PROTOCOL

    fixed_rag, fixed_oracle = _halumem("rag", "none", 25, 0.1), _halumem("mosaic", "oracle_extractor", 25, 0.4)
    fixed_rag["protocol"] = fixed_oracle["protocol"] = PROTOCOL
    old = [_halumem("rag", "none", 25, 0.9), _halumem("mosaic", "oracle_extractor", 25, 0.95)]
    rows = {r["row"]: r for r in decomposition_rows({"halumem": [*old, fixed_rag, fixed_oracle]})}
    assert rows["rag over turns"]["HaluMem data"] == "25 sessions, 50 q, file abababab, fixed protocol"
    assert rows["rag over turns"]["HaluMem update correct / halluc. / omission"].startswith("10.0")
    assert rows["MOSAIC, oracle extractor"]["HaluMem update correct / halluc. / omission"].startswith("40.0")
    # more rows on the old protocol's slice: that slice is shown whole, the fixed rows are not mixed into it
    old.append(_halumem("rag", "oracle_facts", 25, 0.8))
    rows = {r["row"]: r for r in decomposition_rows({"halumem": [*old, fixed_rag, fixed_oracle]})}
    assert {r["HaluMem data"] for r in rows.values() if r["HaluMem data"]} == {"25 sessions, 50 q, file abababab, old protocol"}
    assert rows["rag over turns"]["HaluMem update correct / halluc. / omission"].startswith("90.0")
