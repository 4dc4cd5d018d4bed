"""Table rows say what they measure.

- the MemGPT adapter in ``ingest_mode=archival`` is rag through Letta's archival store with the harness's
  answerer: its label says so in every table, and differs from MemGPT's agent row;
- the paper's reported value sits only on the row that is the paper's configuration;
- every table has a failures column (rows / ingest turns), from metrics.json or, for older runs, the run folder;
- a scaling figure whose timed window held no refresh or global re-run is labelled extrapolated.
"""

from __future__ import annotations

import json
from pathlib import Path

from eval.benchmarks.conflict.table import conflict_table
from eval.benchmarks.conflict.table import headline_table as conflict_headline
from eval.benchmarks.halumem.table import make_table as halumem_table
from eval.benchmarks.locomo import headline_table as locomo_headline
from eval.benchmarks.locomo import locomo_table
from eval.tables import FAILURES_COLUMN, failures_cell, is_paper_configuration, row_label
from scripts.make_tables import scaling_table
from tests.conftest import REPO

CI = {"mean": 0.25, "ci_low": 0.1, "ci_high": 0.45, "n": 20}


def locomo_run(system: str, ablation: str = "none", overrides: list[str] | None = None, **extra) -> dict:
    meta = {"system": system, "ablation": ablation, "overrides": overrides or [f"system={system}"], "benchmark": "locomo"}
    return {"convention": "locomo", "overall": {"judge": CI, "f1": CI, "n": 20, "judge_failures": 0},
            "per_category": {"1": {"judge": CI, "n": 20}}, "gold_slices": {"original": {"overall": {"judge": CI}}},
            "slice": {"questions_selected": 20}, "metadata": meta, **extra}


def conflict_run(system: str, **extra) -> dict:
    meta = {"system": system, "ablation": "none", "overrides": [f"system={system}"]}
    return {"suite": "hypertension", "detection_rate": CI, "false_alarm_rate": CI, "precision": CI, "by_type": {},
            "n_conflicting": 50, "n_non_conflicting": 32, "conflict_events_seen": 3, "metadata": meta,
            "misses": {"numeric": {"LLM verdict": 2}, "logical": {"wrong memory": 1}}, **extra}


ARCHIVAL = {"system_metrics": {"ingest_mode": "archival", "answer_mode": "shared"}}


def test_archival_memgpt_row_is_named_for_what_it_measures():
    archival = locomo_run("memgpt", overrides=["system=memgpt", "system.ingest_mode=archival"], **ARCHIVAL)
    agent = locomo_run("memgpt", system_metrics={"ingest_mode": "messages", "answer_mode": "agent"})
    assert row_label(archival).startswith("Letta archival store + harness answerer")
    assert row_label(agent) == "memgpt" and row_label(agent) != row_label(archival)
    for table in (locomo_table([archival]), locomo_headline([archival]), conflict_table([conflict_run("memgpt", **ARCHIVAL)])):
        assert any(str(label).startswith("Letta archival store + harness answerer") for label in table.index)


class NamesItsRows:
    @staticmethod
    def row_label(settings: dict[str, str]) -> str | None:
        return f"measured {settings['mode']}" if settings.get("mode") else None


def test_a_row_is_labelled_by_the_system_class_it_recorded_or_by_what_the_system_reported():
    """core.api.LabelsRows on the recorded class, from the run's settings (its system_metrics, its command line)."""
    meta = {"system": "labeller", "system_target": f"{__name__}.NamesItsRows", "overrides": ["system.mode=x"]}
    assert row_label({"metadata": meta}) == "measured x (mode=x)"
    assert row_label({"metadata": meta, "system_metrics": {"mode": "y"}}) == "measured y (mode=x)"  # what it ran with wins
    assert row_label({"metadata": {**meta, "overrides": []}}) == "labeller"
    reported = {**meta, "system_metadata": {"row_label": "as reported"}}
    assert row_label({"metadata": reported}) == "as reported (mode=x)"


def test_no_published_table_names_the_archival_row_memgpt():
    for table in (REPO / "results" / "tables").glob("*.md"):
        assert "| memgpt (ingest_mode=archival)" not in table.read_text(encoding="utf-8"), table


def test_paper_value_only_on_the_paper_configuration_row():
    default = locomo_run("mosaic")
    ablation = locomo_run("mosaic", ablation="no_ncs", overrides=["system=mosaic", "ablation=no_ncs"])
    swept = locomo_run("mosaic", overrides=["system=mosaic", "system.conflict.k=1"])
    renamed = locomo_run("mosaic", ablation="judge_radius_0.6", overrides=["system=mosaic", "ablation_name=judge_radius_0.6"])
    assert is_paper_configuration(default) and not any(map(is_paper_configuration, (ablation, swept, renamed)))
    table = locomo_table([default, ablation, swept, renamed])
    cells = table["paper (reported) overall J"].tolist()
    assert cells == ["89.35", "", "", ""]
    assert locomo_headline([ablation, default])["paper (reported) judge"].tolist().count("89.35") == 1
    conflict = conflict_headline([conflict_run("mosaic"), {**conflict_run("mosaic"), "metadata": {**conflict_run("mosaic")["metadata"], "ablation": "no_gate"}}])
    assert conflict["detection"].tolist().count("66.0") == 1  # one row of its own: the paper's suite is not this project's
    assert conflict.loc["paper: MOSAIC (reported)", "suite"] == "the paper's own suite (not public)"
    no_gate = {**conflict_run("mosaic"), "metadata": {**conflict_run("mosaic")["metadata"], "ablation": "no_gate"}}
    assert "paper: MOSAIC (reported)" not in conflict_headline([no_gate]).index  # an ablation is not the paper's setting


