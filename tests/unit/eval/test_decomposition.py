"""eval/decomposition.py: the configured rows (conf/report.yaml), one block per group of a benchmark that groups
them, each benchmark's cells asked of the class its runs record, and the failures column naming each benchmark."""

from __future__ import annotations

import pytest

from eval.decomposition import decomposition_rows, decomposition_table, rows

LOCOMO = "eval.benchmarks.locomo.LoCoMoBenchmark"
HALUMEM = "eval.benchmarks.halumem.HaluMemBenchmark"  # the path runs made before the package split record
SLICES = {"quick": {"conversations_selected": 1, "questions_selected": 20}, "conv-26": {"conversations_selected": 1, "questions_selected": 152}}


def run(system: str, ablation: str, judge: float, n: int = 20, overrides: list[str] | None = None, slice_name: str = "quick") -> dict:
    return {"metadata": {"system": system, "ablation": ablation, "overrides": overrides or [], "benchmark_target": LOCOMO},
            "slice": SLICES[slice_name], "overall": {"n": n, "judge": {"mean": judge, "ci_low": judge, "ci_high": judge}, "f1": {"mean": 0.1}}}  # fmt: skip


def _halumem(system: str, ablation: str, sessions: int, correct: float) -> dict:
    return {"metadata": {"system": system, "ablation": ablation, "overrides": [], "input_files": {"benchmark.path": "ab" * 32},
                         "benchmark_target": HALUMEM},
            "counts": {"questions": 2 * sessions, "sessions_added": sessions}, "failures": {"rows": 1, "ingest_turns": 0},
            "updating": {"correct": {"mean": correct}}, "qa": {"correct": {"mean": correct}}}  # fmt: skip


def test_the_rows_are_the_configured_ones_in_their_order():
    from eval.intervals import report_settings

    configured = report_settings()["decomposition"]["rows"]
    table = decomposition_rows({"locomo": [run("x", "none", 0.3)]})
    assert [r["row"] for r in table] == [r["label"] for r in configured] == [name for _, name in rows()]
    assert all(r["LoCoMo judge"] == "" for r in table)  # a system that is no row fills none


def test_a_grouping_benchmark_repeats_the_rows_and_the_others_fill_each_block():
    runs = {"locomo": [run("rag", "none", 0.3), run("rag", "none", 0.4, slice_name="conv-26")], "halumem": [_halumem("rag", "none", 25, 0.5)]}
    table = decomposition_rows(runs)
    assert len(table) == 2 * len(rows())
    first = [r for r in table if r["row"] == "rag over turns"]
    assert [r["LoCoMo judge"][:4] for r in first] == ["40.0", "30.0"]
    assert first[0]["HaluMem data"] == first[1]["HaluMem data"] != ""  # the same HaluMem run in every block


def test_failures_column_names_each_benchmark():
    lo = run("rag", "none", 0.3)
    lo["failures"] = {"rows": 0, "ingest_turns": 2}
    rows = {r["row"]: r for r in decomposition_rows({"locomo": [lo], "halumem": [_halumem("rag", "none", 25, 0.5)]})}
    assert rows["rag over turns"]["failures (rows / ingest turns)"] == "LoCoMo 0 / 2; HaluMem 1 / 0"


def test_the_caption_carries_each_benchmark_note_and_a_benchmark_without_columns_is_refused(monkeypatch):
    table = decomposition_table({"locomo": [run("rag", "none", 0.3)], "halumem": [_halumem("rag", "none", 25, 0.5)]})
    assert table.attrs["caption"].startswith("Extractor or organisation?") and "HaluMem cells come from one data slice" in table.attrs["caption"]
    import eval.decomposition as decomposition

    settings = {**decomposition._settings(), "benchmarks": ["eval.benchmarks.conflict.ConflictBenchmark"]}
    monkeypatch.setattr(decomposition, "_settings", lambda: settings)
    with pytest.raises(TypeError, match="declares no decomposition columns"):
        decomposition_rows({"locomo": [run("rag", "none", 0.3)]})
