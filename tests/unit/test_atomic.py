"""core.atomic: the one write path for state and results files (run records, memories, adapter ledgers)."""

from __future__ import annotations

import json
import os

import pytest

from core.atomic import write_json_atomic


def test_json_is_written_in_the_callers_format_into_a_new_folder(tmp_path):
    target = tmp_path / "new" / "metrics.json"
    write_json_atomic(target, {"b": 1, "when": tmp_path}, indent=2, default=str)
    assert target.read_text() == json.dumps({"b": 1, "when": str(tmp_path)}, indent=2)
    write_json_atomic(target, [1, 2])
    assert json.loads(target.read_text()) == [1, 2] and [p.name for p in target.parent.iterdir()] == ["metrics.json"]


@pytest.mark.parametrize("broken", ["replace", "fsync"])
def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp_file(tmp_path, monkeypatch, broken):
    target = tmp_path / "ledger.json"
    write_json_atomic(target, {"turns": 1})

    def fail(*args):
        raise OSError("power cut")

    monkeypatch.setattr(os, broken, fail)
    with pytest.raises(OSError, match="power cut"):
        write_json_atomic(target, {"turns": 2})
    monkeypatch.undo()
    assert json.loads(target.read_text()) == {"turns": 1} and [p.name for p in tmp_path.iterdir()] == ["ledger.json"]
