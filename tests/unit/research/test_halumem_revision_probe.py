"""research.halumem_revision_probe: the conflict judge alone on HaluMem's points, swept over thresholds."""

from __future__ import annotations

from research.halumem_revision_probe import main, probe, separation, sweep
from tests.conftest import REPO
from tests.fakes import HashEmbedder

TINY = REPO / "tests" / "fixtures" / "halumem" / "halumem_tiny.jsonl"


class ScriptedJudge:
    """Blames the shown fact the new text revises (by a word both name), with a high score; sure of nothing else,
    except one new fact that it wrongly blames on the first shown fact (a false alarm)."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], str]] = []

    def judge_texts(self, texts, new_text):
        self.calls.append((list(texts), new_text))
        if "lab in Munich" in new_text:
            return 0.6, 1, [], "1"
        for word, held_word in (("program manager", "Huaxin"), ("Munich.", "Berlin")):
            if word in new_text:
                pick = next((i for i, t in enumerate(texts, start=1) if held_word in t), 0)
                return (0.9 if pick else 0.0), pick, [], str(pick)
        return 0.1, 0, [], "0"


def test_probe_writes_gold_points_in_order_and_counts_links_and_false_alarms_per_threshold():
    judge = ScriptedJudge()
    rows = probe(TINY, {"fake": judge}, HashEmbedder(dim=256).encode, n_facts=6, min_similarity=-1.0,
                 duplicate_similarity=0.999, held_similarity=0.99)
    kinds = [(r["kind"], r["decided_by"]) for r in rows]
    # user 1: points 2-3 of session 0, then the update and one more; user 2: 2 + 3 points (the first of each has no held point)
    assert [k for k, _ in kinds].count("update") == 2 and [k for k, _ in kinds].count("update_no_target") == 1
    assert all(by == "llm" for _, by in kinds)
    # the interference point ("works at a bank") is never held, so never shown
    assert not any("works at a bank" in text for texts, _ in judge.calls for text in texts)
    by_threshold = {row["threshold"]: row for row in sweep(rows, "fake")}
    assert all(type(value) in (int, float) for row in by_threshold.values() for value in row.values())  # JSON-ready
    assert (by_threshold[0.5]["right"], by_threshold[0.5]["wrong"], by_threshold[0.5]["false_alarms"]) == (2, 0, 1)
    assert (by_threshold[0.65]["right"], by_threshold[0.65]["false_alarms"]) == (2, 0)
    assert (by_threshold[0.95]["right"], by_threshold[0.95]["false_alarms"]) == (0, 0)
    # the two updates score 0.9, the non-update points 0.6 and 0.1: fully separated
    assert separation(rows, "fake") == 1.0 and separation(rows, "absent") is None


def test_the_evaluation_user_is_refused(capsys):
    assert main(["--file", "data/halumem-pilot/halumem_medium_user3.jsonl"]) == 2
    assert "evaluation user" in capsys.readouterr().err
