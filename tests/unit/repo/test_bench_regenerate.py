"""results/bench comparison files built from published runs only (no LLM) are what their commands give today:
generate-and-compare (compare_halumem_eval_slice.md had gone stale once)."""

from __future__ import annotations

import pytest

from scripts.compare_runs import main as compare_runs
from tests.conftest import REPO

HALUMEM = "results/published/runs/halumem/"
# file stem -> the compare_runs arguments docs/halumem.md gives for it (all inputs published)
COMMANDS = {
    "compare_halumem_eval_slice": [HALUMEM + "rag/none/5189dea3dec3", HALUMEM + "mosaic/none/377b9d0183ba",
                                   HALUMEM + "rag/oracle_facts/d9281fd30a6b", HALUMEM + "mosaic/oracle_extractor/558818cb5ed0",
                                   "--sessions", "10"],
    "compare_halumem_eval_slice3": [HALUMEM + "rag/none/5189dea3dec3", HALUMEM + "amem/none/5d7835f560ac",
                                    HALUMEM + "mem0/none/3b92adacab44", HALUMEM + "mosaic/none/377b9d0183ba",
                                    HALUMEM + "rag/oracle_facts/d9281fd30a6b", HALUMEM + "mosaic/oracle_extractor/558818cb5ed0",
                                    "--sessions", "3"],
}  # fmt: skip


@pytest.mark.parametrize("stem", sorted(COMMANDS))
def test_a_committed_comparison_is_what_its_command_gives(stem, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # the files name the runs by their path from the repository
    compare_runs([*COMMANDS[stem], "--out", str(tmp_path / f"{stem}.json")])
    for suffix in (".md", ".json"):
        committed = (REPO / "results" / "bench" / f"{stem}{suffix}").read_text(encoding="utf-8")
        assert (tmp_path / f"{stem}{suffix}").read_text(encoding="utf-8") == committed, (
            f"results/bench/{stem}{suffix} is stale: python -m scripts.compare_runs {' '.join(COMMANDS[stem])} --out results/bench/{stem}.json")


def events_written_as_points(text: str, runs: list[dict]) -> list[str]:
    """``"<false_alarms> of <non_update_points> non-update points"`` for a run that counted only events (no
    ``false_alarm_points``): its alarms are events, and writing them as a share of points misreads them."""
    found = []
    for links in runs:
        if "false_alarm_points" in links:
            continue
        phrase = f"{links['false_alarms']} of {links['non_update_points']} non-update points"
        found += [phrase] if phrase in " ".join(text.split()) else []
    return found


def test_docs_do_not_write_a_runs_alarm_events_as_points():
    import json

    runs = [links for path in sorted((REPO / "results" / "published" / "runs" / "halumem").rglob("metrics.json"))
            if (links := json.loads(path.read_text(encoding="utf-8")).get("update_links"))]  # fmt: skip
    assert any("false_alarm_points" not in links for links in runs)  # the check has runs to guard
    docs = " ".join(p.read_text(encoding="utf-8") for p in sorted((REPO / "docs").glob("*.md")) if p.name != "results_history.md")
    assert events_written_as_points(docs, runs) == []
    assert events_written_as_points("false alarms: 25 of 211\n non-update points", [{"false_alarms": 25, "non_update_points": 211}])
