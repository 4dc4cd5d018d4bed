"""eval.rows: the one row writer (JsonlRows) and the one read-only reader (read_rows) of run folders."""

from __future__ import annotations

import json

from eval.rows import SCORED_ROW_FIELD, JsonlRows, read_rows, row_sha256, scores


def test_read_rows_skips_any_damaged_line_naming_file_and_line(tmp_path, caplog):
    """A reader crashed with a bare JSONDecodeError (no file, no line) where the runner recovers."""
    path = tmp_path / "predictions.jsonl"
    path.write_bytes(b'{"key": "a"}\n{"key": "b", "x"\n\xff\xfe not utf-8\n[1, 2]\n{"key": "c"}\n{"key": "d", "tor')
    caplog.set_level("WARNING")
    assert [r["key"] for r in read_rows(path)] == ["a", "c"]
    for line in (2, 3, 4, 6):
        assert f"{path} line {line}:" in caplog.text
    assert path.read_bytes().endswith(b'"tor')  # read only: the torn line is left for the runner to cut


def test_a_replaced_row_is_the_one_every_reader_sees(tmp_path):
    path = tmp_path / "judgements.jsonl"
    rows = JsonlRows(path)
    rows.append({"key": "q0", "label": None})
    rows.append({"key": "q1", "label": "WRONG"})
    rows.append({"key": "q0", "label": "CORRECT"})  # append keeps the first result
    assert rows.get("q0")["label"] is None
    rows.replace({"key": "q0", "label": "CORRECT"})  # a retried failure
    assert rows.get("q0")["label"] == "CORRECT" and len(path.read_text().splitlines()) == 3
    assert JsonlRows(path).get("q0")["label"] == "CORRECT"  # the resumed runner
    assert read_rows(path) == [{"key": "q0", "label": "CORRECT"}, {"key": "q1", "label": "WRONG"}]  # reports
    assert len(read_rows(path, key_field=None)) == 3  # logs without keys keep every line


def test_a_derived_row_is_tied_to_the_row_it_scored_across_a_reload(tmp_path):
    path = tmp_path / "predictions.jsonl"
    rows = JsonlRows(path, input_hash="h")
    rows.append({"key": "q0", "prediction": "Paris", "ids": ("D1:1", "D1:2"), "score": 0.1 + 0.2})
    held = rows.get("q0")
    judgement = {"key": "q0", SCORED_ROW_FIELD: row_sha256(held), "label": "CORRECT"}
    assert scores(judgement, JsonlRows(path, input_hash="h").get("q0"))  # same hash in the resumed process
    assert not scores(judgement, {**held, "prediction": "Lyon"}) and not scores(None, held)
    assert not scores({"key": "q0", "label": "CORRECT"}, held)  # a verdict that does not say what it judged
    assert json.loads(path.read_text())["input_hash"] == "h"