def test_published_ablation_rows_carry_no_paper_value():
    lines = (REPO / "results" / "tables" / "locomo_headline.md").read_text(encoding="utf-8").splitlines()
    rows = [line for line in lines if line.startswith("| mosaic /")]
    assert rows and not any("89.35" in row for row in rows)


def test_failures_column_reads_metrics_then_the_run_folder(tmp_path):
    assert failures_cell({"failures": {"rows": 3, "ingest_turns": 20}}) == "3 / 20"
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "predictions.jsonl").write_text(json.dumps({"key": "q0", "answer_failure": "empty reply"}) + "\n" + json.dumps({"key": "q1"}) + "\n")
    older = locomo_run("zep", ingest={"failures": 20}, _path=str(folder / "metrics.json"))
    older["overall"]["judge_failures"] = 1
    assert failures_cell(older) == "2 / 20"  # one judge failure + one answer failure; Zep's 20 failed turns
    assert failures_cell(conflict_run("rag")) == "n/a / n/a"  # nothing recorded: said, not guessed
    for table in (locomo_table([older]), locomo_headline([older]), conflict_table([conflict_run("rag")]), conflict_headline([conflict_run("rag")])):
        assert FAILURES_COLUMN in table.columns
    halumem = {"variant": "Medium", "updating": {"correct": CI, "hallucination": CI, "omission": CI},
               "qa": {"correct": CI, "hallucination": CI, "omission": CI}, "metadata": {"system": "rag", "ablation": "none"},
               "failures": {"rows": 0, "ingest_turns": 4}}
    assert halumem_table([halumem]).loc[FAILURES_COLUMN].iloc[0] == "0 / 4"


def test_published_zep_row_shows_its_failed_turns():
    """The README's headline row for Zep shows the failed ingest turns its published metrics.json records."""
    runs = sorted((REPO / "results" / "published" / "runs" / "locomo" / "zep").rglob("metrics.json"))
    assert len(runs) == 1
    failures = json.loads(runs[0].read_text(encoding="utf-8"))["failures"]
    lines = (REPO / "results" / "tables" / "locomo_headline.md").read_text(encoding="utf-8").splitlines()
    zep = [line for line in lines if line.startswith("| Zep ")]
    assert zep and all(f"| {failures['rows']} / {failures['ingest_turns']} |" in line for line in zep)


def test_conflict_misses_are_counted_from_the_run():
    table = conflict_headline([conflict_run("mosaic")])
    assert table["misses"].tolist() == ["3 of 50", ""][: len(table)]  # then the paper's own row, when shown


def write_scaling(path: Path, rows: list[dict]) -> Path:
    path.write_text(json.dumps({"ncs": rows}))
    return path


def test_scaling_figure_without_refresh_or_rerun_in_window_is_labelled_extrapolated(tmp_path):
    base = {"n_nodes": 100000, "writes": 1000, "community_policy": "configured", "amortised_ms_per_update": 2.6,
            "in_window_ms_per_update": 1.64}
    path = write_scaling(tmp_path / "scaling.json", [
        {**base, "refreshes_in_window": 0, "leiden_reruns_in_window": 0},
        {**base, "refreshes_in_window": 1, "leiden_reruns_in_window": 0},
        {**base, "refreshes_in_window": 2, "leiden_reruns_in_window": 74},
    ])
    labels = scaling_table((path,))["amortised figure"].tolist()
    assert labels[0] == "extrapolated: no PageRank refresh or global Leiden re-run in the timed window"
    assert labels[1] == "extrapolated: no global Leiden re-run in the timed window"
    assert labels[2] == "measured"


def test_published_100k_ncs_figure_is_labelled_extrapolated():
    text = (REPO / "results" / "tables" / "scaling.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| 100,000 |") and "| configured |" in line]
    assert len(rows) == 2 and all("extrapolated" in row for row in rows)  # 1,000- and 10,000-write windows
    history = (REPO / "docs" / "results_history.md").read_text(encoding="utf-8")
    claim = history.index("inside the 2x bound")
    assert "Extrapolated" in history[history.rindex("\n\n>", 0, claim) : claim]


def test_halumem_table_marks_the_protocol_and_shows_a_rescore_in_place_of_its_old_run():
    """Table 2 once mixed old-protocol update columns (old plus new unmarked counted Correct) with nothing to tell
    them apart; a re-score of the same command on the same input now replaces its old-protocol column."""
    from eval.benchmarks.halumem.metrics import PROTOCOL

    def halumem(correct: float, overrides: list[str], protocol: str | None = None) -> dict:
        stat = {"mean": correct, "ci_low": correct, "ci_high": correct, "n": 62}
        run = {"variant": "Medium", "updating": {"correct": stat}, "qa": {"correct": CI},
               "metadata": {"system": "rag", "ablation": "none", "overrides": overrides, "input_hash": "abc", "llm_model_id": "m"}}
        return {**run, "protocol": protocol} if protocol else run

    rag = ["experiment=halumem_eval", "system=rag"]
    old_rag, fixed_rag = halumem(0.97, rag), halumem(0.2, [*rag, "results_dir=/elsewhere"], PROTOCOL)  # where it wrote: same row
    old_slice = halumem(0.95, [*rag, "benchmark.limit_sessions=3"])  # no re-score of this command: stays, marked old
    table = halumem_table([old_rag, old_slice, fixed_rag])
    measured = [c for c in table.columns if c.startswith("rag")]
    assert len(measured) == 2
    fixed = [c for c in measured if c.endswith("; fixed protocol)")]
    old = [c for c in measured if c.endswith("; old protocol)")]
    assert len(fixed) == 1 and len(old) == 1 and "sessions 0-2 only" in old[0]
    assert table.loc["Update correct", fixed[0]].startswith("20.00")
    assert "1 old-protocol run(s) re-scored" in table.attrs["caption"]
