"""scripts/conversation_rows: rows run in order through run.py (faked here), the cache archive is imported
first and written after every row, MOSAIC rows are compared with rag, a dirty tree is refused."""

from __future__ import annotations

import json

import pytest

import scripts.conversation_rows as rows_script
from core.llm.cache import ResponseCache
from tests.unit.test_compare_runs import _locomo_run

MECHANISMS = {"entities": {"active": 5, "flagged": 1, "superseded": 2, "queued": 3, "rejected": 0, "turns_kept": 5},
              "conflict_events": {"update": 2, "reject": 0, "flag": 1},
              "retrieval": {"candidates_scanned": {"mean": 4.5}, "lsh_confident_hits": 5, "llm_routing_fallbacks": 1, "turn_matches": 7},
              "ncs": {"full_refreshes": 2, "drift_measurements": 1, "max_abs_score_drift": 0.001}, "leiden_reruns": 3}


@pytest.fixture
def runs(tmp_path, monkeypatch):
    made = {"system=rag": _locomo_run(tmp_path, "rag", [1, 0, 0, 1]), "system=mosaic": _locomo_run(tmp_path, "mosaic", [1, 1, 0, 1])}
    metrics = json.loads((made["system=mosaic"] / "metrics.json").read_text())
    (made["system=mosaic"] / "metrics.json").write_text(json.dumps({**metrics, "system_metrics": {"mechanisms": MECHANISMS}}))
    calls: list[list[str]] = []

    def fake_run_folder(overrides):
        calls.append(overrides)
        ResponseCache(tmp_path / "cache" / "llm_cache.sqlite").put(f"key-{len(calls)}", {"text": "paid"})
        return made[overrides[1]]

    monkeypatch.setattr(rows_script, "run_folder", fake_run_folder)
    monkeypatch.setattr(rows_script, "code_version", lambda: {"git_sha": "abc", "dirty": False, "diff_sha256": None})
    monkeypatch.setenv("MOSAIC_CACHE_DIR", str(tmp_path / "cache"))
    return calls


def test_rows_run_in_order_and_mosaic_is_compared_with_rag(tmp_path, runs):
    out = tmp_path / "out" / "rows.json"
    report = rows_script.main(["--experiment", "locomo_conv26", "--rows", "rag", "mosaic", "--out", str(out),
                               "--archive", str(tmp_path / "archive.jsonl.gz"), "--", "llm=vllm"])
    assert runs == [["experiment=locomo_conv26", "system=rag", "llm=vllm"], ["experiment=locomo_conv26", "system=mosaic", "llm=vllm"]]
    quality = report["comparison"]["comparisons"][0]["quality"]
    assert quality["correct"]["mean"] == pytest.approx(0.25) and quality["n_shared"] == 4
    assert set(report["mechanisms"]) == {"mosaic"} and report["mechanisms"]["mosaic"]["turn_matches"] == 7
    assert report["mechanisms"]["mosaic"]["entities_superseded"] == 2 and report["mechanisms"]["mosaic"]["leiden_reruns"] == 3
    assert json.loads(out.read_text())["experiment"] == "locomo_conv26" and "| mosaic | 5 | 1 | 2 |" in out.with_suffix(".md").read_text()
    with __import__("gzip").open(tmp_path / "archive.jsonl.gz", "rt") as archive:
        assert [json.loads(line)["key"] for line in archive] == ["key-1", "key-2"]  # written after each row


def test_an_archive_is_imported_before_the_first_row(tmp_path, runs):
    archive = tmp_path / "archive.jsonl.gz"
    rows_script.main(["--experiment", "x", "--rows", "rag", "--archive", str(archive), "--out", str(tmp_path / "a.json")])
    (tmp_path / "cache" / "llm_cache.sqlite").unlink()  # a fresh machine
    rows_script.main(["--experiment", "x", "--rows", "rag", "--archive", str(archive), "--out", str(tmp_path / "b.json")])
    held = dict(ResponseCache(tmp_path / "cache" / "llm_cache.sqlite").items())
    assert set(held) == {"key-1", "key-2"}  # the first run's call came back from the archive


