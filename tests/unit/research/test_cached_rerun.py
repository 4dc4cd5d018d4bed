"""research.cached_rerun: metrics are compared leaf by leaf, exactly, in the sections asked for."""

from __future__ import annotations

import pytest

from research.cached_rerun import differences, flatten, main


def test_flatten_names_every_leaf_by_its_path():
    assert flatten("overall", {"judge": {"mean": 0.3, "n": 10}, "f1": 0.2}) == {"overall.judge.mean": 0.3, "overall.judge.n": 10, "overall.f1": 0.2}


def test_differences_are_exact_and_only_in_the_compared_sections():
    published = {"overall": {"judge": {"mean": 0.3}}, "per_category": {"1": {"n": 5}}, "latency": {"p50": 1.0}}
    same = {"overall": {"judge": {"mean": 0.3}}, "per_category": {"1": {"n": 5}}, "latency": {"p50": 9.0}}
    assert differences(published, same, ("overall", "per_category")) == []  # latency is not compared
    moved = {"overall": {"judge": {"mean": 0.3 + 1e-12}}, "per_category": {"1": {"n": 5}, "2": {"n": 1}}}
    assert differences(published, moved, ("overall", "per_category")) == [
        {"key": "overall.judge.mean", "published": 0.3, "rerun": 0.3 + 1e-12},
        {"key": "per_category.2.n", "published": None, "rerun": 1},
    ]


def test_a_folder_without_its_overrides_is_refused_before_anything_runs(tmp_path):
    (tmp_path / "metrics.json").write_text("{}")
    with pytest.raises(SystemExit):
        main([str(tmp_path)])


def test_the_rerun_drops_where_the_reference_wrote_and_keeps_what_it_ran(tmp_path, monkeypatch):
    """A reference run made with results_dir=<its machine's path> reruns into the rerun's own folder."""
    import json
    import subprocess

    from research import cached_rerun

    folder = tmp_path / "ref"
    folder.mkdir()
    (folder / "metrics.json").write_text("{}")
    (folder / "overrides.json").write_text(json.dumps(["experiment=locomo_conv26", "system=mosaic", "results_dir=/elsewhere/results", "logger=none"]))
    commands = []
    monkeypatch.setattr(subprocess, "run", lambda command, **_: commands.append(command) or subprocess.CompletedProcess(command, 0))
    report = cached_rerun.rerun(folder, None, "python", ("overall",))
    ran = commands[-1]
    assert ran[2:4] == ["experiment=locomo_conv26", "system=mosaic"]
    assert not any("/elsewhere" in part for part in ran) and sum(p.startswith("results_dir=") for p in ran) == 1
    assert report["error"] == "0 metrics.json written"  # nothing ran, and the report says so
