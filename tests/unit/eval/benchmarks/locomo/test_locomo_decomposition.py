"""eval/benchmarks/locomo/decomposition.py: LoCoMo's decomposition rows are picked by (system, ablation) per slice,
never mixed across slices."""

from __future__ import annotations

from eval.decomposition import decomposition_rows

LOCOMO = "eval.benchmarks.locomo.LoCoMoBenchmark"
SLICES = {"quick": {"conversations_selected": 1, "questions_selected": 20}, "conv-26": {"conversations_selected": 1, "questions_selected": 152}}


def run(system: str, ablation: str, judge: float, n: int = 20, overrides: list[str] | None = None, slice_name: str = "quick") -> dict:
    return {"metadata": {"system": system, "ablation": ablation, "overrides": overrides or [], "benchmark_target": LOCOMO},
            "slice": SLICES[slice_name], "overall": {"n": n, "judge": {"mean": judge, "ci_low": judge, "ci_high": judge}, "f1": {"mean": 0.1}}}  # fmt: skip


def test_rows_are_picked_by_system_and_ablation_per_slice():
    runs = {"locomo": [run("rag", "none", 0.3), run("mosaic", "oracle_extractor", 0.7), run("mosaic", "none", 0.25),
                       run("mosaic", "none", 0.9, overrides=["system.conflict.k=1"]),  # a sweep point is not the row
                       run("rag", "none", 0.4, n=152, slice_name="conv-26")]}  # fmt: skip
    rows = decomposition_rows(runs)
    assert [r["LoCoMo slice"] for r in rows] == ["1 conv, 152 q"] * 4 + ["1 conv, 20 q"] * 4
    quick = {r["row"]: r for r in rows[4:]}
    assert quick["rag over turns"]["LoCoMo judge"].startswith("30.0")
    assert quick["MOSAIC, model extractor"]["LoCoMo judge"].startswith("25.0")  # not the k=1 sweep run's 90.0
    assert quick["MOSAIC, oracle extractor"]["LoCoMo judge"].startswith("70.0")
    assert quick["rag over oracle facts"]["LoCoMo judge"] == ""  # no run: an empty cell, never a made-up one
    assert rows[0]["LoCoMo judge"].startswith("40.0") and rows[1]["LoCoMo judge"] == ""