def test_a_dirty_tree_and_a_missing_base_row_are_refused(tmp_path, runs, monkeypatch):
    with pytest.raises(SystemExit, match="must include 'rag'"):
        rows_script.main(["--experiment", "x", "--rows", "mosaic"])
    monkeypatch.setattr(rows_script, "code_version", lambda: {"git_sha": "abc", "dirty": True, "diff_sha256": "f"})
    with pytest.raises(SystemExit, match="uncommitted"):
        rows_script.main(["--experiment", "x", "--rows", "rag"])
    assert runs == []


def _finished_run(root, name="h1", sha="abc", start="abc"):
    run = root / "results" / "runs" / "locomo" / "rag" / "none" / name
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"benchmark": "locomo", "metadata": {"git_sha": sha, "git_sha_start": start}}))
    (run / "predictions.jsonl").write_text('{"key": "q0"}\n')
    (run / ".lock").write_text("")
    return run


def test_publish_copies_a_clean_finished_run_once_and_refuses_the_rest(tmp_path, monkeypatch):
    from scripts import run_rows

    monkeypatch.setattr(run_rows, "PUBLISHED_RUNS", tmp_path / "published")
    run = _finished_run(tmp_path)
    target = run_rows.publish(run)
    assert target == tmp_path / "published" / "locomo" / "rag" / "none" / "h1"
    assert sorted(p.name for p in target.iterdir()) == ["metrics.json", "predictions.jsonl"]  # no lock file
    assert run_rows.publish(run) == target  # the same run again: left as it is
    (run / "metrics.json").write_text(json.dumps({"benchmark": "locomo", "metadata": {"git_sha": "abc", "git_sha_start": "abc"}, "x": 1}))
    with pytest.raises(SystemExit, match="exists with other metrics"):
        run_rows.publish(run)
    with pytest.raises(SystemExit, match="dirty tree"):
        run_rows.publish(_finished_run(tmp_path, "h2", sha="abc-dirty", start="abc-dirty"))
    with pytest.raises(SystemExit, match="code changed during the run"):
        run_rows.publish(_finished_run(tmp_path, "h3", sha="def", start="abc"))
    (unfinished := _finished_run(tmp_path, "h4")).joinpath("metrics.json").unlink()
    with pytest.raises(SystemExit, match="no metrics.json"):
        run_rows.publish(unfinished)
    assert sorted(p.name for p in target.parent.iterdir()) == ["h1"]


def test_rows_publish_only_clean_runs_and_never_with_allow_dirty(tmp_path, runs):
    with pytest.raises(SystemExit, match="exclude each other"):
        rows_script.main(["--experiment", "x", "--rows", "rag", "--publish", "--allow-dirty"])
    with pytest.raises(SystemExit, match="start code not recorded"):  # the fixture's runs predate provenance
        rows_script.main(["--experiment", "x", "--rows", "rag", "--publish", "--out", str(tmp_path / "a.json")])


def test_the_archive_is_also_exported_while_a_long_row_runs(tmp_path, runs, monkeypatch):
    import time

    slow = rows_script.run_folder

    def slow_row(overrides):
        folder = slow(overrides)  # pays its first call into the cache, then runs on
        time.sleep(0.5)
        return folder

    monkeypatch.setattr(rows_script, "run_folder", slow_row)
    exported: list[str] = []
    real_export = rows_script.export_cache
    monkeypatch.setattr(rows_script, "export_cache", lambda cache, archive: exported.append("x") or real_export(cache, archive))
    rows_script.main(["--experiment", "x", "--rows", "rag", "--archive", str(tmp_path / "a.jsonl.gz"),
                      "--export-every-min", "0.001", "--out", str(tmp_path / "a.json")])
    assert len(exported) >= 3  # at least two periodic exports during the 0.5 s row, then the one after it


