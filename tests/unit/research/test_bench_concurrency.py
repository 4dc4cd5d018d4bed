"""research/bench_concurrency.py's notes: a system short of the target gets the arithmetic of its CPU bound, from
the rows it measured (hand-made rows here, shaped as the bench writes them)."""

from __future__ import annotations

from research.bench_concurrency import cpu_notes, summarise


def row(system: str, workers: int, wall_s: float, cpu_s: float, load: float = 6.4) -> dict:
    return {"system": system, "workers": workers, "wall_s": wall_s, "llm_calls": 96, "harness_cpu_s": cpu_s,
            "harness_cpu_ms_per_call": round(1000 * cpu_s / 96, 1), "peak_in_flight": workers,
            "load_average_before": [load, 6.0, 6.0], "outcomes_digest": "same"}


def test_a_system_short_of_the_target_gets_its_cpu_arithmetic_and_one_that_meets_it_gets_none():
    rows = [row("slow", 1, 64.0, 8.0), row("slow", 16, 12.8, 8.0),  # 5.0x at 16: target wall 64 / 12.8 = 5 s
            row("fast", 1, 64.0, 0.5), row("fast", 16, 4.0, 0.5)]  # 16x at 16
    table = {"summary": summarise(rows), "cpus": 2, "niceness": 15}
    bound = table["summary"]["slow"]["cpu_bound"]
    assert bound["target_wall_s"] == 5.0 and bound["cpus_needed"] == 1.6 and bound["cpus_obtained"] == 0.62
    notes = cpu_notes(table)
    assert len(notes) == 1 and notes[0].startswith("slow: short of 0.8 N at N=16")
    assert "8.0 / 5.0 = 1.6 CPUs" in notes[0] and "8.0 / 12.8 = 0.62 CPUs" in notes[0] and notes[0].endswith("no idle CPU was left to reach the CPUs it needs.")


def test_a_shortfall_the_cpu_does_not_explain_is_said_so():
    idle = {"summary": summarise([row("waits", 1, 64.0, 0.5), row("waits", 16, 32.0, 0.5, load=0.5)]), "cpus": 2, "niceness": 0}
    (note,) = cpu_notes(idle)  # needs 0.1 CPUs with idle CPUs around: something else held it back
    assert note.endswith("Not explained by CPU alone.")
    heavy = {"summary": summarise([row("heavy", 1, 64.0, 20.0), row("heavy", 16, 32.0, 20.0, load=0.5)]), "cpus": 2}
    (note,) = cpu_notes(heavy)  # 20 / 5 = 4 CPUs: no load makes that fit on two
    assert note.endswith("CPU-bound: more than the machine's 2 CPUs.")
