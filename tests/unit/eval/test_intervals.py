"""The cluster bootstrap on generated data whose answer is known (eval/intervals.py)."""

from __future__ import annotations

import numpy as np
import pytest

from eval.intervals import bootstrap, bootstrap_ci, chosen_interval, format_ci, interval_note, report_settings, resampled_mean


def clustered_differences(seed: int = 0) -> tuple[list[float], list[str]]:
    """Per-question differences of two runs over 8 conversations of 60 questions: within a conversation the
    questions agree (a strong per-conversation effect), and the conversations disagree in sign."""
    rng = np.random.default_rng(seed)
    effects = [0.9, 0.8, 0.7, -0.6, -0.5, 0.6, -0.7, 0.4]  # mean 0.2, spread 0.65 between conversations
    values, labels = [], []
    for c, effect in enumerate(effects):
        values += list(effect + rng.normal(0, 0.05, 60))
        labels += [f"conv-{c}"] * 60
    return values, labels


def test_a_strong_cluster_effect_widens_the_interval_past_zero():
    values, labels = clustered_differences()
    stat = bootstrap_ci(values, n_samples=2000, seed=0, clusters=labels)
    assert stat["n"] == 480 and stat["n_clusters"] == 8
    assert stat["mean"] == pytest.approx(0.2, abs=0.01)
    assert stat["ci_low"] > 0  # per question: 480 'independent' items, the difference looks decided
    assert stat["cluster_ci_low"] < 0 < stat["cluster_ci_high"]  # 8 conversations: it is not
    assert stat["cluster_ci_high"] - stat["cluster_ci_low"] > 4 * (stat["ci_high"] - stat["ci_low"])


def test_without_a_cluster_effect_the_cluster_interval_is_only_somewhat_wider():
    """Two-stage resampling counts the within-cluster spread twice (once through the cluster means, once
    through the items): with no cluster effect its interval is about sqrt(2) times the per-item one."""
    rng = np.random.default_rng(1)
    values = list(rng.normal(0.3, 0.5, 600))
    labels = [f"c{i % 10}" for i in range(600)]  # labels unrelated to the values
    stat = bootstrap_ci(values, n_samples=2000, seed=0, clusters=labels)
    item_width = stat["ci_high"] - stat["ci_low"]
    cluster_width = stat["cluster_ci_high"] - stat["cluster_ci_low"]
    assert item_width < cluster_width < 1.6 * item_width


def test_clusters_leave_the_per_item_interval_as_it_was():
    values, labels = clustered_differences()
    plain = bootstrap_ci(values, n_samples=500, seed=4)
    both = bootstrap_ci(values, n_samples=500, seed=4, clusters=labels)
    assert {k: both[k] for k in plain} == plain
    assert both == bootstrap_ci(values, n_samples=500, seed=4, clusters=labels)  # seeded


def test_one_cluster_gives_an_interval_for_that_cluster_only():
    values = [1.0] * 30 + [0.0] * 70
    stat = bootstrap_ci(values, n_samples=2000, seed=0, clusters=["conv-26"] * 100)
    assert stat["n_clusters"] == 1
    assert stat["cluster_ci_low"] == pytest.approx(stat["ci_low"], abs=0.03)
    assert stat["cluster_ci_high"] == pytest.approx(stat["ci_high"], abs=0.03)
    assert chosen_interval(stat, 5) == "item"
    assert interval_note(stat, 5, cluster_names=["conv-26"]) == "question bootstrap; 1 conversation (conv-26): holds for that conversation only"


def test_a_paired_difference_stays_paired_within_resampled_clusters():
    # each conversation: base and other differ by exactly +0.1 on every question, whatever the question's level
    rng = np.random.default_rng(2)
    base = list(rng.uniform(0, 0.9, 300))
    other = [b + 0.1 for b in base]
    labels = [f"c{i // 30}" for i in range(300)]

    def difference(b: np.ndarray, o: np.ndarray) -> np.ndarray:
        return resampled_mean(o) - resampled_mean(b)

    stat = bootstrap(difference, (base, other), n_samples=500, seed=0, clusters=[labels])
    assert stat["cluster_ci_low"] == pytest.approx(0.1) and stat["cluster_ci_high"] == pytest.approx(0.1)


def test_groups_share_the_cluster_draw():
    # two groups of one user move together: a user with high values in one has high values in the other
    labels = [u for u in ("a", "b", "c", "d", "e", "f") for _ in range(20)]
    level = {"a": 0.0, "b": 1.0, "c": 0.0, "d": 1.0, "e": 0.0, "f": 1.0}
    first = [level[u] for u in labels]

    def gap(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return resampled_mean(x) - resampled_mean(y)

    stat = bootstrap(gap, first, list(first), n_samples=300, seed=0, clusters=[labels, labels])
    assert stat["cluster_ci_low"] == pytest.approx(0.0) and stat["cluster_ci_high"] == pytest.approx(0.0)


def test_cluster_labels_must_match_the_items():
    with pytest.raises(ValueError, match="one label per item"):
        bootstrap(resampled_mean, [1.0, 0.0], clusters=[["a"]])


def test_the_table_cell_shows_the_cluster_interval_only_over_enough_clusters():
    stat = {"mean": 0.5, "ci_low": 0.45, "ci_high": 0.55, "n": 500, "n_clusters": 10, "cluster_ci_low": 0.3, "cluster_ci_high": 0.7}
    assert format_ci(stat) == "50.0 [30.0, 70.0]"  # conf/report.yaml: 5 clusters or more
    assert format_ci(stat, min_clusters=11) == "50.0 [45.0, 55.0]"
    assert format_ci({**stat, "n_clusters": 3}, min_clusters=5) == "50.0 [45.0, 55.0]"
    assert format_ci({k: v for k, v in stat.items() if "cluster" not in k}, min_clusters=5) == "50.0 [45.0, 55.0]"
    assert interval_note(stat, 5) == "conversation bootstrap over 10 conversations, then questions within them"
    assert "too few" in interval_note({**stat, "n_clusters": 3}, 5)


def test_report_settings_come_from_conf():
    settings = report_settings()
    assert settings["min_clusters_for_cluster_interval"] == 5
    assert settings["table_token_budget"] in settings["token_budgets"]
