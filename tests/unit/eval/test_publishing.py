"""Issue 18's conversation rows: the Hydra sweep runs exactly the folders the single commands do, and a
finished (or stopped) row is published once, checked, with its lock files left behind."""

from __future__ import annotations

import json

import pytest
from hydra import compose, initialize_config_dir

from core.llm.cache import ResponseCache
from eval.runner import config_hash
from tests.conftest import REPO

CONF = str(REPO / "conf")


def _jobs(sweep: str) -> list[list[str]]:
    """The override lists of a sweep's jobs, as Hydra's basic sweeper expands ``hydra.sweeper.params``."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        params = compose("config", [f"experiment={sweep}"], return_hydra_config=True).hydra.sweeper.params
    parsed = OverridesParser.create().parse_overrides([f"{key}={value}" for key, value in params.items()])
    return [list(job) for job in BasicSweeper.split_arguments(parsed, None)[0]]


def _hash(overrides: list[str]) -> str:
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return config_hash(compose("config", overrides), inputs={})


@pytest.mark.parametrize(("sweep", "single"), [
    ("sweep_conv26_rows", [["experiment=locomo_conv26", "system=mosaic"], ["experiment=locomo_conv26", "ablation=with_source_turns"],
                           ["experiment=locomo_conv26", "ablation=turn_matching"]]),
    ("sweep_conv49_rows", [["experiment=locomo_conv49", "system=mosaic"], ["experiment=locomo_conv49", "ablation=with_source_turns"],
                           ["experiment=locomo_conv49", "ablation=turn_matching"]]),
    ("sweep_write_cost", [["experiment=locomo", "system=mosaic"], ["experiment=locomo", "ablation=fused_conflict"]]),
    ("sweep_write_cost_conflict", [["experiment=conflict", f"conflict.suite=data/conflicts/{suite}.json", *ablation]
                                   for suite in ("household_finance", "workplace_policy") for ablation in ([], ["ablation=fused_conflict"])]),
])
def test_a_row_sweep_runs_the_folders_of_the_single_commands(sweep, single):
    """The sweeps replace the hand-written row scripts (conversation_rows, compare_write_cost): each job must be
    the same run (config hash, so the same resumable folder) as the one-row command those scripts ran."""
    swept = sorted(_hash([f"experiment={sweep}", *job]) for job in _jobs(sweep))
    assert swept == sorted(_hash(overrides) for overrides in single)


def test_ablation_none_is_the_unablated_system():
    assert _hash(["experiment=locomo", "system=mosaic", "ablation=none"]) == _hash(["experiment=locomo", "system=mosaic"])
    assert _hash(["experiment=locomo", "ablation=none"]) != _hash(["experiment=locomo", "system=mosaic"])  # leaves the system as it was


def _finished_run(root, name="h1", sha="abc", start="abc"):
    run = root / "results" / "runs" / "locomo" / "rag" / "none" / name
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"benchmark": "locomo", "metadata": {"git_sha": sha, "git_sha_start": start}}))
    (run / "predictions.jsonl").write_text('{"key": "q0"}\n')
    (run / ".lock").write_text("")
    return run


def test_publish_copies_a_clean_finished_run_once_and_refuses_the_rest(tmp_path, monkeypatch):
    from eval import publishing as run_rows

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
    from eval import publishing as run_rows

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