def test_a_failed_export_keeps_the_previous_archive_whole(tmp_path, monkeypatch):
    import gzip
    import os

    from scripts.cache_archive import export_cache

    cache = ResponseCache(tmp_path / "cache" / "llm_cache.sqlite")
    cache.put("k1", {"text": "a"})
    archive = tmp_path / "a.jsonl.gz"
    assert export_cache(tmp_path / "cache", archive) == 1
    cache.put("k2", {"text": "b"})
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(OSError("killed")))
    with pytest.raises(OSError):
        export_cache(tmp_path / "cache", archive)
    monkeypatch.undo()
    with gzip.open(archive, "rt") as lines:
        assert [json.loads(line)["key"] for line in lines] == ["k1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl.gz", "cache"]


def test_an_unfinished_run_is_published_with_its_ingest_cost_and_replaced_by_a_later_copy(tmp_path, monkeypatch):
    from core.api import LLMUsage
    from core.turn_costs import TurnCosts
    from scripts import run_rows

    monkeypatch.setattr(run_rows, "UNFINISHED_RUNS", tmp_path / "unfinished")
    run = tmp_path / "results" / "runs" / "locomo" / "zep" / "none" / "h9"
    clean = {"git_sha": "abc", "dirty": False, "diff_sha256": None}
    (run / "system").mkdir(parents=True)
    (run / "provenance.json").write_text(json.dumps({"code_at_start": clean, "invocations": [{"code": clean}]}))
    TurnCosts(run / "system").record("locomo:conv-26", "D1:1", 120.0, LLMUsage(calls=4, prompt_tokens=5000, completion_tokens=300))
    target = run_rows.publish_unfinished(run)
    cost = json.loads((target / "ingest_cost.json").read_text())
    assert target == tmp_path / "unfinished" / "locomo" / "zep" / "none" / "h9"
    assert cost["code"] == "abc" and not cost["finished"] and cost["by_turn"]["turns"] == 1 and cost["by_turn"]["calls_per_turn"] == 4
    TurnCosts(run / "system").record("locomo:conv-26", "D1:2", 100.0, LLMUsage(calls=4))
    assert json.loads((run_rows.publish_unfinished(run) / "ingest_cost.json").read_text())["by_turn"]["turns"] == 2  # replaced
    (run / "provenance.json").write_text(json.dumps({"code_at_start": clean, "invocations": [{"code": {**clean, "git_sha": "def"}}]}))
    with pytest.raises(SystemExit, match="resumed on other code"):
        run_rows.publish_unfinished(run)
    (run / "provenance.json").write_text(json.dumps({"code_at_start": {**clean, "dirty": True}, "invocations": []}))
    with pytest.raises(SystemExit, match="dirty tree"):
        run_rows.publish_unfinished(run)
    (run / "metrics.json").write_text("{}")
    with pytest.raises(SystemExit, match="is finished"):
        run_rows.publish_unfinished(run)


@pytest.mark.parametrize(("code", "accepted"), [(0, True), (3, True), (1, False), (2, False)])
def test_a_row_finished_with_failures_is_a_run_folder_and_a_crash_is_not(code, accepted, monkeypatch, tmp_path):
    """run.py exits 3 (eval.runner.FAILURES_EXIT) for a finished run with failed rows: still a row, its
    failures in metrics.json and the tables; any other non-zero exit is a failed row command."""
    import subprocess

    import scripts.run_rows as run_rows

    printed = f"| table |\n{tmp_path / 'run' / 'metrics.json'}\n"
    monkeypatch.setattr(run_rows.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, code, stdout=printed))
    if accepted:
        assert run_rows.run_folder(["system=rag"]) == tmp_path / "run"
    else:
        with pytest.raises(SystemExit, match=f"exit {code}"):
            run_rows.run_folder(["system=rag"])
