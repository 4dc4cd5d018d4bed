"""research.halumem_error_analysis: each question rag gets right and MOSAIC does not falls in one mechanism class."""

from __future__ import annotations

import json

import pytest

from research.halumem_error_analysis import analyse, main


def _row(key, label, evidence, retrieved=(), held=(), ever=(), qtype="Basic Fact Recall"):
    return {"key": key, "label": label, "question_type": qtype, "evidence_fact_ids": list(evidence), "retrieved_fact_ids": list(retrieved),
            "evidence_held": list(held), "evidence_ever_held": list(ever)}  # fmt: skip


def _run(tmp_path, name, rows):
    run = tmp_path / name
    run.mkdir()
    (run / "halumem_qa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return run


def test_each_loss_gets_the_first_class_that_fits_and_reach_covers_every_question(tmp_path):
    mosaic = _run(tmp_path, "mosaic", [
        _row("q1", "Omission", []),                                          # no evidence id
        _row("q2", "Hallucination", ["0:p1"]),                               # never held
        _row("q3", "Omission", ["0:p2"], ever=["0:p2"]),                     # held once, superseded
        _row("q4", "Omission", ["1:p1", "0:p3"], held=["0:p3"], ever=["0:p3"]),   # held, not returned
        _row("q5", "Hallucination", ["1:p2"], retrieved=["1:p2", "0:p9"], held=["1:p2"], ever=["1:p2"]),  # returned, answered wrong
        _row("q6", "Correct", ["1:p3"], retrieved=["1:p3"], held=["1:p3"], ever=["1:p3"], qtype="Dynamic Update"),
        _row("q7", "Omission", ["1:p4"], qtype="Dynamic Update"),            # rag wrong too: not a loss
    ])  # fmt: skip
    rag = _run(tmp_path, "rag", [_row(f"q{i}", "Correct", ["x"], retrieved=["x"], held=["x"], ever=["x"]) for i in range(1, 7)]
               + [_row("q7", "Omission", ["1:p4"], held=["1:p4"], ever=["1:p4"]), _row("q8", "Correct", [])])
    result = analyse(mosaic, rag)
    assert result["classes"] == {"no_evidence_id": 1, "never_held": 1, "superseded": 1, "held_not_retrieved": 1, "retrieved_answered_wrong": 1}
    assert (result["shared_questions"], result["only_rag"], result["rag_right_mosaic_not"], result["mosaic_right_rag_not"]) == (7, 1, 5, 0)
    assert result["evidence_reach"]["mosaic"] == {"no_evidence_id": 1, "never_held": 2, "superseded": 1, "held_not_retrieved": 1, "retrieved": 2}
    assert result["evidence_reach"]["rag"] == {"retrieved": 6, "held_not_retrieved": 1}
    assert result["classes_by_question_type"] == {"Basic Fact Recall": {"no_evidence_id": 1, "never_held": 1, "superseded": 1,
                                                                         "held_not_retrieved": 1, "retrieved_answered_wrong": 1}}  # fmt: skip


def test_without_a_rag_run_every_miss_of_mosaic_is_classed(tmp_path):
    mosaic = _run(tmp_path, "mosaic", [_row("q1", "Omission", ["0:p1"]), _row("q2", "Correct", ["0:p2"], retrieved=["0:p2"]),
                                       _row("q3", "Hallucination", ["0:p3"], held=["0:p3"], ever=["0:p3"])])  # fmt: skip
    result = analyse(mosaic, None)
    assert result["rag_run"] is None and (result["shared_questions"], result["classed"], result["rag_right_mosaic_not"]) == (3, 2, None)
    assert result["classes"]["never_held"] == 1 and result["classes"]["held_not_retrieved"] == 1
    assert result["evidence_reach"]["rag"] == {}


def test_rows_without_gold_fact_ids_are_refused_in_one_line(tmp_path, capsys):
    old = _run(tmp_path, "old", [{"key": "q1", "label": "Correct"}])
    new = _run(tmp_path, "new", [_row("q1", "Correct", [])])
    with pytest.raises(SystemExit, match="has no gold fact ids"):
        main([str(old), str(new)])
    assert main([str(new), str(new), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "halumem_error_analysis.md").read_text().startswith("# HaluMem")
