"""core.atomic: the one write path for state and results files (run records, memories, adapter ledgers)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from core import atomic
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


def test_a_new_file_gets_the_umask_mode_and_a_replaced_file_keeps_its_own(tmp_path):
    """mkstemp's 0600 must not leak into results that other users of a shared box read."""
    fresh = tmp_path / "fresh.json"
    atomic.write_text_atomic(fresh, "{}")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~atomic._UMASK
    kept = tmp_path / "kept.txt"
    kept.write_text("old")
    os.chmod(kept, 0o640)
    atomic.write_text_atomic(kept, "new")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640 and kept.read_text() == "new"
