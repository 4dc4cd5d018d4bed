"""Shared inputs of the live tests: a LoCoMo slice, contradiction probes and a small dev-suite slice."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from core.api import Turn

REPO = Path(__file__).resolve().parents[2]
DEV_SUITE = REPO / "data/conflicts/household_finance.json"
LOCOMO = Path(os.environ.get("MOSAIC_DATA_DIR", Path(__file__).resolve().parents[2] / "data")) / "locomo10.json"

# (held fact, contradicting fact): the suite's shape, written for these tests.
PROBES = [
    ("I live in Paris and I love the cafes there.", "I moved to Berlin last month, so I don't live in Paris anymore."),
    ("I work as a high school teacher.", "I quit teaching; I now work as a nurse at the city hospital."),
]


def locomo_slice(n_turns: int) -> tuple[list[Turn], str]:
    """The first ``n_turns`` turns of LoCoMo conversation 0, session 1, with the session's ISO time."""
    if not LOCOMO.exists():
        pytest.fail(f"LoCoMo file {LOCOMO} is missing (set MOSAIC_DATA_DIR or run the data download script)")
    conversation = json.loads(LOCOMO.read_text())[0]["conversation"]
    when = datetime.strptime(conversation["session_1_date_time"], "%I:%M %p on %d %B, %Y").isoformat()
    turns = [Turn(t["dia_id"], t["speaker"], t["text"], when) for t in conversation["session_1"][:n_turns]]
    return turns, when


def mini_dev_suite(out: Path, keep_turns: list[int], case_ids: tuple[str, ...]) -> Path:
    """A slice of the household-finance DEV suite (never the hypertension one) written to ``out``:
    context turns ``keep_turns`` only, cases ``case_ids`` with ``conflicts_with`` renumbered."""
    data = json.loads(DEV_SUITE.read_text())
    data["contexts"]["budget"] = [data["contexts"]["budget"][i] for i in keep_turns]
    renumber = {old: new for new, old in enumerate(keep_turns)}
    data["cases"] = [
        {**case, "conflicts_with": [renumber[i] for i in case["conflicts_with"]]}
        for case in data["cases"]
        if case["id"] in case_ids
    ]
    out.write_text(json.dumps(data))
    return out


# Rent (turn 1, Elena) contradicted by hn-02 (2,300 vs 1,650); hc-12 is an unrelated new fact.
# Two context turns keep the live tests short: Mem0 adds every batch to each speaker's namespace.
BASELINE_SUITE_TURNS = [1, 12]  # rent (Elena), checking account (Daniel)
BASELINE_SUITE_CASES = ("hn-02", "hc-12")


def run_mini_suite(system: Any, llm: Any, embedder: Any, tmp_path: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The conflict experiment (eval.benchmarks.conflict) on a two-case dev slice: metrics and rows by id.

    Checks what holds for any snapshottable system: the context was ingested once (the LLM calls the
    library made equal the ingest's plus the probes'), and each case row is scored and consistent.
    """
    from eval.benchmarks.conflict import ConflictBenchmark
    from eval.context import RunContext
    from tests.hydra_config import conf_judge

    suite = mini_dev_suite(tmp_path / "mini_dev.json", BASELINE_SUITE_TURNS, BASELINE_SUITE_CASES)
    ctx = RunContext(run_dir=tmp_path / "run", llm=llm, judge=conf_judge(llm), workers=1, embedder=embedder, answerer=None)
    calls_before = system.tap.usage.calls
    metrics = ConflictBenchmark(suite=str(suite), bootstrap_samples=100).run(system, ctx)
    rows = {r["id"]: r for r in map(json.loads, (tmp_path / "run" / "cases.jsonl").read_text().splitlines())}
    assert metrics["n_cases"] == 2 and set(rows) == set(BASELINE_SUITE_CASES)
    assert metrics["snapshot_restore"] is True and metrics["context_written_with"] == "add"
    ingest = metrics["ingest"]["budget"]
    assert ingest["turns"] == len(BASELINE_SUITE_TURNS) and ingest["stored"] > 0
    assert system.tap.usage.calls - calls_before == ingest["llm_calls"] + sum(r["llm_calls"] for r in rows.values())
    for row in rows.values():
        assert row["detected_strict"] <= row["detected_lenient"]  # strict hits are a subset
    return metrics, rows
