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
